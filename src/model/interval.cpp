// The interval aggregate: every record of one interval added to its series
// (--by) and to the per-stage totals, and the check of the kernel's own
// aggregate (--aggregate-check) against it.
#include "netlatd/model/interval.hpp"

#include <fmt/format.h>

namespace netlatd {


// ---------------------------------------------------------------- aggregator

void IntervalAggregator::add(const netlatd_packet &p) { add(p, stage_durations(p)); }

void IntervalAggregator::add(const netlatd_packet &p, const StageDurations &d) {
  StageHistograms &series = series_[series_key(by_, p)];
  ++series.packets;
  ++packets_;
  if (p.l4proto == kIpprotoUdp)
    ++udp_;
  else if (p.l4proto == kIpprotoTcp) {
    ++tcp_;
    tcp_bytes_ += p.len;
  }
  if (p.reader_unknown != NETLATD_READER_KNOWN)
    ++reader_unknown_;
  // An out-of-order record (a stamp joined to the wrong packet, or clocks of
  // two CPUs disagreeing) would put a made-up duration into some stage.
  if (!d.ordered) {
    ++unordered_;
    return;
  }
  for (size_t i = 0; i < kStageCount; i++)
    if (d.of[i])
      series.stages[i].record(*d.of[i]);
  stages_stale_ = true;
}

void IntervalAggregator::add(const KernelSeries &k) {
  if (k.data.packets == 0)
    return;
  series_[k.key].merge(k.data);
  packets_ += k.data.packets;
  tcp_ += k.tcp;
  udp_ += k.data.packets - k.tcp;
  tcp_bytes_ += k.tcp_bytes;
  stages_stale_ = true;
}

std::string compare_aggregates(const IntervalAggregator &kernel, const IntervalAggregator &records) {
  auto name = [](const SeriesKey &k) {
    return fmt::format("series dport {} proto {} family {}", k.dport, k.proto, k.family);
  };
  if (kernel.packets() != records.packets() || kernel.packets_tcp() != records.packets_tcp() ||
      kernel.tcp_bytes() != records.tcp_bytes())
    return fmt::format("kernel {} packets ({} TCP, {} bytes), records {} ({} TCP, {} bytes)", kernel.packets(),
                       kernel.packets_tcp(), kernel.tcp_bytes(), records.packets(), records.packets_tcp(),
                       records.tcp_bytes());
  if (records.unordered() || records.reader_unknown())
    return fmt::format("{} records out of order and {} without a reader among those the kernel side added",
                       records.unordered(), records.reader_unknown());
  auto live = [](const SeriesMap &m) {
    std::vector<std::pair<SeriesKey, const StageHistograms *>> out;
    for (const auto &[key, h] : m)
      if (h.packets)
        out.emplace_back(key, &h);
    return out;
  };
  const auto a = live(kernel.series()), b = live(records.series());
  if (a.size() != b.size())
    return fmt::format("kernel {} series, records {}", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first)
      return fmt::format("kernel {}, records {}", name(a[i].first), name(b[i].first));
    if (a[i].second->packets != b[i].second->packets)
      return fmt::format("{}: kernel {} packets, records {}", name(a[i].first), a[i].second->packets,
                         b[i].second->packets);
    for (Stage s : kAllStages) {
      const Histogram &x = a[i].second->stages[static_cast<size_t>(s)];
      const Histogram &y = b[i].second->stages[static_cast<size_t>(s)];
      if (!(x == y))
        return fmt::format("{} {}: kernel count {} sum {} min {} max {}, records count {} sum {} min {} max {}{}",
                           name(a[i].first), stage_name(s), x.count(), x.sum(), x.min(), x.max(), y.count(), y.sum(),
                           y.min(), y.max(), x.count() == y.count() && x.sum() == y.sum() ? " (buckets differ)" : "");
    }
  }
  return "";
}

const Histogram &IntervalAggregator::stage(Stage s) const noexcept {
  if (stages_stale_) {
    for (Histogram &h : stages_)
      h.reset();
    for (const auto &[key, series] : series_)
      for (size_t i = 0; i < kStageCount; i++)
        stages_[i].merge(series.stages[i]);
    stages_stale_ = false;
  }
  return stages_[static_cast<size_t>(s)];
}

void IntervalAggregator::set_breakdown(BreakdownSpec by) {
  by_ = by;
  series_.clear();
}

void IntervalAggregator::reset() noexcept {
  for (Histogram &h : stages_)
    h.reset();
  stages_stale_ = false;
  // A series idle for a whole interval goes: reader cgroups come and go,
  // and each series holds its histograms' memory.
  std::erase_if(series_, [](const auto &entry) { return entry.second.packets == 0; });
  for (auto &[key, series] : series_) {
    series.packets = 0;
    for (Histogram &h : series.stages)
      h.reset();
  }
  packets_ = udp_ = tcp_ = unordered_ = reader_unknown_ = tcp_bytes_ = 0;
}

}  // namespace netlatd
