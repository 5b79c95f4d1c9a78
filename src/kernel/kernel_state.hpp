#pragma once
// The state the daemon keeps in the loaded object's maps: where to look
// (`watch`, the IRQ bitmap), which cgroups' readers are kept, the counters
// it reads, and the stale entries it sweeps. The object is owned elsewhere
// (Tracer); this only reads and writes its maps.
#include <array>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <bpf/bpf.h>

#include "bpf_owned.hpp"
#include "netlatd/kernel/tracer.hpp"

namespace netlatd {

class KernelState {
public:
  KernelState(netlatd_bpf &skel, int ncpus, std::span<netlatd_stash_set> stash)
      : skel_(skel), ncpus_(ncpus), stash_(stash) {}

  // Before any program runs: the kept cgroups, each held by the map from
  // its directory's descriptor. Throws Error.
  void hold_cgroups(const std::vector<std::string> &dirs);
  std::vector<Tracer::CgroupChange> refresh_cgroup_filters();
  void set_target(const TraceTarget &t);

  // Frees the stash entries older than their age (see Tracer::sweep_stash).
  Tracer::SweepResult sweep_stash(uint64_t now, uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns);
  // Deletes the TCP segments older than their age; counts them into `r`.
  void sweep_tcp_segments(uint64_t now, uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns,
                          Tracer::SweepResult &r);
  // Every task names itself again in its next record.
  void ask_readers_again();

  // The counts of every CPU, summed: the first member of each CPU's state
  // in `cpu_states` (struct netlatd_cpu_counts, abi.h). All zero if the map
  // cannot be read.
  netlatd_cpu_counts sum_cpu_counts() const;

private:
  netlatd_bpf &skel_;
  int ncpus_;
  std::span<netlatd_stash_set> stash_;  // the UDP stash, mapped (its size is set at load)
  std::set<std::tuple<uint32_t, uint32_t, uint16_t>> watching_;  // keys in `watch`: netns, ifindex, vlan
  // --cgroup: each kept directory and the inode of the cgroup the map holds
  // for it (0: the directory was gone when last looked at).
  std::vector<std::pair<std::string, uint64_t>> cgroup_held_;
};

}  // namespace netlatd
