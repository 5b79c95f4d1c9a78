#pragma once
// What the daemon's service tests share: netlatd's command line on lo, a
// command run by /bin/sh (stdout redirected, WATCHDOG_PID), the interval
// lines of a run summed, mixed UDP and TCP traffic over lo, and small waits
// and files.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net_fixture.hpp"

namespace nltest::daemon_run {

int64_t ms_since(std::chrono::steady_clock::time_point t);

void sleep_ms(int ms);

void write_file(const std::filesystem::path &p, const std::string &text);

// Each non-empty line of `text` as JSON.
std::vector<nlohmann::json> json_lines(const std::string &text);

struct Totals {
  uint64_t packets = 0, udp = 0, total_count = 0, lines = 0;
  uint64_t reader_unknown = 0, ambiguous_reads = 0, unordered = 0;
  // Matched packets whose stamps were lost before their socket's queue took
  // them (counted, never written): unjoined_reused + unjoined_expired.
  uint64_t unjoined = 0;
  bool final_last = false;
  nlohmann::json last;
};

// The interval lines of `text`, summed; final_last and last are the last one's.
Totals interval_totals(const std::string &text);

// netlatd tracing `port` on lo, then `extra`.
std::vector<std::string> netlatd_on_lo(uint16_t port, std::vector<std::string> extra);

// argv run by /bin/sh with its stdout redirected to `stdout_path` and, when asked,
// WATCHDOG_PID set to its own pid (exec keeps the pid, so it is the daemon's).
std::vector<std::string> via_shell(const std::vector<std::string> &argv, const std::string &stdout_path,
                                   bool watchdog_pid);

// Three readers on lo: UDP over 127.0.0.1 and over ::1 on one port, TCP over
// 127.0.0.1 on another.
struct LoReaders {
  LoReaders(uint16_t udp_port, uint16_t tcp_port);
  const uint16_t udp_port, tcp_port;
  Reader udp4, udp6, tcp4;
};

// Datagrams of 64 bytes, `gap_us` apart.
struct UdpBurst {
  int count;
  int gap_us;
};

// `v4` to the IPv4 reader, `v6` to the IPv6 one, then 30 writes of 100 bytes
// a millisecond apart (3000 bytes, each write its own segment unless the
// stack coalesces them) to the TCP one; REQUIREs that each reader has all
// of its own within 5 s.
void send_mixed(LoReaders &readers, UdpBurst v4, UdpBurst v6);

}  // namespace nltest::daemon_run
