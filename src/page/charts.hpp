#pragma once
// netlatd report: the numbers behind each chart, as pure functions of the
// lines read (lines.hpp). The page's script only draws what these give.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lines.hpp"

namespace netlatd::page {

// At most this many time columns: more intervals are merged (downsampled).
inline constexpr size_t kMaxColumns = 240;

// Heatmap rows over latency: below 64 ns one row a power of two ([0, 1),
// [1, 2), [2, 4) ... [32, 64)), from 64 ns on four rows a power of two, at
// 2^k x (1, 1.25, 1.5, 1.75): edges of the JSON's buckets (64 a power of
// two), so each JSON bucket falls in exactly one row.
struct Row {
  uint64_t lower, upper;  // ns, upper exclusive
};
inline constexpr size_t kRowsPerOctave = 4;
size_t row_of(uint64_t ns);
Row row_bounds(size_t row);

// A time column: one interval, or the intervals that ended in [t0, t1).
struct Column {
  int64_t t0_ms = 0, t1_ms = 0;
  size_t intervals = 0;
};
// Columns for intervals sorted by end time; col_of[i] is interval i's.
std::vector<Column> make_columns(const std::vector<IntervalLine> &sorted, std::vector<size_t> &col_of);

// One stage's buckets merged over the intervals of a column, exactly (the
// JSON's buckets are the same on every host and run).
class MergedStage {
public:
  void add(const StageStats &s);
  uint64_t count() const { return count_; }
  // As netlatd computes its own (docs/OUTPUT.md): nearest rank, the
  // midpoint of its bucket clamped to [min, max]; min and max exactly at
  // the first and last rank. Nothing when empty.
  std::optional<uint64_t> percentile(double p) const;
  // Counts per heatmap row (row_of each bucket's lower bound).
  std::map<size_t, uint64_t> rows() const;

private:
  std::map<uint64_t, Bucket> buckets_;  // by lower bound
  uint64_t count_ = 0, min_ = UINT64_MAX, max_ = 0;
};

// {stage, applicable, rows: [[lower, upper]...] (row_min..row_max),
//  row_min, cells: [[column, row, count]...], p50/p99/p999: [ns|null per column],
//  overall: {p50, p99, p999, max} over every column}
nlohmann::json heatmap(size_t stage, const std::vector<IntervalLine> &sorted, const std::vector<size_t> &col_of,
                       size_t columns);

// {reasons: [{name, known, total, per_column: [...]}]} in the lines' order;
// every reason, zeros included (the page draws the non-zero ones).
nlohmann::json losses(const std::vector<IntervalLine> &sorted, const std::vector<size_t> &col_of, size_t columns);

// One series of the breakdown over the whole input.
struct SeriesSum {
  uint64_t packets = 0;
  std::array<uint64_t, kStageCount> count{};
  std::array<double, kStageCount> sum_ns{};  // mean x count, per interval
  void add(const std::array<StageStats, kStageCount> &stages, uint64_t packets);
};
// [{series, packets, total_count, total_mean_ns, parts: [{stage, share,
// mean_ns}], rest}] for the busiest `max_series`; each stage's share is its
// time over the series' `total` time.
nlohmann::json shares(const std::map<std::string, SeriesSum> &series, size_t max_series);

// One packet's waterfall: bars [{stage, start_ns, dur_ns}] from its offsets
// (each stage starts at its first stamp's offset), marks [{stamp, at_ns}],
// and what names the packet and its reader.
nlohmann::json waterfall(const OutlierLine &o);

}  // namespace netlatd::page
