#pragma once
// One interval's aggregate: per stage over all packets and per series of
// the breakdown (--by), and what the interval line carries besides (losses,
// reads not named). How it is written is output/format.hpp.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/model/histogram.hpp"
#include "netlatd/model/stages.hpp"

namespace netlatd {

// Fixed for the life of a run (or until SIGHUP reload / interface re-appears).
struct ReportHeader {
  std::string host;
  std::string iface;  // --iface as given, comma-joined: "eth0", "eth0,bond0", "all"
  int ifindex = 0;    // of the one interface named; 0 when several or a set are traced, or it is gone
  // The traced interfaces by their number in the records (every one seen in
  // this run: a number keeps its name), for the `iface` key and outliers.
  IfaceNames iface_names;
  std::vector<uint16_t> ports;
  uint32_t sample = 1;  // --sample: one in this many matching packets kept
  std::string kernel;  // uname -r
  std::string version; // netlatd version
  // Per stage: the hook each end of it is measured at, e.g. "tp_btf/netif_receive_skb",
  // and whether it applies to this interface at all (the irq stage does not on lo/veth).
  struct StageHooks {
    std::string start_hook;
    std::string end_hook;
    bool applicable = true;
    std::string why_not;  // when !applicable, e.g. "interface has no IRQ lines (lo, veth)"
  };
  std::array<StageHooks, kStageCount> stages;
};

// Aggregates the records of one interval: per stage over all packets, and
// per series of the breakdown (--by).
class IntervalAggregator {
public:
  explicit IntervalAggregator(BreakdownSpec by = {}) : by_(by) {}
  // Records every stage whose duration is known. A series' first record
  // allocates it (not noexcept, unlike the totals).
  void add(const netlatd_packet &p);
  void add(const netlatd_packet &p, const StageDurations &d);  // d: stage_durations(p)
  // What the kernel side added (--aggregate): records that were all named,
  // in order, each stage known exactly as add() would have it.
  void add(const KernelSeries &k);
  void reset() noexcept;  // keeps the series it has, emptied
  // Another split from the next record on; drops the series.
  void set_breakdown(BreakdownSpec by);
  const BreakdownSpec &breakdown() const noexcept { return by_; }
  // Every series seen since the aggregator was made or re-split; those with
  // no packet since the last reset have packets == 0.
  const SeriesMap &series() const noexcept { return series_; }
  uint64_t packets() const noexcept { return packets_; }
  uint64_t packets_udp() const noexcept { return udp_; }
  uint64_t packets_tcp() const noexcept { return tcp_; }
  uint64_t tcp_bytes() const noexcept { return tcp_bytes_; }  // payload of the TCP records
  uint64_t unordered() const noexcept { return unordered_; }  // records whose stamps were out of order
  // Records with the packet's stamps only: which read returned it cannot be proved.
  uint64_t reader_unknown() const noexcept { return reader_unknown_; }
  // All series merged: each record is recorded once, in its series, and the
  // totals are made when asked (once per change), not per record.
  const Histogram &stage(Stage s) const noexcept;

private:
  BreakdownSpec by_;
  SeriesMap series_;
  mutable std::array<Histogram, kStageCount> stages_{};
  mutable bool stages_stale_ = false;
  uint64_t packets_ = 0, udp_ = 0, tcp_ = 0, unordered_ = 0, reader_unknown_ = 0, tcp_bytes_ = 0;
};

// --aggregate-check: "" when both hold the same series, packets and
// histograms (counts, sums, minima, maxima, buckets); else the first
// difference, in one line.
std::string compare_aggregates(const IntervalAggregator &kernel, const IntervalAggregator &records);

// NAPI polls of the watched interface in one interval (tp_btf/napi_poll).
struct NapiStats {
  uint64_t polls = 0;
  uint64_t packets = 0;
  uint64_t budget_exhausted = 0;  // polls that used their whole budget
};

struct IntervalReport {
  std::chrono::system_clock::time_point start;
  std::chrono::system_clock::time_point end;
  const IntervalAggregator *data = nullptr;
  // Losses during the interval, by name (deltas, not totals): "ringbuf_full",
  // "inflight_full", "sock_fifo_full", "sockets_full", "stack_dropped",
  // "untracked_dequeue", "unjoined_expired", "output_queue_full", ...
  std::map<std::string, uint64_t> drops;
  // UDP reads whose datagram could not be named (docs/JOIN.md), and reads of
  // datagrams netlatd never tracked (another interface, queued before start).
  uint64_t ambiguous_reads = 0;
  uint64_t untracked_reads = 0;
  // Reads that took a tracked datagram before its socket's data-ready call
  // looked (queue order): the datagram's record has no reader.
  uint64_t early_reads = 0;
  // Records without their socket-queue stamp: the hook that stamps the
  // queueing did not run for them (see hook_misses).
  uint64_t queue_unseen = 0;
  uint64_t sampled_out = 0;  // matching packets --sample left out at the filter
  uint64_t reader_stamps_far = 0;  // reader stamps left out of records: over 4.29 s before the return
  // Bytes TCP reads returned on sockets with a tracked segment; the records'
  // own bytes (data->tcp_bytes()) against it say how much went unreported.
  uint64_t tcp_bytes_read = 0;
  uint64_t tcp_bytes_skipped = 0;  // of those, in gaps no record covers
  // Per hook, the times its BPF program did not run because it was already
  // running on that CPU: each may be a stamp missing from a record.
  std::map<std::string, uint64_t> hook_misses;
  std::optional<NapiStats> napi;  // absent without the napi_poll hook
  // --cgroup: records left out this interval, "outside" and "no_reader";
  // empty (and absent from the JSON) without --cgroup.
  std::map<std::string, uint64_t> cgroup_filtered;
  // --count-ops: the BPF programs' operations this interval, by op_name();
  // empty (and absent from the JSON) without it.
  std::map<std::string, uint64_t> ops;
  // Matching packets this interval: the coverage's denominator
  // (model/coverage.hpp); the histograms give the numerators.
  uint64_t matching = 0;
  bool final = false;  // the partial interval flushed at shutdown
};
}  // namespace netlatd
