// The coverage's arithmetic (docs/OUTPUT.md, Coverage).
#include "netlatd/model/coverage.hpp"

#include <fmt/format.h>

namespace netlatd {

uint64_t matching_packets(const MatchingCounts &c) {
  // Packets the filter matched but could not track are matching packets
  // with no record: they belong in the denominator, which the kernel's
  // `matched` (counted once an entry is taken) leaves them out of.
  const uint64_t in = c.matched + c.inflight_full + c.tcp_segs_full;
  // Dropped by the stack: no read ever returns them, so no latency to miss.
  // Outside --cgroup: left out on purpose.
  const uint64_t out = c.stack_dropped + c.cgroup_outside;
  return in > out ? in - out : 0;
}

std::optional<double> Share::share() const {
  if (matching == 0)
    return std::nullopt;
  if (recorded >= matching)
    return 1.0;
  return static_cast<double>(recorded) / static_cast<double>(matching);
}

std::optional<uint64_t> Share::rounded_down(uint64_t units) const {
  if (matching == 0)
    return std::nullopt;
  if (recorded >= matching)
    return units;
  // In 128 bits: recorded * units overflows 64 from 1.8e15 packets at
  // units = 10000, and a quotient taken first would round up.
  __extension__ using Wide = unsigned __int128;
  return static_cast<uint64_t>(static_cast<Wide>(recorded) * units / matching);
}

Coverage coverage_of(uint64_t matching, uint64_t recorded, const std::array<uint64_t, kStageCount> &stage_counts,
                     const std::array<bool, kStageCount> &applicable) {
  Coverage c;
  c.overall = Share{recorded, matching};
  for (size_t i = 0; i < kStageCount; i++)
    if (applicable[i])
      c.stages[i] = Share{stage_counts[i], matching};
  return c;
}

Coverage coverage_of(const ReportHeader &h, const IntervalReport &r) {
  static const IntervalAggregator empty;
  const IntervalAggregator &agg = r.data ? *r.data : empty;
  std::array<uint64_t, kStageCount> counts{};
  std::array<bool, kStageCount> applicable{};
  for (size_t i = 0; i < kStageCount; i++) {
    counts[i] = agg.stage(kAllStages[i]).count();
    applicable[i] = h.stages[i].applicable;
  }
  return coverage_of(r.matching, agg.packets() - agg.unordered(), counts, applicable);
}

Coverage coverage_of(const MetricsSnapshot &m) {
  std::array<uint64_t, kStageCount> counts{};
  std::array<bool, kStageCount> applicable{};
  for (size_t i = 0; i < kStageCount; i++)
    applicable[i] = m.stages[i].applicable;
  for (const auto &[key, series] : m.series)
    for (size_t i = 0; i < kStageCount; i++)
      counts[i] += series.latency[i].count();
  const uint64_t packets = m.packets_udp + m.packets_tcp;
  return coverage_of(m.matching, packets > m.unordered ? packets - m.unordered : 0, counts, applicable);
}

std::string format_share(const Share &s) {
  const std::optional<uint64_t> tenths = s.rounded_down(1000);
  if (!tenths)
    return "no packets";
  return fmt::format("{}.{} %", *tenths / 10, *tenths % 10);
}

}  // namespace netlatd
