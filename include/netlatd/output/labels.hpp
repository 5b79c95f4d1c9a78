#pragma once
// The labels a series of the breakdown is written with (the JSON `breakdown`
// rows, the Prometheus series), and the port list as both show it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/cgroup.hpp"

namespace netlatd {

// The label pairs of a series in the fixed key order, only the keys split
// by: {{"dport","5000"},{"proto","udp"}}. An interface number without a
// name reads "iface-id:N". `cgroup` comes with `container_id`,
// `container_runtime` and `pod_uid` where its path shows them.
std::vector<std::pair<std::string, std::string>> series_labels(const BreakdownSpec &spec, const SeriesKey &key,
                                                               CgroupNames &names, const IfaceNames *ifaces = nullptr);

// "5000,5001": the ports as the lines and the metrics show them.
std::string join_ports(const std::vector<uint16_t> &ports);

}  // namespace netlatd
