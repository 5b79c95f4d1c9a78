#include "charts.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace netlatd::page {
namespace {

using nlohmann::json;

constexpr size_t kSmallRows = 7;  // [0,1), [1,2), [2,4) ... [32,64)
constexpr uint64_t kLinearFrom = 64;

// The stamp each stage starts at (docs/OUTPUT.md, "The stages").
constexpr std::array<std::string_view, kStageCount> kStartStamp = {
    "irq", "softirq_entry", "netif_receive_skb", "sock_queue", "read_start", "sock_queue", ""};
// Reader-side instants drawn as marks across a waterfall.
constexpr std::array<std::string_view, 5> kMarks = {"wakeup", "switch_in", "call_start", "copy", "recv_return"};

template <class T> std::optional<T> find(const std::vector<std::pair<std::string, T>> &v, std::string_view key) {
  for (const auto &[k, x] : v)
    if (k == key)
      return x;
  return std::nullopt;
}

json opt(const std::optional<uint64_t> &v) { return v ? json(*v) : json(nullptr); }

}  // namespace

size_t row_of(uint64_t ns) {
  if (ns < kLinearFrom)
    return ns == 0 ? 0 : static_cast<size_t>(std::bit_width(ns));
  const unsigned k = static_cast<unsigned>(std::bit_width(ns)) - 1;  // 2^k <= ns
  const uint64_t step = (uint64_t{1} << k) / kRowsPerOctave;
  return kSmallRows + (k - 6) * kRowsPerOctave + static_cast<size_t>((ns - (uint64_t{1} << k)) / step);
}

Row row_bounds(size_t row) {
  if (row < kSmallRows)
    return row == 0 ? Row{0, 1} : Row{uint64_t{1} << (row - 1), uint64_t{1} << row};
  const size_t k = 6 + (row - kSmallRows) / kRowsPerOctave;
  if (k >= 63)
    return Row{uint64_t{1} << 63, UINT64_MAX};
  const uint64_t base = uint64_t{1} << k, step = base / kRowsPerOctave;
  const uint64_t lower = base + step * ((row - kSmallRows) % kRowsPerOctave);
  return Row{lower, lower + step};
}

std::vector<Column> make_columns(const std::vector<IntervalLine> &sorted, std::vector<size_t> &col_of) {
  std::vector<Column> cols;
  col_of.assign(sorted.size(), 0);
  if (sorted.empty())
    return cols;
  if (sorted.size() <= kMaxColumns) {
    for (size_t i = 0; i < sorted.size(); ++i) {
      cols.push_back(Column{sorted[i].start_ms, sorted[i].end_ms, 1});
      col_of[i] = i;
    }
    return cols;
  }
  int64_t first = sorted.front().start_ms, last = sorted.back().end_ms;
  for (const IntervalLine &l : sorted)
    first = std::min(first, l.start_ms);
  last = std::max(last, first + 1);  // a line whose start is after its end
  const int64_t width = std::max<int64_t>(1, (last - first + static_cast<int64_t>(kMaxColumns) - 1) /
                                                 static_cast<int64_t>(kMaxColumns));
  const size_t n = static_cast<size_t>((last - first + width - 1) / width);
  for (size_t c = 0; c < std::max<size_t>(n, 1); ++c)
    cols.push_back(Column{first + static_cast<int64_t>(c) * width, first + static_cast<int64_t>(c + 1) * width, 0});
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int64_t at = std::max<int64_t>(sorted[i].end_ms - 1 - first, 0);
    col_of[i] = std::min(static_cast<size_t>(at / width), cols.size() - 1);
    cols[col_of[i]].intervals++;
  }
  return cols;
}

void MergedStage::add(const StageStats &s) {
  if (!s.applicable || s.count == 0)
    return;
  count_ += s.count;
  min_ = std::min(min_, s.min_ns);
  max_ = std::max(max_, s.max_ns);
  for (const Bucket &b : s.buckets) {
    Bucket &m = buckets_[b.lower];
    m.lower = b.lower;
    m.upper = std::max(m.upper, b.upper);
    m.count += b.count;
  }
}

std::optional<uint64_t> MergedStage::percentile(double p) const {
  if (count_ == 0)
    return std::nullopt;
  const double exact = p / 100.0 * static_cast<double>(count_);
  const uint64_t rank = std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(exact - 1e-9)), 1, count_);
  if (rank == 1)
    return min_;
  if (rank == count_)
    return max_;
  uint64_t seen = 0;
  for (const auto &[lower, b] : buckets_) {
    seen += b.count;
    if (seen >= rank)
      return std::clamp(b.lower + (b.upper - b.lower - 1) / 2, min_, max_);
  }
  return max_;  // the buckets hold fewer than `count`: a line that disagrees with itself
}

std::map<size_t, uint64_t> MergedStage::rows() const {
  std::map<size_t, uint64_t> out;
  for (const auto &[lower, b] : buckets_)
    out[row_of(lower)] += b.count;
  return out;
}

json heatmap(size_t stage, const std::vector<IntervalLine> &sorted, const std::vector<size_t> &col_of,
             size_t columns) {
  json out = {{"stage", kStages[stage]}, {"applicable", false}};
  std::vector<MergedStage> merged(columns);
  MergedStage all;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const StageStats &s = sorted[i].stages[stage];
    if (s.applicable)
      out["applicable"] = true;
    else if (!s.why_not.empty())
      out["why_not"] = s.why_not;
    merged[col_of[i]].add(s);
    all.add(s);
  }
  json cells = json::array(), p50 = json::array(), p99 = json::array(), p999 = json::array();
  size_t lo = SIZE_MAX, hi = 0;
  uint64_t count = 0;
  for (size_t c = 0; c < columns; ++c) {
    for (const auto &[row, n] : merged[c].rows()) {
      cells.push_back({c, row, n});
      lo = std::min(lo, row);
      hi = std::max(hi, row);
    }
    count += merged[c].count();
    p50.push_back(opt(merged[c].percentile(50)));
    p99.push_back(opt(merged[c].percentile(99)));
    p999.push_back(opt(merged[c].percentile(99.9)));
  }
  json rows = json::array();
  for (size_t r = lo; lo != SIZE_MAX && r <= hi; ++r)
    rows.push_back({row_bounds(r).lower, row_bounds(r).upper});
  out.update({{"count", count}, {"row_min", lo == SIZE_MAX ? 0 : lo}, {"rows", rows}, {"cells", cells},
              {"p50", p50}, {"p99", p99}, {"p999", p999},
              {"overall", {{"p50", opt(all.percentile(50))}, {"p99", opt(all.percentile(99))},
                           {"p999", opt(all.percentile(99.9))}, {"max", opt(all.percentile(100))}}}});
  return out;
}

json losses(const std::vector<IntervalLine> &sorted, const std::vector<size_t> &col_of, size_t columns) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<uint64_t>> per;
  for (size_t i = 0; i < sorted.size(); ++i)
    for (const auto &[name, n] : sorted[i].losses) {
      auto [it, fresh] = per.try_emplace(name, columns, 0);
      if (fresh)
        order.push_back(name);
      it->second[col_of[i]] += n;
    }
  json reasons = json::array();
  for (const std::string &name : order) {
    const std::vector<uint64_t> &v = per[name];
    uint64_t total = 0;
    for (uint64_t n : v)
      total += n;
    const bool drop = known_drop_reason(name);
    const bool counter = known_loss_counter(name);
    reasons.push_back({{"name", name}, {"kind", drop ? "drop" : counter ? "counter" : "unknown"},
                       {"total", total}, {"per_column", v}});
  }
  return json{{"reasons", reasons}};
}

void SeriesSum::add(const std::array<StageStats, kStageCount> &stages, uint64_t n) {
  packets += n;
  for (size_t s = 0; s < kStageCount; ++s)
    if (stages[s].applicable && stages[s].count > 0) {
      count[s] += stages[s].count;
      sum_ns[s] += stages[s].mean_ns * static_cast<double>(stages[s].count);
    }
}

json shares(const std::map<std::string, SeriesSum> &series, size_t max_series) {
  std::vector<const std::pair<const std::string, SeriesSum> *> busiest;
  for (const auto &kv : series)
    busiest.push_back(&kv);
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](const auto *a, const auto *b) { return a->second.packets > b->second.packets; });
  json out = json::array();
  for (size_t i = 0; i < busiest.size() && i < max_series; ++i) {
    const SeriesSum &s = busiest[i]->second;
    const double total = s.sum_ns[kTotal];
    json parts = json::array();
    double rest = 1.0;
    for (size_t st = 0; st < kConsecutive && total > 0; ++st) {
      if (s.count[st] == 0)
        continue;
      const double share = s.sum_ns[st] / total;
      rest -= share;
      parts.push_back({{"stage", kStages[st]}, {"share", share},
                       {"mean_ns", s.sum_ns[st] / static_cast<double>(s.count[st])}, {"count", s.count[st]}});
    }
    out.push_back({{"series", busiest[i]->first}, {"packets", s.packets}, {"total_count", s.count[kTotal]},
                   {"total_mean_ns", s.count[kTotal] ? total / static_cast<double>(s.count[kTotal]) : 0.0},
                   {"parts", parts}, {"rest", total > 0 ? rest : 0.0}});
  }
  return out;
}

json waterfall(const OutlierLine &o) {
  json bars = json::array(), marks = json::array();
  if (o.total_ns)
    bars.push_back({{"stage", "total"}, {"start_ns", 0}, {"dur_ns", *o.total_ns}});
  const bool split = find(o.stages_ns, "sock_queue") && find(o.stages_ns, "oncpu");
  for (size_t s = 0; s < kTotal; ++s) {
    const auto dur = find(o.stages_ns, kStages[s]);
    const auto start = find(o.offsets_ns, kStartStamp[s]);
    if (!dur || !start || (kStages[s] == "in_socket" && split))
      continue;
    bars.push_back({{"stage", kStages[s]}, {"start_ns", *start}, {"dur_ns", *dur}});
  }
  for (std::string_view m : kMarks)
    if (const auto at = find(o.offsets_ns, m))
      marks.push_back({{"stamp", m}, {"at_ns", *at}});
  json w = {{"time_ms", o.time_ms}, {"total_ns", opt(o.total_ns)}, {"iface", o.iface},   {"proto", o.proto},
            {"family", o.family},   {"dport", o.dport},           {"sport", o.sport},    {"len", o.len},
            {"rx_cpu", opt(o.rx_cpu)}, {"ksoftirqd", o.ksoftirqd}, {"bars", bars},       {"marks", marks}};
  if (!o.reader_unknown.empty())
    w["reader_unknown"] = o.reader_unknown;
  else
    w["reader"] = {{"comm", o.reader_comm},   {"pid", opt(o.reader_pid)}, {"tid", opt(o.reader_tid)},
                   {"cpu", opt(o.reader_cpu)}, {"woken", o.woken},         {"slept_in_call", o.slept_in_call}};
  return w;
}

}  // namespace netlatd::page
