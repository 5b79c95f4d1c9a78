#include "netlatd/model/breakdown.hpp"

#include <algorithm>
#include <stdexcept>

namespace netlatd {

BreakdownSpec parse_breakdown(std::string_view list) {
  BreakdownSpec spec{false, false, false, false, false};
  if (list == "none")
    return spec;
  if (list.empty())
    throw std::invalid_argument("names nothing; give dport, proto, family, cgroup and/or iface, or none");
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view word = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (word == "dport")
      spec.dport = true;
    else if (word == "proto")
      spec.proto = true;
    else if (word == "family")
      spec.family = true;
    else if (word == "cgroup")
      spec.cgroup = true;
    else if (word == "iface")
      spec.iface = true;
    else
      throw std::invalid_argument("unknown key '" + std::string(word) +
                                  "' (known: dport, proto, family, cgroup, iface; or none)");
    if (comma != std::string_view::npos && list.empty())
      throw std::invalid_argument("ends with a comma");
  }
  return spec;
}

std::vector<std::string_view> breakdown_keys(const BreakdownSpec &spec) {
  std::vector<std::string_view> keys;
  if (spec.iface)
    keys.push_back("iface");
  if (spec.dport)
    keys.push_back("dport");
  if (spec.proto)
    keys.push_back("proto");
  if (spec.family)
    keys.push_back("family");
  if (spec.cgroup)
    keys.push_back("cgroup");
  return keys;
}

SeriesKey series_key(const BreakdownSpec &spec, const netlatd_packet &p) noexcept {
  SeriesKey k;
  if (spec.iface)
    k.iface = p.iface_id;
  if (spec.dport)
    k.dport = p.dport;
  if (spec.proto)
    k.proto = p.l4proto;
  if (spec.family)
    k.family = (p.flags & NETLATD_PKT_IPV6) ? 6 : 4;
  if (spec.cgroup)
    k.cgroup = p.reader_unknown == NETLATD_READER_KNOWN ? p.reader_cgroup : kNoCgroup;
  return k;
}

void StageHistograms::merge(const StageHistograms &other) noexcept {
  packets += other.packets;
  for (size_t i = 0; i < kStageCount; ++i)
    stages[i].merge(other.stages[i]);
}

SeriesMap fold_cgroups_top(const SeriesMap &series, size_t top_n) {
  // Rank the cgroups of each (port, protocol, family) by packets.
  std::map<SeriesKey, std::vector<std::pair<uint64_t, uint64_t>>> ranked;  // group -> (packets, cgroup)
  for (const auto &[key, h] : series) {
    if (key.cgroup == kNoCgroup)
      continue;
    SeriesKey group = key;
    group.cgroup = 0;
    ranked[group].emplace_back(h.packets, key.cgroup);
  }
  std::set<SeriesKey> kept;
  for (auto &[group, list] : ranked) {
    std::sort(list.begin(), list.end(), [](const auto &a, const auto &b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (size_t i = 0; i < list.size() && i < top_n; ++i) {
      SeriesKey k = group;
      k.cgroup = list[i].second;
      kept.insert(k);
    }
  }
  SeriesMap out;
  for (const auto &[key, h] : series) {
    SeriesKey into = key;
    if (key.cgroup != kNoCgroup && !kept.count(key))
      into.cgroup = kOtherCgroup;
    out[into].merge(h);
  }
  return out;
}

uint64_t StickyCgroups::map(uint64_t cgroup) {
  if (cgroup == kNoCgroup || cgroup == kOtherCgroup || named_.count(cgroup))
    return cgroup;
  if (named_.size() >= limit_)
    return kOtherCgroup;
  named_.insert(cgroup);
  return cgroup;
}

}  // namespace netlatd
