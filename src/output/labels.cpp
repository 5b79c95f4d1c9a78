// The labels of a series of the breakdown, and the port list.
#include "netlatd/output/labels.hpp"

namespace netlatd {

std::vector<std::pair<std::string, std::string>> series_labels(const BreakdownSpec &spec, const SeriesKey &key,
                                                               CgroupNames &names, const IfaceNames *ifaces) {
  std::vector<std::pair<std::string, std::string>> labels;
  if (spec.iface) {
    const auto it = ifaces ? ifaces->find(key.iface) : IfaceNames::const_iterator{};
    labels.emplace_back("iface", ifaces && it != ifaces->end() ? it->second : "iface-id:" + std::to_string(key.iface));
  }
  if (spec.dport)
    labels.emplace_back("dport", std::to_string(key.dport));
  if (spec.proto)
    labels.emplace_back("proto", key.proto == kIpprotoTcp   ? "tcp"
                                 : key.proto == kIpprotoUdp ? "udp"
                                                            : std::to_string(key.proto));
  if (spec.family)
    labels.emplace_back("family", key.family == 6 ? "ipv6" : "ipv4");
  if (spec.cgroup) {
    // Copied out: a later lookup may evict the entry.
    const CgroupInfo info = names.info(key.cgroup);
    labels.emplace_back("cgroup", info.path);
    // Functions of the cgroup: no more series. Left out when the path shows none.
    if (!info.container.id.empty())
      labels.emplace_back("container_id", info.container.id);
    if (!info.container.runtime.empty())
      labels.emplace_back("container_runtime", info.container.runtime);
    if (!info.container.pod_uid.empty())
      labels.emplace_back("pod_uid", info.container.pod_uid);
  }
  return labels;
}

std::string join_ports(const std::vector<uint16_t> &ports) {
  std::string s;
  for (uint16_t p : ports) {
    if (!s.empty())
      s.push_back(',');
    s += std::to_string(p);
  }
  return s;
}

}  // namespace netlatd
