#pragma once
// Owns everything netlatd puts in the kernel: the BPF object, its maps, the
// links of the chosen programs and the ring buffer reader. Destroying the
// Tracer detaches everything; so does the process dying (links are owned by
// file descriptors, nothing is pinned).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <linux/types.h>
#include "netlatd/abi.h"
#include "netlatd/model/breakdown.hpp"
#include "netlatd/kernel/hooks.hpp"
#include "netlatd/model/losses.hpp"

namespace netlatd {

struct TracerConfig {
  std::vector<uint16_t> ports;
  uint32_t ringbuf_bytes = 4u << 20;
  // --stash-entries: the UDP stash's entries (abi.h), a power of two from
  // NETLATD_STASH_ENTRIES_MIN to NETLATD_STASH_ENTRIES_MAX.
  uint32_t stash_entries = NETLATD_STASH_ENTRIES_DEFAULT;
  uint32_t sample = 1;  // --sample: one in this many matching packets is kept, at the filter
  bool count_ops = false;  // --count-ops: the programs count their operations (op_totals)
  bool reader_cgroup = false;  // records carry the reader's cgroup id (--by cgroup)
  // --cgroup: directories of the cgroups whose readers' records are kept
  // (at most NETLATD_MAX_CGROUP_FILTERS); empty = every reader.
  std::vector<std::string> cgroup_dirs;
  // --aggregate: the kernel side keeps the per-stage histograms, split by
  // the dport, proto and family of `agg_by`; --aggregate-check: and writes
  // every record too, marked.
  bool aggregate = false;
  bool aggregate_check = false;
  BreakdownSpec agg_by;
};

// --sample N as the filter's bound (targ_sample_below): a packet is kept
// when a 32-bit draw is below it. 0 for N <= 1: every packet, no draw.
uint32_t sample_below(uint32_t n);

// What one entry of the UDP stash takes: its share of its set (abi.h).
inline constexpr size_t kStashEntryBytes = sizeof(netlatd_stash_set) / NETLATD_STASH_WAYS;

// Whether `entries` can size the UDP stash (--stash-entries): "" if so, else
// what it must be ("must be a power of two from ...").
std::string stash_entries_error(uint64_t entries);
// The stash's size and what fills it under `join`, for --check and the start
// log: "32768 entries (2 MiB); ...".
std::string stash_description(uint32_t entries, UdpJoin join);
// Where reads are tied by queue order, what a socket's slots take of the
// socket storage net.core.optmem_max allows (`optmem_max`, 0 if unknown),
// for --check and the start log; `room` says whether a socket can have all
// of them. "" where the kernel names reads (no slots).
struct SlotsDescription {
  std::string text;
  bool room = true;
};
SlotsDescription slots_description(UdpJoin join, uint64_t optmem_max);
// net.core.optmem_max of netlatd's own network namespace, 0 if unreadable.
uint64_t read_optmem_max();

// A device whose packets count for a traced interface: the interface
// itself, or a device below it (a bond's slave, a VLAN's real device with
// the VLAN's id). One entry of the kernel's `watch` map.
struct WatchedDevice {
  uint32_t ifindex = 0;
  uint16_t vlan = 0;      // the tag its packets for that interface carry; 0 untagged
  uint32_t iface_id = 0;  // the traced interface's number (records carry it)
  bool upper = false;     // a traced interface with devices below it
  bool irq = false;       // it has IRQ lines (a NIC): its packets take the IRQ and raise of their NET_RX run
  auto operator<=>(const WatchedDevice &) const = default;
};

// Where to look: set at start and again whenever a traced interface or a
// device below one comes, goes or changes.
struct TraceTarget {
  uint32_t netns_inode = 0;  // the namespace of every device below
  std::vector<WatchedDevice> devices;
  std::vector<int> irqs;     // the devices' IRQ lines (none on lo, veth)
};

class Tracer {
public:
  using RecordFn = std::function<void(const netlatd_packet &)>;

  // Opens, loads and attaches the programs the plan chose. Throws Error.
  Tracer(const HookPlan &plan, const TracerConfig &config, RecordFn on_record);
  ~Tracer();
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;

  // Throws Error(Software) when the kernel refuses a map update.
  void set_target(const TraceTarget &t);

  // Newly attached tracepoint programs start firing a moment after attach
  // returns (0.2-0.5 s seen on 6.18): sends datagrams to itself over
  // 127.0.0.1 until the receive, enqueue and receive-return hooks have run.
  // Returns false on timeout.
  bool wait_until_live(int timeout_ms);

  // Drains the ring buffer: waits up to timeout_ms for a wake-up, then
  // consumes what is there (records are mostly submitted without a wake-up,
  // see targ_wakeup_bytes), at most kPollBudget records, so that a flood
  // cannot keep the caller from its signals and timers. Returns the records
  // consumed: kPollBudget means more may be waiting.
  static constexpr int kPollBudget = 16384;
  int poll(int timeout_ms);
  int ring_epoll_fd() const;

  // --cgroup: a kept cgroup removed and made again under the same path (a
  // restarted systemd unit or container) is a new cgroup; the kernel's map
  // still holds the removed one. Looks at each kept path (an open and a
  // stat each) and holds the cgroup now there. Returns what changed.
  struct CgroupChange {
    size_t index;  // in TracerConfig::cgroup_dirs
    enum { Gone, Followed } what;
  };
  std::vector<CgroupChange> refresh_cgroup_filters();

  // --aggregate: moves what the kernel side added since the last call into
  // `out`, one entry per series with packets. Writers switch to the other
  // side first; a side is read once every writer that began before the
  // switch is done. Returns false when they are not within `wait_ms` (a
  // vCPU stalled mid-write): nothing is lost, that side is read by a later
  // call. Cheap without --aggregate (returns true at once).
  bool drain_aggregate(std::vector<KernelSeries> &out, int wait_ms = 100);
  // --aggregate: a record whose total is over this is an outlier, written to
  // the ring (nullopt: no outliers; 0: every record).
  void set_aggregate_outliers(std::optional<uint64_t> over_ns);
  // Kernel memory the --aggregate histograms take (both sides, every CPU).
  uint64_t aggregate_bytes() const;
  // The UDP stash's entries as loaded (64 bytes each).
  size_t stash_entries() const;
  // Detaches every program now (the destructor does too): what they wrote
  // can then be read to the end.
  void detach();

  size_t programs_attached() const;
  // What loading the programs cost: the time, and the program the verifier
  // walked most (instructions it processed, bpf_prog_info.verified_insns; 0
  // on kernels before 5.16), against its budget of 1,000,000 per program.
  struct VerifierWalk {
    double load_ms = 0;
    uint64_t most = 0;
    std::string most_program;
  };
  static constexpr uint64_t kVerifierBudget = 1'000'000;
  const VerifierWalk &verifier_walk() const;
  std::array<uint64_t, NETLATD_DROP_COUNT> drop_totals() const;
  std::array<uint64_t, NETLATD_CNT_COUNT> counter_totals() const;
  // --count-ops: the programs' operations since load; nullopt without it.
  std::optional<std::array<uint64_t, NETLATD_OP_COUNT>> op_totals() const;
  // Per hook (its label, "tp_btf/tcp_probe"): the times its program did not
  // run because it was already running on that CPU (a softirq interrupting
  // it in process context), since it was loaded. The kernel counts them
  // (bpf_prog_info.recursion_misses, 5.12+; 0 before).
  std::map<std::string, uint64_t> hook_misses() const;

  struct SweepResult {
    uint64_t expired_inflight = 0;  // matched, never queued on a socket (and not seen dropped)
    uint64_t expired_unread = 0;    // queued on a socket, never read (TCP: closed first; UDP: a reader gone)
    size_t readers_forgotten = 0;   // readers that named no record for a minute (RecordDecoder::prune)
  };
  // Removes state older than the given ages (CLOCK_MONOTONIC ns).
  SweepResult sweep(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns);
  // The UDP stash alone (memory mapped: no system call), often: a datagram
  // a read took before its data-ready call leaves its entry there, and its
  // loss shows in the counts once the entry expires, not a whole interval
  // later. The TCP segments (a map walk, a system call per entry) and the
  // readers wait for sweep().
  // Where the kernel names reads, a queued datagram keeps its entry until
  // read: those expire after unread_max_age_ns, as unread.
  SweepResult sweep_stash(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One reading of the kernel side's cumulative counters (model/losses.hpp).
KernelCounts read_kernel_counts(const Tracer &tracer);

// Routes libbpf's messages through spdlog (debug level; visible with --verbose).
void route_libbpf_logs();
// The last warning libbpf printed, to explain a failed load.
std::string last_libbpf_warning();

// From a libbpf warning holding a verifier log, why the verifier refused the
// program ("program NAME: VERDICT"); "" for any other message.
std::string verifier_verdict(const std::string &log);

}  // namespace netlatd
