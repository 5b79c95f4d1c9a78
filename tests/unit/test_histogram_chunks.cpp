// The histogram's lazy chunks: the counters are allocated a power of two at a
// time. None of that may show: whatever sequence of records, merges, resets,
// copies and moves, a histogram reads exactly like a dense array of
// kBucketCount counters; and only the chunks in use are allocated or copied.
// The histogram's contract (buckets, percentiles, merge) is test_histogram.cpp's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include "netlatd/model/histogram.hpp"

using netlatd::Histogram;

namespace {

struct DenseModel {
  std::vector<uint64_t> counts = std::vector<uint64_t>(Histogram::kBucketCount, 0);
  uint64_t count = 0, sum = 0, min = UINT64_MAX, max = 0;

  void record(uint64_t v, uint64_t n) {
    if (n == 0)
      return;
    counts[Histogram::bucket_index(v)] += n;
    count += n;
    sum += v * n;
    min = std::min(min, v);
    max = std::max(max, v);
  }
  void merge(const DenseModel &o) {
    for (size_t i = 0; i < counts.size(); ++i)
      counts[i] += o.counts[i];
    count += o.count;
    sum += o.sum;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
  }
  // The documented definition, over every bucket from the first.
  uint64_t percentile(double p) const {
    if (count == 0)
      return 0;
    auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count) - 1e-9));
    rank = std::clamp<uint64_t>(rank, 1, count);
    if (rank == 1)
      return min;
    if (rank == count)
      return max;
    uint64_t seen = 0;
    for (unsigned i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (seen >= rank) {
        const auto b = Histogram::bucket_bounds(i);
        return std::clamp(b.lower + (b.upper - b.lower - 1) / 2, min, max);
      }
    }
    return max;
  }
};

void require_reads_like(const Histogram &h, const DenseModel &m) {
  REQUIRE(h.count() == m.count);
  REQUIRE(h.sum() == m.sum);
  REQUIRE(h.min() == (m.count ? m.min : 0));
  REQUIRE(h.max() == m.max);
  std::vector<Histogram::Bucket> expected;
  for (unsigned i = 0; i < Histogram::kBucketCount; ++i)
    if (m.counts[i]) {
      auto b = Histogram::bucket_bounds(i);
      b.count = m.counts[i];
      expected.push_back(b);
    }
  const auto got = h.nonempty_buckets();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("bucket " << i);
    REQUIRE(got[i].lower == expected[i].lower);
    REQUIRE(got[i].upper == expected[i].upper);
    REQUIRE(got[i].count == expected[i].count);
  }
  for (double p : {0.0, 0.1, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0})
    REQUIRE(h.percentile(p) == m.percentile(p));
}

constexpr size_t kChunkBytes = Histogram::kSubBuckets * sizeof(uint64_t);

}  // namespace

TEST_CASE("any sequence of operations reads like a dense histogram", "[histogram]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u);
  std::mt19937_64 rng(seed);
  // Values over the whole range, the extremes included, most of them in a
  // few narrow bands so that chunks are shared, kept through resets and skipped.
  auto value = [&] {
    switch (rng() % 8) {
    case 0: return uint64_t{0};
    case 1: return UINT64_MAX - rng() % 3;
    case 2: return rng() >> (rng() % 64);
    case 3: return rng() % 64;
    default: return uint64_t{1000} << (rng() % 4 * 6) | rng() % 512;
    }
  };
  constexpr size_t kHistograms = 4;
  std::vector<Histogram> hs(kHistograms);
  std::vector<DenseModel> ms(kHistograms);
  for (int step = 0; step < 3000; ++step) {
    const size_t a = rng() % kHistograms, b = rng() % kHistograms;
    const unsigned op = static_cast<unsigned>(rng() % 16);
    INFO("seed " << seed << " step " << step << " op " << op << " a " << a << " b " << b);
    switch (op) {
    case 0:  // a self-merge doubles, as it would with a dense array
      hs[a].merge(hs[b]);
      ms[a].merge(DenseModel(ms[b]));
      break;
    case 1:
      hs[a].reset();
      ms[a] = DenseModel{};
      break;
    case 2:
      hs[a] = hs[b];  // copy-assignment, onto itself too
      ms[a] = ms[b];
      break;
    case 3: {  // copy-construction is deep both ways; move-assignment empties the source
      Histogram copy(hs[b]);
      DenseModel copy_model = ms[b];
      const uint64_t v = value(), w = value();
      hs[b].record(v);
      ms[b].record(v, 1);
      copy.record(w);
      copy_model.record(w, 1);
      hs[a] = std::move(copy);
      ms[a] = copy_model;
      require_reads_like(copy, DenseModel{});
      copy.record(w);  // and records again
      DenseModel again;
      again.record(w, 1);
      require_reads_like(copy, again);
      break;
    }
    case 4: {  // move-construction empties the source, which records again
      Histogram moved(std::move(hs[a]));
      require_reads_like(hs[a], DenseModel{});
      require_reads_like(moved, ms[a]);
      const uint64_t v = value();
      hs[a].record(v);
      moved.merge(hs[a]);
      ms[a].record(v, 1);
      hs[a] = std::move(moved);
      break;
    }
    default: {
      const uint64_t v = value();
      const uint64_t n = rng() % 5 == 0 ? rng() % 4 : 1;  // counts of 0 too
      hs[a].record(v, n);
      ms[a].record(v, n);
      break;
    }
    }
    for (size_t i = 0; i < kHistograms; ++i) {
      INFO("histogram " << i);
      require_reads_like(hs[i], ms[i]);
    }
  }
}

TEST_CASE("counters are allocated a power of two at a time, on first use", "[histogram]") {
  Histogram h;
  REQUIRE(h.allocated_bytes() == 0);
  h.record(0);
  h.record(63);  // the exact range is one chunk
  REQUIRE(h.allocated_bytes() == kChunkBytes);
  h.record(UINT64_MAX);
  REQUIRE(h.allocated_bytes() == 2 * kChunkBytes);

  // A stage seen from 1 µs to 100 ms: the 18 powers of two from [512, 1024)
  // to [2^26, 2^27), not all 59.
  Histogram stage;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> exponent(3.0, 8.0);
  for (int i = 0; i < 100'000; ++i)
    stage.record(static_cast<uint64_t>(std::pow(10.0, exponent(rng))));
  REQUIRE(stage.allocated_bytes() == 18 * kChunkBytes);
  REQUIRE(stage.allocated_bytes() <= Histogram::kBucketCount * sizeof(uint64_t) / 3);
}

TEST_CASE("reset keeps the chunks, so a steady range allocates nothing", "[histogram]") {
  Histogram h;
  for (uint64_t v = 1'000; v < 1'000'000; v += 997)
    h.record(v);
  const size_t held = h.allocated_bytes();
  REQUIRE(held > 0);
  for (int interval = 0; interval < 10; ++interval) {
    h.reset();
    REQUIRE(h.allocated_bytes() == held);
    REQUIRE(h.nonempty_buckets().empty());
    for (uint64_t v = 1'000; v < 1'000'000; v += 991)
      h.record(v);
    REQUIRE(h.allocated_bytes() == held);
  }
}

TEST_CASE("copies and merges take only the chunks that hold counts", "[histogram]") {
  Histogram wide;
  wide.record(100);
  wide.record(10'000'000);
  wide.reset();  // two chunks kept, both zero
  wide.record(5'000);
  wide.record(6'000);  // one more, the only one counted
  REQUIRE(wide.allocated_bytes() == 3 * kChunkBytes);

  const Histogram copy(wide);
  REQUIRE(copy.allocated_bytes() == kChunkBytes);
  Histogram assigned;
  assigned = wide;
  REQUIRE(assigned.allocated_bytes() == kChunkBytes);
  Histogram merged;
  merged.merge(wide);
  REQUIRE(merged.allocated_bytes() == kChunkBytes);

  // Counts below and above the live range, in chunks kept through a reset.
  Histogram spanning;
  spanning.record(100);
  spanning.record(10'000'000);
  spanning.reset();
  spanning.record(90);
  spanning.record(20'000'000);
  Histogram into;
  into.merge(spanning);  // the live range spans the chunk kept for 10 ms: all zero
  REQUIRE(into.allocated_bytes() == 2 * kChunkBytes);
  REQUIRE(into.nonempty_buckets().size() == 2);
}
