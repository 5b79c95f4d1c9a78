#pragma once
// netlatd report: every line read folded into what the page shows, held
// small enough for a day of intervals and any number of outlier lines (the
// slowest outliers are kept, the rest only counted).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "charts.hpp"
#include "lines.hpp"

namespace netlatd::page {

inline constexpr size_t kWaterfalls = 20;  // the slowest outlier lines drawn
inline constexpr size_t kMaxSeries = 24;   // breakdown series in "where the time goes"

class Builder {
public:
  // One line of input (without its newline); `source` names its file.
  void add_line(std::string_view text, const std::string &source);
  // Lines of netlatd's (interval or outlier) read so far.
  uint64_t usable() const { return intervals_.size() + outliers_; }
  uint64_t lines() const { return lines_; }
  uint64_t skipped() const { return skipped_; }
  // The page's data: header, input, heatmaps, shares, losses, waterfalls.
  nlohmann::json model();  // sorts the intervals by time

private:
  void add_interval(IntervalLine &&l);
  void add_outlier(OutlierLine &&o);
  nlohmann::json header() const;
  nlohmann::json input() const;

  uint64_t lines_ = 0, skipped_ = 0, outliers_ = 0, outliers_ranked_ = 0;
  struct SkipCount {
    uint64_t n = 0;
    std::string first;  // "file:line" of the first
  };
  std::map<std::string, SkipCount> skips_;
  std::map<std::string, uint64_t> unknown_;
  std::map<std::string, uint64_t> line_of_;  // per source
  std::vector<IntervalLine> intervals_;      // breakdown folded into series_
  std::map<std::string, SeriesSum> series_;
  std::vector<OutlierLine> slowest_;  // a min-heap on total_ns, at most kWaterfalls
  std::set<std::string> hosts_, ifaces_, kernels_, versions_;
  std::set<uint64_t> ports_;
  std::array<std::vector<std::string>, kStageCount> hooks_;  // distinct "start -> end", first seen first
  int64_t outlier_first_ms_ = INT64_MAX, outlier_last_ms_ = INT64_MIN;
};

}  // namespace netlatd::page
