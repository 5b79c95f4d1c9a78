#pragma once
// The daemon's intervals: what one aggregates, when it ends, the line it
// becomes, and the running figures the status line shows.
#include <chrono>
#include <cstdint>
#include <string>

#include "netlatd/model/interval.hpp"
#include "netlatd/model/losses.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/service/options.hpp"

namespace netlatd {

class IntervalReporter {
public:
  using WallClock = std::chrono::system_clock;

  IntervalReporter(double interval_s, BreakdownSpec by);

  // Where the interval's records and kernel series go.
  IntervalAggregator &aggregate() { return agg_; }
  int64_t length_ns() const { return length_ns_; }
  // A reload's new length. The running interval then ends at its start plus
  // the new length, or now: returns that, from its current end `due_ns`
  // (both CLOCK_MONOTONIC).
  int64_t relength(double interval_s, int64_t due_ns, int64_t now_ns);

  void start(WallClock::time_point now) { start_ = now; }
  // Ends the interval at `now`: its line (`format`), with the losses' share
  // of it; the next interval starts at `now`, empty.
  std::string finish(const ReportHeader &h, Losses &losses, OutputFormat format, CgroupNames &cgroup_names,
                     bool final, WallClock::time_point now);

  // The status systemd shows: `present` of the traced interfaces are there;
  // `several`: more than one is traced, or a set (all, irq).
  std::string status(const ReportHeader &h, size_t present, bool several, uint64_t output_dropped) const;
  uint64_t packets() const { return total_packets_; }  // measured since start

private:
  IntervalAggregator agg_;
  int64_t length_ns_;
  WallClock::time_point start_;
  uint64_t total_packets_ = 0, total_lost_ = 0;
  double last_rate_ = 0;
  uint64_t last_p99_total_ = 0;
};

}  // namespace netlatd
