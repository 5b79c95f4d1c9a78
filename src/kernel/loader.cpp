#include "loader.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "libbpf_log.hpp"
#include "netlatd/base/clock.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/kernel/ksyms.hpp"
#include "udp/order/types.h"  // after abi.h (loader.hpp): its slots hold a netlatd_rx

namespace netlatd {
namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// Highest possible NUMA node + 1 (the kernel's nr_node_ids): how many
// per-node producer queues each UDP socket has on 6.18.
uint32_t numa_nodes() {
  std::FILE *f = std::fopen("/sys/devices/system/node/possible", "r");
  if (!f)
    return 1;
  char buf[128] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // "0", "0-1", "0,2-3": the last number is the highest node.
  long last = 0;
  for (char *p = buf; *p;) {
    char *end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p) {
      p++;
      continue;
    }
    last = v;
    p = end;
  }
  return static_cast<uint32_t>(last + 1);
}

// The addresses of the wake functions a reader asleep in a receive call
// waits with.
void set_wake_functions(netlatd_bpf &skel) {
  const std::vector<uint64_t> wake_fns = kernel_text_addresses({"receiver_wake_function", "woken_wake_function"});
  skel.rodata->targ_receiver_wake_fn = wake_fns[0];
  skel.rodata->targ_woken_wake_fn = wake_fns[1];
  if (!skel.rodata->targ_receiver_wake_fn || !skel.rodata->targ_woken_wake_fn)
    spdlog::warn("kernel addresses hidden from netlatd (kernel.kptr_restrict, kernel.perf_event_paranoid; "
                 "CAP_SYSLOG shows them): readers asleep in a receive call are not recognised, so their sock_queue/oncpu split is left out where no hook gives the call's start");
}

void set_rodata(netlatd_bpf &skel, const HookPlan &plan, const TracerConfig &config) {
  if (config.ports.size() > NETLATD_MAX_PORTS)
    throw Error(ExitCode::Usage, "too many ports");
  for (size_t i = 0; i < config.ports.size(); i++)
    skel.rodata->targ_ports[i] = config.ports[i];
  skel.rodata->targ_nports = static_cast<__u32>(config.ports.size());
  skel.rodata->targ_sample_below = sample_below(config.sample);
  skel.rodata->targ_count_ops = config.count_ops;
  skel.rodata->targ_wakeup_bytes = config.ringbuf_bytes / 4;
  skel.rodata->targ_reader_cgroup = config.reader_cgroup;
  if (config.cgroup_dirs.size() > NETLATD_MAX_CGROUP_FILTERS)
    throw Error(ExitCode::Usage, "--cgroup: at most " + std::to_string(NETLATD_MAX_CGROUP_FILTERS) + " cgroups");
  skel.rodata->targ_ncgroup_filters = static_cast<__u32>(config.cgroup_dirs.size());
  skel.rodata->targ_udp_join = static_cast<__u32>(plan.udp_join);
  // fentry runs before the datagram is queued: its slot exists before any
  // read can take it.
  skel.rodata->targ_push_before_queue = plan.label(Point::UdpEnqueue).rfind("fentry/", 0) == 0;
  skel.rodata->targ_numa_nodes = numa_nodes();
  skel.rodata->targ_preempt_count = static_cast<__u32>(plan.preempt_count);
  skel.rodata->targ_preempt_count_from_rq = plan.preempt_count_from_rq;
  set_wake_functions(skel);
  if (int err = bpf_map__set_max_entries(skel.maps.events, config.ringbuf_bytes))
    throw Error(ExitCode::Software, "cannot size the ring buffer: " + errno_text(err));
}

// The UDP stash sized before load: its section's value (the one array of
// sets in it) and the set mask the kernel side indexes it with. libbpf adjusts the
// section's BTF to the new size, and moves the section's memory: the
// skeleton's pointer to it is stale until load.
void size_stash(netlatd_bpf &skel, uint32_t entries) {
  if (const std::string why = stash_entries_error(entries); !why.empty())
    throw Error(ExitCode::Usage, "--stash-entries " + why);
  const uint32_t sets = entries / NETLATD_STASH_WAYS;
  if (int err = bpf_map__set_value_size(skel.maps.data_stash, sets * sizeof(netlatd_stash_set)))
    throw Error(ExitCode::Software, "cannot size the UDP stash: " + errno_text(err));
  skel.rodata->targ_stash_set_mask = sets - 1;
}

// What a UDP resync writes out, one buffer per possible CPU (48 KiB each);
// only one where the kernel names reads and nothing resyncs.
void size_resync_outs(netlatd_bpf &skel, const HookPlan &plan, int ncpus) {
  const uint32_t n = plan.udp_join == UdpJoin::Consume ? 1 : static_cast<uint32_t>(ncpus);
  if (int err = bpf_map__set_max_entries(skel.maps.udp_resync_outs, n))
    throw Error(ExitCode::Software, "cannot size the UDP resync buffers: " + errno_text(err));
}

// The stash as the kernel holds it, mapped into the daemon at load.
std::span<netlatd_stash_set> mapped_stash(netlatd_bpf &skel) {
  size_t bytes = 0;
  auto *first = static_cast<netlatd_stash_set *>(bpf_map__initial_value(skel.maps.data_stash, &bytes));
  if (!first || bytes != (skel.rodata->targ_stash_set_mask + size_t{1}) * sizeof(netlatd_stash_set))
    throw Error(ExitCode::Software, "the UDP stash is not mapped as sized");
  return {first, bytes / sizeof(netlatd_stash_set)};
}

// --aggregate: the series the kernel side splits by, and its maps sized.
AggregateLayout set_aggregate(netlatd_bpf &skel, const TracerConfig &config, int ncpus) {
  AggregateLayout layout;
  if (!config.aggregate)
    return layout;
  uint32_t by = 0, nseries = 1;
  if (config.agg_by.dport) {
    by |= NETLATD_AGG_BY_DPORT;
    nseries *= static_cast<uint32_t>(std::max<size_t>(config.ports.size(), 1));
  }
  if (config.agg_by.proto) {
    by |= NETLATD_AGG_BY_PROTO;
    nseries *= 2;
  }
  if (config.agg_by.family) {
    by |= NETLATD_AGG_BY_FAMILY;
    nseries *= 2;
  }
  if (config.agg_by.cgroup || config.agg_by.iface)
    throw Error(ExitCode::Usage, "--aggregate: the kernel side splits by dport, proto and family only");
  skel.rodata->targ_aggregate = true;
  skel.rodata->targ_aggregate_check = config.aggregate_check;
  skel.rodata->targ_agg_by = by;
  skel.rodata->targ_agg_nseries = nseries;
  skel.rodata->targ_agg_ncpus = static_cast<__u32>(ncpus);
  layout.by = by;
  layout.nseries = nseries;
  layout.ports = config.ports;
  if (int err = bpf_map__set_max_entries(skel.maps.agg_blocks, 2 * nseries * static_cast<uint32_t>(ncpus)))
    throw Error(ExitCode::Software, "cannot size the --aggregate histograms: " + errno_text(err));
  return layout;
}

// Keep exactly the programs the plan chose; a chosen one missing from the
// object is a build that does not match this source, never skipped.
std::vector<std::pair<std::string, bpf_program *>> choose_programs(netlatd_bpf &skel, const HookPlan &plan) {
  std::vector<std::pair<std::string, bpf_program *>> chosen;
  for (const HookChoice &c : plan.choices) {
    if (!c.chosen)
      continue;
    bpf_program *p = bpf_object__find_program_by_name(skel.obj, std::string(c.chosen->program).c_str());
    if (!p)
      throw Error(ExitCode::Software, "the BPF object has no program " + std::string(c.chosen->program) + " for " +
                                          hook_label(*c.chosen));
    chosen.emplace_back(hook_label(*c.chosen), p);
  }
  bpf_program *prog;
  bpf_object__for_each_program(prog, skel.obj) {
    const bool kept = std::any_of(chosen.begin(), chosen.end(), [prog](const auto &c) { return c.second == prog; });
    bpf_program__set_autoload(prog, kept);
  }
  return chosen;
}

void load(netlatd_bpf &skel) {
  forget_verifier_verdict();
  if (int err = netlatd_bpf__load(&skel)) {
    std::string why = last_libbpf_warning();
    if (const std::string verdict = last_verifier_verdict(); !verdict.empty())
      why = "the verifier, " + verdict + "; -v shows its whole log";
    throw Error(ExitCode::Unavailable,
                "the kernel refused netlatd's BPF programs: " + errno_text(err) + (why.empty() ? "" : " (" + why + ")"));
  }
}

// What each program cost the verifier (bpf_prog_info.verified_insns,
// 5.16+): a slow start names its program, and a program near the
// verifier's budget shows before a kernel whose verifier walks further
// refuses it.
Tracer::VerifierWalk verifier_walk(const LoadedObject &object, double load_ms) {
  Tracer::VerifierWalk walk;
  walk.load_ms = load_ms;
  for (const auto &[label, p] : object.programs) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_prog_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0)
      continue;
    spdlog::debug("verifier: {}: {} instructions walked, {} loaded", bpf_program__name(p), info.verified_insns,
                  info.xlated_prog_len / 8);
    if (info.verified_insns > walk.most) {
      walk.most = info.verified_insns;
      walk.most_program = bpf_program__name(p);
    }
  }
  return walk;
}

}  // namespace

std::string stash_entries_error(uint64_t entries) {
  if (entries >= NETLATD_STASH_ENTRIES_MIN && entries <= NETLATD_STASH_ENTRIES_MAX && !(entries & (entries - 1)))
    return "";
  return fmt::format("must be a power of two from {} to {} (entries of {} bytes)", NETLATD_STASH_ENTRIES_MIN,
                     NETLATD_STASH_ENTRIES_MAX, kStashEntryBytes);
}

std::string stash_description(uint32_t entries, UdpJoin join) {
  const uint64_t kib = uint64_t{entries} * kStashEntryBytes / 1024;
  const std::string size = kib >= 1024 ? fmt::format("{:g} MiB", static_cast<double>(kib) / 1024) : fmt::format("{} KiB", kib);
  // Where reads are named, an entry waits for its read: with a quarter of
  // the entries queued unread, full sets lose about 4 datagrams in 1,000
  // (abi.h), and more as the queues deepen.
  return fmt::format("{} entries ({}); {}", entries, size,
                     join == UdpJoin::Consume
                         ? fmt::format("holds every UDP datagram queued unread, up to about {} in all before full "
                                       "sets lose some (unjoined_reused)",
                                       entries / 4)
                         : std::string("a UDP datagram leaves it when queued on its socket"));
}

SlotsDescription slots_description(UdpJoin join, uint64_t optmem_max) {
  if (join == UdpJoin::Consume)
    return {};
  // All in one socket's storage, with the kernel's own headers (a few
  // hundred bytes) and whatever else the socket holds there: 1 KiB spare.
  const uint64_t slots_need = sizeof(udp_sock_state) + sizeof(udp_big_state) + 1024;
  const uint64_t need = slots_need + sizeof(udp_spill_state);
  SlotsDescription d;
  d.room = optmem_max == 0 || optmem_max >= need;
  d.text = fmt::format("{} per socket, {} once it needs more, and the stamps of {} past them ({} KiB of socket "
                       "storage); ",
                       UDP_SMALL_SLOTS, UDP_BIG_SLOTS, UDP_SPILL,
                       (sizeof(udp_big_state) + sizeof(udp_spill_state)) / 1024);
  if (optmem_max == 0)
    d.text += "net.core.optmem_max unknown";
  else if (d.room)
    d.text += fmt::format("net.core.optmem_max {} leaves room for them", optmem_max);
  else
    d.text += fmt::format("net.core.optmem_max {} is below the {} they need: a reader more than {} datagrams "
                          "behind counts sock_fifo_full (sysctl -w net.core.optmem_max={})",
                          optmem_max, need, optmem_max >= slots_need ? UDP_BIG_SLOTS : UDP_SMALL_SLOTS,
                          std::bit_ceil(need));
  return d;
}

uint64_t read_optmem_max() {
  std::ifstream f("/proc/sys/net/core/optmem_max");
  uint64_t v = 0;
  return f >> v ? v : 0;
}

uint32_t sample_below(uint32_t n) { return n <= 1 ? 0 : static_cast<uint32_t>((uint64_t{1} << 32) / n); }

LoadedObject load_programs(const HookPlan &plan, const TracerConfig &config) {
  LoadedObject o;
  o.ncpus = libbpf_num_possible_cpus();
  if (o.ncpus <= 0)
    throw Error(ExitCode::Software, "cannot count possible CPUs");
  o.skel.reset(netlatd_bpf__open());
  if (!o.skel)
    throw Error(ExitCode::Unavailable, "cannot open the BPF object: " + errno_text(errno));
  set_rodata(*o.skel, plan, config);
  size_stash(*o.skel, config.stash_entries);
  o.aggregate = set_aggregate(*o.skel, config, o.ncpus);
  size_resync_outs(*o.skel, plan, o.ncpus);
  o.programs = choose_programs(*o.skel, plan);
  const uint64_t load_start = monotonic_ns();
  load(*o.skel);
  o.stash = mapped_stash(*o.skel);
  o.walk = verifier_walk(o, static_cast<double>(monotonic_ns() - load_start) / 1e6);
  return o;
}

std::vector<Link> attach_programs(const LoadedObject &object) {
  std::vector<Link> links;
  for (const auto &[label, p] : object.programs) {
    Link link(bpf_program__attach(p));
    if (!link) {
      const int err = errno;
      throw Error(ExitCode::Unavailable, std::string("cannot attach ") + bpf_program__name(p) + ": " + errno_text(err));
    }
    links.push_back(std::move(link));
  }
  return links;
}

}  // namespace netlatd
