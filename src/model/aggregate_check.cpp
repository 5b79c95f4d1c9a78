#include "netlatd/model/aggregate_check.hpp"

#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"

namespace netlatd {

void AggregateCheck::set_breakdown(BreakdownSpec by) {
  kernel_.set_breakdown(by);
  ring_.set_breakdown(by);
}

AggregateCheck::Result AggregateCheck::decide(uint64_t ring_full) const {
  Result r;
  r.difference = compare_aggregates(kernel_, ring_);
  if (!r.difference.empty())
    r.verdict = ring_full ? Verdict::Undecided : Verdict::Failed;
  return r;
}

int AggregateCheck::log_verdict(uint64_t ring_full) const {
  const Result r = decide(ring_full);
  switch (r.verdict) {
  case Verdict::Undecided:
    spdlog::warn("aggregate check: not decided, {} records did not fit the ring ({})", ring_full, r.difference);
    return 0;
  case Verdict::Failed:
    spdlog::error("aggregate check failed: {}", r.difference);
    return static_cast<int>(ExitCode::Software);
  case Verdict::Equal:
    break;
  }
  spdlog::info("aggregate check: the kernel side's histograms equal its {} records' ({} added)", ring_.packets(),
               kernel_.packets());
  return 0;
}

}  // namespace netlatd
