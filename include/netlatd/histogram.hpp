#pragma once
// Log-linear latency histogram (HDR-style): each power of two is split into
// 2^kSubBucketBits equal sub-buckets, so any recorded value is known to within
// 1/2^kSubBucketBits = 1.5625 % of itself. Values are nanoseconds.
// bcc's log2 histograms are up to 100 % off; this is what percentiles need.
#include <array>
#include <cstdint>
#include <vector>

namespace netlatd {

class Histogram {
public:
  static constexpr unsigned kSubBucketBits = 6;
  static constexpr unsigned kSubBuckets = 1u << kSubBucketBits;  // 64

  struct Bucket {
    uint64_t lower;  // inclusive
    uint64_t upper;  // exclusive
    uint64_t count;
  };

  void record(uint64_t value_ns, uint64_t count = 1) noexcept;
  void merge(const Histogram &other) noexcept;
  void reset() noexcept;

  uint64_t count() const noexcept { return count_; }
  uint64_t sum() const noexcept { return sum_; }
  uint64_t min() const noexcept { return count_ ? min_ : 0; }
  uint64_t max() const noexcept { return max_; }
  double mean() const noexcept;
  // Value at percentile p in [0, 100]: the midpoint of the bucket holding the
  // p-th value (nearest rank), clamped to [min, max]; the first and last rank
  // give min and max exactly; 0 when empty.
  uint64_t percentile(double p) const noexcept;
  std::vector<Bucket> nonempty_buckets() const;

  // Bucket index arithmetic, public for tests.
  static unsigned bucket_index(uint64_t value) noexcept;
  static Bucket bucket_bounds(unsigned index) noexcept;  // count = 0
  static constexpr unsigned kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;

private:
  std::array<uint64_t, kBucketCount> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace netlatd
