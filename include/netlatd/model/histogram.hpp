#pragma once
// Log-linear latency histogram (HDR-style): each power of two is split into
// 2^kSubBucketBits equal sub-buckets, so any recorded value is known to within
// 1/2^kSubBucketBits = 1.5625 % of itself. Values are nanoseconds.
// bcc's log2 histograms are up to 100 % off; this is what percentiles need.
//
// The counters of one power of two (a chunk of kSubBuckets, 512 bytes) are
// allocated by the first record into it: a stage seen from 1 µs to 100 ms
// holds at most 18 chunks (9 KiB), not all 59 (30 KiB, resident from
// construction). reset() keeps the chunks, so an interval's aggregate
// allocates nothing once its range has been seen.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "netlatd/stage_math.h"

namespace netlatd {

class Histogram {
public:
  // The bucket layout is the stage math's (netlatd/stage_math.h), which the
  // kernel side's --aggregate histograms use too.
  static constexpr unsigned kSubBucketBits = NETLATD_SUB_BUCKET_BITS;
  static constexpr unsigned kSubBuckets = NETLATD_SUB_BUCKETS;  // 64

  struct Bucket {
    uint64_t lower;  // inclusive
    uint64_t upper;  // exclusive
    uint64_t count;
  };

  Histogram() noexcept = default;
  // A copy is deep: it owns chunks of its own (only those holding counts).
  Histogram(const Histogram &other);
  Histogram &operator=(const Histogram &other);
  // A moved-from histogram is empty and may record again.
  Histogram(Histogram &&other) noexcept;
  Histogram &operator=(Histogram &&other) noexcept;
  ~Histogram() = default;

  // The first record into a power of two allocates its chunk; should that
  // allocation fail, the program terminates (noexcept), as on any
  // out-of-memory on the daemon's hot path.
  void record(uint64_t value_ns, uint64_t count = 1) noexcept;
  void merge(const Histogram &other) noexcept;
  // Counts kept with these buckets elsewhere (the kernel side's, --aggregate):
  // buckets[i] values fell in bucket i (n at most kBucketCount), and `count`,
  // `sum`, `min`, `max` are theirs exactly.
  void add_counts(const uint32_t *buckets, std::size_t n, uint64_t count, uint64_t sum, uint64_t min,
                  uint64_t max) noexcept;
  void reset() noexcept;  // keeps the chunks it has
  // The same values in the same buckets, with the same totals (however many
  // chunks each has allocated).
  bool operator==(const Histogram &other) const;

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
  // Bytes of counters allocated (chunks times 512), for tests and budgets.
  std::size_t allocated_bytes() const noexcept;

  // Bucket index arithmetic, public for tests.
  static unsigned bucket_index(uint64_t value) noexcept;
  static Bucket bucket_bounds(unsigned index) noexcept;  // count = 0
  static constexpr unsigned kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;
  // Chunk c holds buckets [c * kSubBuckets, (c + 1) * kSubBuckets): chunk 0
  // the exact values 0..63, chunk c >= 1 the values [2^(c+5), 2^(c+6)).
  static constexpr unsigned kChunkCount = kBucketCount / kSubBuckets;  // 59

private:
  using Chunk = std::array<uint64_t, kSubBuckets>;

  Chunk &allocate_chunk(unsigned chunk);
  void record_into_new_chunk(uint64_t value_ns, uint64_t count) noexcept;
  // The chunks that may hold counts, [begin, end): from min's to max's. Every
  // counter outside them is zero, allocated or not. Empty when count_ is 0.
  struct ChunkRange {
    unsigned begin, end;
  };
  ChunkRange live_chunks() const noexcept;
  void clear_totals() noexcept;
  // Calls visit(bucket index, count) for each non-empty bucket in order,
  // until it returns false.
  template <class Visit>
  void visit_nonempty(Visit &&visit) const {
    const auto [begin, end] = live_chunks();
    for (unsigned c = begin; c < end; ++c) {
      const Chunk *chunk = chunks_[c].get();
      if (!chunk)
        continue;
      for (unsigned j = 0; j < kSubBuckets; ++j)
        if ((*chunk)[j] != 0 && !visit(c * kSubBuckets + j, (*chunk)[j]))
          return;
    }
  }

  std::array<std::unique_ptr<Chunk>, kChunkCount> chunks_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace netlatd
