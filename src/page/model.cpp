#include "model.hpp"

#include <algorithm>

namespace netlatd::page {
namespace {

using nlohmann::json;

constexpr size_t kMaxReason = 160;  // a skip reason may echo a line's text
constexpr size_t kMaxUnknown = 64;  // unknown field paths listed
constexpr size_t kMaxSkipReasons = 32;

// The packet drawn before another: slower, then earlier.
bool slower(const OutlierLine &a, const OutlierLine &b) {
  return *a.total_ns != *b.total_ns ? *a.total_ns > *b.total_ns : a.time_ms < b.time_ms;
}

template <class C> json list(const C &c) { return json(std::vector<typename C::value_type>(c.begin(), c.end())); }

}  // namespace

void Builder::add_line(std::string_view text, const std::string &source) {
  ++lines_;
  const uint64_t at = ++line_of_[source];
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  if (text.empty()) {
    --lines_;  // blank lines are not lines of anybody's
    --line_of_[source];
    return;
  }
  Parsed p = parse_line(text);
  if (Skip *s = std::get_if<Skip>(&p.line)) {
    ++skipped_;
    std::string reason = s->reason.substr(0, kMaxReason);
    if (skips_.size() >= kMaxSkipReasons && !skips_.count(reason))
      reason = "other reasons";  // reasons may name a line's own keys: the list stays short
    SkipCount &c = skips_[reason];
    if (c.n++ == 0)
      c.first = source + ":" + std::to_string(at);
    return;
  }
  for (const std::string &f : p.unknown_fields)
    if (unknown_.size() < kMaxUnknown || unknown_.count(f))
      unknown_[f.substr(0, kMaxReason)]++;
  if (IntervalLine *l = std::get_if<IntervalLine>(&p.line))
    add_interval(std::move(*l));
  else
    add_outlier(std::move(std::get<OutlierLine>(p.line)));
}

void Builder::add_interval(IntervalLine &&l) {
  hosts_.insert(l.host);
  ifaces_.insert(l.iface);
  kernels_.insert(l.kernel);
  versions_.insert(l.version);
  ports_.insert(l.ports.begin(), l.ports.end());
  for (size_t s = 0; s < kStageCount; ++s) {
    const std::string hook = l.stages[s].hook_start + " \u2192 " + l.stages[s].hook_end;
    if (std::find(hooks_[s].begin(), hooks_[s].end(), hook) == hooks_[s].end())
      hooks_[s].push_back(hook);
  }
  if (l.breakdown.empty())
    series_["all"].add(l.stages, l.packets);
  for (const SeriesRow &r : l.breakdown)
    series_[r.label].add(r.stages, r.packets);
  l.breakdown.clear();
  l.breakdown.shrink_to_fit();
  intervals_.push_back(std::move(l));
}

void Builder::add_outlier(OutlierLine &&o) {
  ++outliers_;
  hosts_.insert(o.host);
  ifaces_.insert(o.iface);
  outlier_first_ms_ = std::min(outlier_first_ms_, o.time_ms);
  outlier_last_ms_ = std::max(outlier_last_ms_, o.time_ms);
  if (!o.total_ns)
    return;  // a packet-only record without a total: counted, not ranked
  ++outliers_ranked_;
  if (slowest_.size() < kWaterfalls) {
    slowest_.push_back(std::move(o));
    std::push_heap(slowest_.begin(), slowest_.end(), slower);
  } else if (slower(o, slowest_.front())) {
    std::pop_heap(slowest_.begin(), slowest_.end(), slower);
    slowest_.back() = std::move(o);
    std::push_heap(slowest_.begin(), slowest_.end(), slower);
  }
}

json Builder::header() const {
  int64_t first = outlier_first_ms_, last = outlier_last_ms_;
  for (const IntervalLine &l : intervals_) {
    first = std::min(first, l.start_ms);
    last = std::max(last, l.end_ms);
  }
  json hooks = json::array();
  const IntervalLine *latest = intervals_.empty() ? nullptr : &intervals_.back();
  for (size_t s = 0; s < kStageCount && latest; ++s)
    hooks.push_back({{"stage", kStages[s]}, {"hooks", hooks_[s]}, {"applicable", latest->stages[s].applicable},
                     {"why_not", latest->stages[s].why_not}});
  auto named = [](const std::set<std::string> &s) {
    std::set<std::string> out(s);
    out.erase("");
    return list(out);
  };
  // Summed, not averaged: each line's counts are exact (docs/OUTPUT.md, Coverage).
  json coverage = nullptr;
  for (const IntervalLine &l : intervals_)
    if (l.coverage) {
      if (coverage.is_null())
        coverage = {{"matching", 0}, {"recorded", 0}, {"lines", 0}};
      coverage["matching"] = coverage["matching"].get<uint64_t>() + l.coverage->matching;
      coverage["recorded"] = coverage["recorded"].get<uint64_t>() + l.coverage->recorded;
      coverage["lines"] = coverage["lines"].get<uint64_t>() + 1;
    }
  return {{"hosts", named(hosts_)}, {"ifaces", named(ifaces_)}, {"kernels", named(kernels_)},
          {"versions", named(versions_)}, {"ports", list(ports_)}, {"hooks", hooks},
          {"first_ms", first == INT64_MAX ? json(nullptr) : json(first)},
          {"last_ms", last == INT64_MIN ? json(nullptr) : json(last)}, {"coverage", coverage}};
}

json Builder::input() const {
  json skips = json::array(), unknown = json::array(), sources = json::array();
  for (const auto &[reason, c] : skips_)
    skips.push_back({{"reason", reason}, {"count", c.n}, {"first", c.first}});
  for (const auto &[path, n] : unknown_)
    unknown.push_back({{"field", path}, {"lines", n}});
  for (const auto &[name, n] : line_of_)
    sources.push_back({{"name", name}, {"lines", n}});
  return {{"lines", lines_},     {"skipped", skipped_},        {"skips", skips},
          {"unknown", unknown},  {"sources", sources},         {"intervals", intervals_.size()},
          {"outliers", outliers_}, {"outliers_ranked", outliers_ranked_}, {"schema", kSchema}};
}

json Builder::model() {
  std::stable_sort(intervals_.begin(), intervals_.end(),
                   [](const IntervalLine &a, const IntervalLine &b) { return a.end_ms < b.end_ms; });
  std::vector<size_t> col_of;
  const std::vector<Column> cols = make_columns(intervals_, col_of);
  json columns = json::array();
  for (const Column &c : cols)
    columns.push_back({c.t0_ms, c.t1_ms, c.intervals});
  json heatmaps = json::array();
  for (size_t s = 0; s < kStageCount && !intervals_.empty(); ++s)
    heatmaps.push_back(heatmap(s, intervals_, col_of, cols.size()));
  std::vector<OutlierLine> slowest(slowest_);
  std::sort(slowest.begin(), slowest.end(), slower);
  json waterfalls = json::array();
  for (const OutlierLine &o : slowest)
    waterfalls.push_back(waterfall(o));
  return {{"header", header()},
          {"input", input()},
          {"columns", columns},
          {"downsample", {{"columns", cols.size()}, {"max_columns", kMaxColumns},
                          {"rows_per_octave", kRowsPerOctave}, {"waterfalls", kWaterfalls},
                          {"series", series_.size()}, {"max_series", kMaxSeries}}},
          {"heatmaps", heatmaps},
          {"shares", shares(series_, kMaxSeries)},
          {"losses", losses(intervals_, col_of, cols.size())},
          {"waterfalls", waterfalls}};
}

}  // namespace netlatd::page
