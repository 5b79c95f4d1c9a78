#pragma once
// Loading the BPF object: its rodata set from the configuration, exactly the
// programs the hook plan chose, through the verifier; then attaching them.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bpf_owned.hpp"
#include "netlatd/kernel/hooks.hpp"
#include "netlatd/kernel/tracer.hpp"

namespace netlatd {

// --aggregate: how the kernel side splits its histograms (0 series: off).
struct AggregateLayout {
  uint32_t by = 0;  // NETLATD_AGG_BY_* bits
  uint32_t nseries = 0;
  std::vector<uint16_t> ports;  // the dport of each series index
};

struct LoadedObject {
  Skeleton skel;
  int ncpus = 1;  // possible CPUs: the per-CPU maps' width
  std::vector<std::pair<std::string, bpf_program *>> programs;  // hook label, program: the plan's choice
  Tracer::VerifierWalk walk;
  AggregateLayout aggregate;
  std::span<netlatd_stash_set> stash;  // mapped: the daemon expires stale entries in place
};

// Opens the object, sets its rodata and loads the chosen programs. Throws
// Error: Usage for a configuration the object cannot hold, Unavailable when
// the kernel refuses the programs.
LoadedObject load_programs(const HookPlan &plan, const TracerConfig &config);
// Attaches each loaded program; on failure none stays attached (Error,
// Unavailable).
std::vector<Link> attach_programs(const LoadedObject &object);

}  // namespace netlatd
