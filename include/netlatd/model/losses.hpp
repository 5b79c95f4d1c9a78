#pragma once
// What netlatd could not measure, and the counts that say how complete the
// measurement is: the kernel side's cumulative counters (the `drops` and
// `counters` blocks of each CPU's state, each program's recursion misses), the daemon's
// own (expired state, output lines dropped, outliers rate-limited), each
// interval's share of them for the JSON line and the running totals for the
// metrics. Pure: it is fed readings (KernelCounts), so the unit tier checks it
// without a kernel.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <linux/types.h>
#include "netlatd/abi.h"
#include "netlatd/model/coverage.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/model/snapshot.hpp"

namespace netlatd {

// A loss reason's name in the interval line and the metrics
// (NETLATD_DROP_RINGBUF_FULL: "ringbuf_full"); "unknown" out of range.
const char *drop_name(int reason);
// The name of an operation --count-ops counts (enum netlatd_op): "lock_pairs", ...
const char *op_name(int op);

// One reading of the kernel side's cumulative counters, summed over CPUs.
struct KernelCounts {
  std::array<uint64_t, NETLATD_DROP_COUNT> drops{};
  std::array<uint64_t, NETLATD_CNT_COUNT> counters{};
  std::map<std::string, uint64_t> hook_misses;  // hook label -> recursion misses since load
  // --count-ops: the programs' operations since load (enum netlatd_op); absent without it.
  std::optional<std::array<uint64_t, NETLATD_OP_COUNT>> ops;
};

// A cumulative count read again and again. Its total never wraps: a reading
// below the last one is a counter that started again from 0 (its programs
// loaded anew), so the reading is all new; the total keeps what came before.
class RunningCount {
public:
  RunningCount() = default;
  // Counting from `first` on: the total starts there, the interval at 0.
  explicit RunningCount(uint64_t first) : last_(first), total_(first), mark_(first) {}
  void read(uint64_t reading);
  void add(uint64_t n) { total_ += n; }  // a count the daemon keeps itself
  uint64_t total() const { return total_; }
  uint64_t since_mark() const { return total_ - mark_; }
  // What came since the last call (or since counting began); marks now.
  uint64_t take();

private:
  uint64_t last_ = 0, total_ = 0, mark_ = 0;
};

class Losses {
public:
  // `cgroup_filter`: --cgroup is set (its counts are shown); `napi`: the
  // napi_poll hook is attached (its counts are shown).
  Losses(bool cgroup_filter, bool napi) : cgroup_filter_(cgroup_filter), napi_(napi) {}

  // The kernel's counts when tracing starts. Intervals and metrics alike
  // count from the programs' load, not from this reading: what was counted
  // before it (reads of traffic sent once the daemon said READY) goes to the
  // first interval, as the records of that time do.
  void start(const KernelCounts &k);
  // A reading: the kernel's counts, and the daemon's cumulative output lines
  // dropped and outlier lines rate-limited.
  void read(const KernelCounts &k, uint64_t output_dropped, uint64_t outliers_rate_limited);
  // The interval's sweep of stale kernel state (Tracer::sweep).
  void add_expired(uint64_t unjoined, uint64_t unread);

  // The interval's share since the last call, into its line; starts the next.
  void end_interval(IntervalReport &r);
  // The totals into the metrics (netlatd_losses_total and the rest).
  void publish(MetricsSnapshot &m) const;

  uint64_t counter(int index) const { return counters_[static_cast<size_t>(index)].total(); }
  uint64_t drop(int reason) const { return drops_[static_cast<size_t>(reason)].total(); }
  // Every kernel drop (stack_dropped too) and the expired state: the status line's "lost".
  uint64_t total_lost() const;
  // The detaching line's list, "ringbuf_full 3, order_lost 1", or "none".
  std::string summary() const;

private:
  uint64_t matching_now() const;

  bool cgroup_filter_, napi_;
  std::array<RunningCount, NETLATD_DROP_COUNT> drops_{};
  std::array<RunningCount, NETLATD_CNT_COUNT> counters_{};
  std::map<std::string, RunningCount> hook_misses_;
  std::optional<std::array<RunningCount, NETLATD_OP_COUNT>> ops_;  // --count-ops
  MatchingCount matching_;  // the coverage's denominator, from the counts above
  RunningCount unjoined_expired_, unread_expired_, output_dropped_, outliers_rate_limited_;
};

}  // namespace netlatd
