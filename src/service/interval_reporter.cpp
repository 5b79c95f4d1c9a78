#include "netlatd/service/interval_reporter.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/output/format.hpp"

namespace netlatd {
namespace {

int64_t seconds_to_ns(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

}  // namespace

IntervalReporter::IntervalReporter(double interval_s, BreakdownSpec by)
    : agg_(by), length_ns_(seconds_to_ns(interval_s)) {}

int64_t IntervalReporter::relength(double interval_s, int64_t due_ns, int64_t now_ns) {
  const int64_t old_ns = length_ns_;
  length_ns_ = seconds_to_ns(interval_s);
  return std::max(now_ns, due_ns - old_ns + length_ns_);
}

std::string IntervalReporter::finish(const ReportHeader &h, Losses &losses, OutputFormat format,
                                     CgroupNames &cgroup_names, bool final, WallClock::time_point now) {
  IntervalReport r;
  r.start = start_;
  r.end = now;
  r.data = &agg_;
  r.final = final;
  losses.end_interval(r);
  total_packets_ += agg_.packets();
  total_lost_ = losses.total_lost();
  const double seconds = std::chrono::duration<double>(r.end - r.start).count();
  last_rate_ = seconds > 0 ? static_cast<double>(agg_.packets()) / seconds : 0;
  last_p99_total_ = agg_.stage(Stage::Total).percentile(99);
  std::string line = format == OutputFormat::Json ? format_json_line(h, r, &cgroup_names) : format_text(h, r);
  agg_.reset();
  start_ = now;
  return line;
}

std::string IntervalReporter::status(const ReportHeader &h, size_t present, bool several,
                                     uint64_t output_dropped) const {
  if (present == 0)
    return fmt::format("interface {} is gone, waiting for it to come back; {} packets measured so far", h.iface,
                       total_packets_);
  const std::string p99 = last_p99_total_ ? format_duration(last_p99_total_) : std::string("-");
  const std::string where = several ? fmt::format("{} interfaces of {}", present, h.iface)
                                    : fmt::format("{} (ifindex {})", h.iface, h.ifindex);
  return fmt::format("tracing {} ports {}: {} packets measured, {:.1f}/s and total p99 {} "
                     "last interval; {} lost, {} output lines dropped",
                     where, fmt::join(h.ports, ","), total_packets_, last_rate_, p99, total_lost_, output_dropped);
}

}  // namespace netlatd
