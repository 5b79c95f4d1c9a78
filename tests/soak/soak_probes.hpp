#pragma once
// What the soak reads of the daemon and the kernel: the rx namespace's UDP
// counters, the BPF programs the daemon holds and those loaded, and the
// daemon's memory and CPU from /proc.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace nltest::soak_tier {

// The rx namespace's kernel UDP counters (/proc/net/snmp): name -> value.
std::map<std::string, uint64_t> udp_snmp(const std::string &ns);

std::set<uint32_t> programs_held_by(pid_t pid);
std::set<uint32_t> loaded_program_ids();

// The daemon's memory, sampled twice a second (its CPU time is read at the
// start and the end: cpu_seconds(), Readings).
struct Usage {
  std::vector<uint64_t> rss_kib;  // VmRSS
  uint64_t hwm_kib = 0;           // VmHWM
};

uint64_t status_kib(const std::string &status, const std::string &key);
double cpu_seconds(pid_t pid);

}  // namespace nltest::soak_tier
