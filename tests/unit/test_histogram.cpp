// The histogram's contract: every value known to within 1/64 of itself,
// percentiles within that bound of the exact ones, merge equal to recording.
// How its counters are allocated is test_histogram_chunks.cpp's.
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

constexpr double kRelativeError = 0.016;

// Log-uniform over [1 ns, 10 s]: equal weight to every decade, so both the
// exact range and the widest buckets get exercised.
std::vector<uint64_t> log_uniform_values(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(0.0, 10.0);
  std::vector<uint64_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<uint64_t>(std::pow(10.0, exponent(rng))));
  return out;
}

// The nearest-rank percentile of sorted data, the definition Histogram documents.
uint64_t exact_percentile(const std::vector<uint64_t> &sorted, double p) {
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size()) - 1e-9));
  rank = std::clamp<uint64_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

// Two histograms of the same values: totals, percentiles and every bucket.
// Spelled out, not through operator== (tested on its own below), so that a
// failure says which figure differs.
void require_same(const Histogram &a, const Histogram &b) {
  REQUIRE(a.count() == b.count());
  REQUIRE(a.sum() == b.sum());
  REQUIRE(a.min() == b.min());
  REQUIRE(a.max() == b.max());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9})
    REQUIRE(a.percentile(p) == b.percentile(p));
  const auto ma = a.nonempty_buckets(), mb = b.nonempty_buckets();
  REQUIRE(ma.size() == mb.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    REQUIRE(ma[i].lower == mb[i].lower);
    REQUIRE(ma[i].count == mb[i].count);
  }
}

bool within_bound(uint64_t got, uint64_t exact) {
  const double diff = std::abs(static_cast<double>(got) - static_cast<double>(exact));
  return diff <= kRelativeError * static_cast<double>(exact);
}

}  // namespace

TEST_CASE("bucket of any value is exact below 64 ns and within 1/64 above", "[histogram]") {
  for (uint64_t v : log_uniform_values(200'000, 1)) {
    const unsigned i = Histogram::bucket_index(v);
    REQUIRE(i < Histogram::kBucketCount);
    const Histogram::Bucket b = Histogram::bucket_bounds(i);
    INFO("value " << v << " bucket [" << b.lower << ", " << b.upper << ")");
    REQUIRE(b.lower <= v);
    REQUIRE(v < b.upper);
    if (v < Histogram::kSubBuckets) {
      REQUIRE(b.lower == v);
      REQUIRE(b.upper == v + 1);
    } else {
      REQUIRE(static_cast<double>(b.upper - b.lower) <= kRelativeError * static_cast<double>(v));
      REQUIRE((b.upper - b.lower) * Histogram::kSubBuckets <= v);
    }
  }
}

TEST_CASE("buckets tile the whole uint64 range without gaps or overlaps", "[histogram]") {
  REQUIRE(Histogram::bucket_bounds(0).lower == 0);
  for (unsigned i = 0; i + 1 < Histogram::kBucketCount; ++i) {
    const auto b = Histogram::bucket_bounds(i);
    INFO("bucket " << i);
    REQUIRE(b.lower < b.upper);
    REQUIRE(b.upper == Histogram::bucket_bounds(i + 1).lower);
    REQUIRE(Histogram::bucket_index(b.lower) == i);
    REQUIRE(Histogram::bucket_index(b.upper - 1) == i);
  }
  REQUIRE(Histogram::bucket_index(UINT64_MAX) == Histogram::kBucketCount - 1);
  REQUIRE(Histogram::bucket_bounds(Histogram::kBucketCount - 1).upper == UINT64_MAX);
}

TEST_CASE("percentiles are within 1.6 % of the exact ones", "[histogram]") {
  const int distribution = GENERATE(0, 1, 2, 3);
  std::mt19937_64 rng(42 + static_cast<uint32_t>(distribution));
  std::vector<uint64_t> values;
  switch (distribution) {
  case 0:
    values = log_uniform_values(100'000, 7);
    break;
  case 1: {  // log-normal around 20 µs: a typical stage
    std::lognormal_distribution<double> d(std::log(20'000.0), 0.8);
    for (int i = 0; i < 100'000; ++i)
      values.push_back(static_cast<uint64_t>(d(rng)) + 1);
    break;
  }
  case 2: {  // bimodal: fast path around 3 µs, 5 % slow path around 2 ms
    std::normal_distribution<double> fast(3'000, 300), slow(2'000'000, 200'000);
    std::bernoulli_distribution is_slow(0.05);
    for (int i = 0; i < 50'000; ++i)
      values.push_back(static_cast<uint64_t>(std::max(1.0, is_slow(rng) ? slow(rng) : fast(rng))));
    break;
  }
  case 3: {  // small counts, mostly in the exact range
    std::uniform_int_distribution<uint64_t> d(1, 200);
    for (int i = 0; i < 777; ++i)
      values.push_back(d(rng));
    break;
  }
  }
  Histogram h;
  for (uint64_t v : values)
    h.record(v);
  std::sort(values.begin(), values.end());

  for (double p : {0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const uint64_t exact = exact_percentile(values, p);
    const uint64_t got = h.percentile(p);
    INFO("distribution " << distribution << " p" << p << " exact " << exact << " got " << got);
    REQUIRE(within_bound(got, exact));
  }
  REQUIRE(h.percentile(0) == values.front());
  REQUIRE(h.percentile(100) == values.back());
}

TEST_CASE("values below 64 ns give exact percentiles", "[histogram]") {
  Histogram h;
  for (uint64_t v = 1; v <= 63; ++v)
    h.record(v);
  REQUIRE(h.percentile(50) == 32);  // rank ceil(31.5) = 32
  REQUIRE(h.percentile(90) == 57);  // rank ceil(56.7) = 57
  REQUIRE(h.percentile(100) == 63);
}

TEST_CASE("count, sum, min, max and mean are exact", "[histogram]") {
  Histogram h;
  REQUIRE(h.count() == 0);
  REQUIRE(h.min() == 0);
  REQUIRE(h.max() == 0);
  REQUIRE(h.mean() == 0.0);
  REQUIRE(h.percentile(50) == 0);
  REQUIRE(h.nonempty_buckets().empty());

  h.record(1'000);
  h.record(123'457);
  h.record(5, 3);  // weight 3
  REQUIRE(h.count() == 5);
  REQUIRE(h.sum() == 1'000 + 123'457 + 15);
  REQUIRE(h.min() == 5);
  REQUIRE(h.max() == 123'457);
  REQUIRE(h.mean() == (1'000.0 + 123'457.0 + 15.0) / 5.0);
  // Clamping to [min, max] makes a single-valued top bucket exact.
  REQUIRE(h.percentile(100) == 123'457);
  REQUIRE(h.percentile(50) == 5);

  const auto buckets = h.nonempty_buckets();
  REQUIRE(buckets.size() == 3);
  REQUIRE(buckets[0].lower == 5);
  REQUIRE(buckets[0].count == 3);
  REQUIRE(buckets[1].lower <= 1'000);
  REQUIRE(buckets[1].upper > 1'000);
  REQUIRE(buckets[2].lower <= 123'457);
  REQUIRE(buckets[2].upper > 123'457);
}

TEST_CASE("nonempty_buckets are ascending, non-empty and sum to count", "[histogram]") {
  Histogram h;
  for (uint64_t v : log_uniform_values(10'000, 3))
    h.record(v);
  const auto buckets = h.nonempty_buckets();
  uint64_t total = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    REQUIRE(buckets[i].count > 0);
    if (i)
      REQUIRE(buckets[i - 1].upper <= buckets[i].lower);
    total += buckets[i].count;
  }
  REQUIRE(total == h.count());
  REQUIRE(buckets.front().lower <= h.min());
  REQUIRE(buckets.back().upper > h.max());
}

TEST_CASE("merge equals recording both sets into one histogram", "[histogram]") {
  const auto a_values = log_uniform_values(5'000, 11);
  const auto b_values = log_uniform_values(7'000, 12);
  Histogram a, b, both;
  for (uint64_t v : a_values) {
    a.record(v);
    both.record(v);
  }
  for (uint64_t v : b_values) {
    b.record(v);
    both.record(v);
  }
  a.merge(b);
  require_same(a, both);
  CHECK(a == both);

  SECTION("merging an empty histogram changes nothing") {
    Histogram empty;
    const uint64_t before_min = a.min();
    a.merge(empty);
    REQUIRE(a.count() == both.count());
    REQUIRE(a.min() == before_min);
  }
  SECTION("merging into an empty histogram copies") {
    Histogram fresh;
    fresh.merge(b);
    REQUIRE(fresh.count() == b.count());
    REQUIRE(fresh.min() == b.min());
    REQUIRE(fresh.max() == b.max());
    REQUIRE(fresh.percentile(50) == b.percentile(50));
  }
}

TEST_CASE("reset empties the histogram and it records again", "[histogram]") {
  Histogram h;
  h.record(10);
  h.record(1'000'000);
  h.reset();
  REQUIRE(h.count() == 0);
  REQUIRE(h.sum() == 0);
  REQUIRE(h.min() == 0);
  REQUIRE(h.max() == 0);
  REQUIRE(h.percentile(99) == 0);
  REQUIRE(h.nonempty_buckets().empty());
  h.record(500);
  REQUIRE(h.min() == 500);
  REQUIRE(h.max() == 500);
  REQUIRE(h.percentile(50) == 500);
  REQUIRE(h.nonempty_buckets().size() == 1);
}

// --aggregate: the kernel side keeps counts with the same buckets, and the
// daemon adds them with their exact totals. The same values recorded one by
// one must give the same histogram.
TEST_CASE("counts kept elsewhere with these buckets add up to the same histogram", "[histogram][aggregate]") {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> buckets(Histogram::kBucketCount);
  Histogram direct, added;
  added.record(5000);  // what was there before is kept
  direct.record(5000);
  uint64_t count = 0, sum = 0, lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < 20000; i++) {
    const uint64_t v = rng() % (uint64_t{1} << (rng() % 36));
    direct.record(v);
    buckets[Histogram::bucket_index(v)]++;
    count++;
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  added.add_counts(buckets.data(), buckets.size(), count, sum, lo, hi);
  require_same(added, direct);
  CHECK(added == direct);
  Histogram one_off = direct;
  one_off.record(5000);
  CHECK_FALSE(added == one_off);
  Histogram none;
  none.add_counts(buckets.data(), buckets.size(), 0, 0, 0, 0);  // nothing added
  CHECK(none.count() == 0);
}
