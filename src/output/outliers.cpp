#include "netlatd/output/outliers.hpp"

namespace netlatd {

OutlierLimiter::OutlierLimiter(std::optional<uint64_t> over_ns, uint32_t per_sec)
    : over_ns_(over_ns), per_sec_(per_sec), tokens_(per_sec) {}

void OutlierLimiter::reconfigure(std::optional<uint64_t> over_ns, uint32_t per_sec) {
  over_ns_ = over_ns;
  per_sec_ = per_sec;
  tokens_ = per_sec;
  last_refill_ = 0;
}

bool OutlierLimiter::is_outlier(const StageDurations &d) const {
  if (!over_ns_)
    return false;
  // A record without a total (no reader named, or stamps left out because
  // they could be another copy's) is shown only when every record is asked
  // for (--outliers-over 0).
  const auto total = d[Stage::Total];
  return *over_ns_ == 0 || (total && *total > *over_ns_);
}

bool OutlierLimiter::admit(int64_t now_ns) {
  if (now_ns - last_refill_ >= 1000000000ll) {
    tokens_ = per_sec_;
    last_refill_ = now_ns;
  }
  if (tokens_ == 0) {
    rate_limited_++;
    return false;
  }
  tokens_--;
  return true;
}

}  // namespace netlatd
