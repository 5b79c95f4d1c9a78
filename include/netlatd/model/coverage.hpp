#pragma once
// How much of the traffic the histograms stand for: of the matching packets
// (the denominator, from the kernel side's counts), the ones whose stages
// went into the histograms (the numerators, from the histograms themselves).
// docs/OUTPUT.md (Coverage) is the definition; this is its one computation,
// for the interval line, the text view and the metrics alike.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "netlatd/model/interval.hpp"
#include "netlatd/model/snapshot.hpp"
#include "netlatd/model/stages.hpp"

namespace netlatd {

// Below this share the text view marks the interval's coverage as low.
inline constexpr double kCoverageLowBelow = 0.95;

// The kernel side's counts that make up the denominator, cumulative or for
// one interval alike.
struct MatchingCounts {
  uint64_t matched = 0;         // NETLATD_CNT_MATCHED: tracked at netif_receive_skb
  uint64_t inflight_full = 0;   // matched, but no stash entry: not tracked
  uint64_t tcp_segs_full = 0;   // matched, but no segment entry: not tracked
  uint64_t stack_dropped = 0;   // tracked, then dropped by the kernel: never read
  uint64_t cgroup_outside = 0;  // read by a task --cgroup leaves out
};

// Matching packets: those the filter matched at netif_receive_skb (tracked
// or not), less those the kernel dropped and those --cgroup leaves out; 0
// rather than below 0.
uint64_t matching_packets(const MatchingCounts &c);

// The denominator as a count that never goes down: a drop counted after its
// packet (a later reading) lowers matching_packets(); the count then holds
// until new packets make up for it, so the intervals' shares still add up to
// the total and a Prometheus counter never goes back.
class MatchingCount {
public:
  void read(uint64_t matching) {
    if (matching > total_)
      total_ = matching;
  }
  uint64_t total() const { return total_; }
  uint64_t take() {  // since the last take (or the start); marks now
    const uint64_t n = total_ - mark_;
    mark_ = total_;
    return n;
  }

private:
  uint64_t total_ = 0, mark_ = 0;
};

// One share: `recorded` of `matching`. The share is absent when nothing
// matched (no packets is not 100 %), and at most 1: records of packets
// matched in an earlier interval can make `recorded` exceed `matching`.
struct Share {
  uint64_t recorded = 0;
  uint64_t matching = 0;
  std::optional<double> share() const;
  // The share in `units` per whole, rounded down (1000: tenths of a
  // percent), so that a share short of whole never reads as whole.
  std::optional<uint64_t> rounded_down(uint64_t units) const;
  bool low() const { return matching && *share() < kCoverageLowBelow; }
};

struct Coverage {
  Share overall;                                // records added to the histograms
  std::array<std::optional<Share>, kStageCount> stages{};  // absent: stage not applicable
};

// `recorded`: records added to the histograms (packets less unordered);
// `stage_counts`: each stage's histogram count; `applicable`: per stage.
Coverage coverage_of(uint64_t matching, uint64_t recorded, const std::array<uint64_t, kStageCount> &stage_counts,
                     const std::array<bool, kStageCount> &applicable);

// An interval's: `r.matching` and the interval's histograms.
Coverage coverage_of(const ReportHeader &h, const IntervalReport &r);
// Since the daemon started: `m.matching` and the metrics' histograms.
Coverage coverage_of(const MetricsSnapshot &m);

// A share for a person, rounded down to 0.1 %: "99.9 %" (never "100.0 %"
// unless it is whole); "no packets" when nothing matched.
std::string format_share(const Share &s);

}  // namespace netlatd
