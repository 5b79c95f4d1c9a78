#include "netlatd/model/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace netlatd {

// The index layout is netlatd_bucket_index's (netlatd/stage_math.h): below
// kSubBuckets one bucket per value; above, kSubBuckets per power of two.
unsigned Histogram::bucket_index(uint64_t value) noexcept { return netlatd_bucket_index(value); }

Histogram::Bucket Histogram::bucket_bounds(unsigned index) noexcept {
  if (index >= kBucketCount)
    index = kBucketCount - 1;
  if (index < kSubBuckets)
    return {index, uint64_t{index} + 1, 0};
  // Inverse of bucket_index: index = shift * 64 + m with m in [64, 128).
  const unsigned shift = index / kSubBuckets - 1;
  const uint64_t m = index % kSubBuckets + kSubBuckets;
  const uint64_t lower = m << shift;
  // The very last bucket would end at 2^64; saturate instead of wrapping to 0.
  const uint64_t upper = (m + 1 == 2 * kSubBuckets && shift == 64 - kSubBucketBits - 1)
                             ? UINT64_MAX
                             : (m + 1) << shift;
  return {lower, upper, 0};
}

Histogram::Chunk &Histogram::allocate_chunk(unsigned chunk) {
  chunks_[chunk] = std::make_unique<Chunk>();  // zeroed
  return *chunks_[chunk];
}

// Out of line and reached by a tail call, so that record() itself makes no
// call: it then needs no stack frame and saves no registers.
[[gnu::cold, gnu::noinline]] void Histogram::record_into_new_chunk(uint64_t value_ns, uint64_t count) noexcept {
  allocate_chunk(bucket_index(value_ns) / kSubBuckets);
  record(value_ns, count);
}

Histogram::ChunkRange Histogram::live_chunks() const noexcept {
  if (count_ == 0)
    return {0, 0};
  return {bucket_index(min_) / kSubBuckets, bucket_index(max_) / kSubBuckets + 1};
}

void Histogram::clear_totals() noexcept {
  count_ = 0;
  sum_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
}

Histogram::Histogram(const Histogram &other)
    : count_(other.count_), sum_(other.sum_), min_(other.min_), max_(other.max_) {
  const auto [begin, end] = other.live_chunks();
  for (unsigned c = begin; c < end; ++c)
    if (other.chunks_[c])
      chunks_[c] = std::make_unique<Chunk>(*other.chunks_[c]);
}

Histogram &Histogram::operator=(const Histogram &other) {
  if (this == &other)
    return *this;
  const auto [begin, end] = other.live_chunks();
  // Every allocation first: should one fail, *this still holds what it held.
  for (unsigned c = begin; c < end; ++c)
    if (other.chunks_[c] && !chunks_[c])
      chunks_[c] = std::make_unique<Chunk>();
  reset();
  for (unsigned c = begin; c < end; ++c)
    if (other.chunks_[c])
      *chunks_[c] = *other.chunks_[c];
  count_ = other.count_;
  sum_ = other.sum_;
  min_ = other.min_;
  max_ = other.max_;
  return *this;
}

Histogram::Histogram(Histogram &&other) noexcept
    : chunks_(std::move(other.chunks_)), count_(other.count_), sum_(other.sum_), min_(other.min_),
      max_(other.max_) {
  other.clear_totals();
}

Histogram &Histogram::operator=(Histogram &&other) noexcept {
  if (this == &other)
    return *this;
  chunks_ = std::move(other.chunks_);
  count_ = other.count_;
  sum_ = other.sum_;
  min_ = other.min_;
  max_ = other.max_;
  other.clear_totals();
  return *this;
}

void Histogram::record(uint64_t value_ns, uint64_t count) noexcept {
  if (count == 0)
    return;
  const unsigned i = bucket_index(value_ns);
  Chunk *chunk = chunks_[i / kSubBuckets].get();
  if (!chunk) [[unlikely]]
    return record_into_new_chunk(value_ns, count);
  (*chunk)[i % kSubBuckets] += count;
  count_ += count;
  sum_ += value_ns * count;
  min_ = std::min(min_, value_ns);
  max_ = std::max(max_, value_ns);
}

void Histogram::add_counts(const uint32_t *buckets, std::size_t n, uint64_t count, uint64_t sum, uint64_t min,
                           uint64_t max) noexcept {
  if (count == 0)
    return;
  n = std::min<std::size_t>(n, kBucketCount);
  for (std::size_t i = 0; i < n; ++i) {
    if (buckets[i] == 0)
      continue;
    Chunk *chunk = chunks_[i / kSubBuckets].get();
    if (!chunk)
      chunk = &allocate_chunk(static_cast<unsigned>(i / kSubBuckets));
    (*chunk)[i % kSubBuckets] += buckets[i];
  }
  count_ += count;
  sum_ += sum;
  min_ = std::min(min_, min);
  max_ = std::max(max_, max);
}

bool Histogram::operator==(const Histogram &other) const {
  if (count_ != other.count_ || sum_ != other.sum_ || min() != other.min() || max_ != other.max_)
    return false;
  const auto mine = nonempty_buckets(), theirs = other.nonempty_buckets();
  return std::equal(mine.begin(), mine.end(), theirs.begin(), theirs.end(), [](const Bucket &a, const Bucket &b) {
    return a.lower == b.lower && a.count == b.count;
  });
}

void Histogram::merge(const Histogram &other) noexcept {
  if (other.count_ == 0)
    return;
  const auto [begin, end] = other.live_chunks();
  for (unsigned c = begin; c < end; ++c) {
    const Chunk *from = other.chunks_[c].get();
    if (!from)
      continue;
    Chunk *into = chunks_[c].get();
    if (!into) {
      // A chunk the other kept through a reset may be all zero: no need for one here.
      if (std::all_of(from->begin(), from->end(), [](uint64_t n) { return n == 0; }))
        continue;
      into = &allocate_chunk(c);
    }
    for (unsigned j = 0; j < kSubBuckets; ++j)
      (*into)[j] += (*from)[j];
  }
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

// Only the live chunks can hold counts; keeping the chunks means the next
// interval, over much the same range, allocates nothing.
void Histogram::reset() noexcept {
  const auto [begin, end] = live_chunks();
  for (unsigned c = begin; c < end; ++c)
    if (chunks_[c])
      chunks_[c]->fill(0);
  clear_totals();
}

std::size_t Histogram::allocated_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const auto &chunk : chunks_)
    if (chunk)
      bytes += sizeof(Chunk);
  return bytes;
}

double Histogram::mean() const noexcept {
  return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0;
}

uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0)
    return 0;
  p = std::isnan(p) ? 0.0 : std::clamp(p, 0.0, 100.0);
  // Nearest-rank definition: the smallest value with at least p % of the
  // samples at or below it. The epsilon keeps 99.9 % of 1000 at rank 999
  // despite 99.9 not being exact in binary.
  const double exact_rank = p / 100.0 * static_cast<double>(count_);
  auto rank = static_cast<uint64_t>(std::ceil(exact_rank - 1e-9));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  // The extremes are known exactly; a bucket midpoint would only blur them.
  if (rank == 1)
    return min_;
  if (rank == count_)
    return max_;

  uint64_t seen = 0, value = max_;  // kept only if the counters and count_ disagree
  visit_nonempty([&](unsigned index, uint64_t n) {
    seen += n;
    if (seen < rank)
      return true;
    const Bucket b = bucket_bounds(index);
    value = std::clamp(b.lower + (b.upper - b.lower - 1) / 2, min_, max_);
    return false;
  });
  return value;
}

std::vector<Histogram::Bucket> Histogram::nonempty_buckets() const {
  std::vector<Bucket> out;
  visit_nonempty([&](unsigned index, uint64_t n) {
    Bucket b = bucket_bounds(index);
    b.count = n;
    out.push_back(b);
    return true;
  });
  return out;
}

}  // namespace netlatd
