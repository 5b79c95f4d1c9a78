#pragma once

// The kernel's network counters of a namespace (/proc/net/snmp and
// /proc/net/netstat), for tests that must know what TCP or UDP did beside
// what netlatd saw: retransmissions, collapsed queues, checksum errors.

#include <map>
#include <string>

namespace nltest {

// "Group.Field" -> value, e.g. "Tcp.RetransSegs", "TcpExt.TCPRcvCollapsed".
using NetCounters = std::map<std::string, long long>;

NetCounters net_counters(const std::string &ns);

// One counter; -1 where the kernel has no such counter.
long long net_counter(const std::string &ns, const std::string &name);

// " name +delta" for each counter that changed, in name order.
std::string counter_changes(const NetCounters &before, const NetCounters &after);

}  // namespace nltest
