#pragma once
// Which records are written as outlier lines (--outliers-over), and at most
// how many a second (--outliers-max-per-sec): a token bucket refilled each
// second. What it keeps back is counted (losses: outliers_rate_limited).
#include <cstdint>
#include <optional>

#include "netlatd/model/stages.hpp"

namespace netlatd {

class OutlierLimiter {
public:
  // `over_ns`: a record whose total is over it is an outlier (nullopt: none
  // is; 0: every record is, even one without a total).
  OutlierLimiter(std::optional<uint64_t> over_ns, uint32_t per_sec);

  // Whether a record with these stages (stage_durations) is an outlier.
  bool is_outlier(const StageDurations &d) const;
  // Whether an outlier's line may be written at CLOCK_MONOTONIC `now_ns`;
  // one that may not is counted.
  bool admit(int64_t now_ns);
  // A reload: the new limits, with a full bucket; the count is kept.
  void reconfigure(std::optional<uint64_t> over_ns, uint32_t per_sec);
  // Outliers kept back by the limit, since start.
  uint64_t rate_limited() const { return rate_limited_; }

private:
  std::optional<uint64_t> over_ns_;
  uint32_t per_sec_;
  uint32_t tokens_;
  int64_t last_refill_ = 0;
  uint64_t rate_limited_ = 0;
};

}  // namespace netlatd
