#include "net_counters.hpp"

#include <sstream>

#include "net_fixture.hpp"

namespace nltest {
namespace {

// The files' layout: a line of names, then a line of values, each line
// starting with "Group:".
void parse_pairs(const std::string &text, NetCounters &out) {
  std::istringstream in(text);
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    std::istringstream n(names), v(values);
    std::string group, name, value;
    if (!(n >> group) || !(v >> value) || group.empty() || group.back() != ':')
      continue;
    group.pop_back();
    while (n >> name && v >> value)
      out[group + "." + name] = std::stoll(value);
  }
}

}  // namespace

NetCounters net_counters(const std::string &ns) {
  NetCounters c;
  const std::string in_ns = ns.empty() ? "" : "ip netns exec " + ns + " ";
  parse_pairs(sh_output(in_ns + "cat /proc/net/snmp"), c);
  parse_pairs(sh_output(in_ns + "cat /proc/net/netstat"), c);
  return c;
}

long long net_counter(const std::string &ns, const std::string &name) {
  const NetCounters c = net_counters(ns);
  const auto it = c.find(name);
  return it == c.end() ? -1 : it->second;
}

std::string counter_changes(const NetCounters &before, const NetCounters &after) {
  std::string out;
  for (const auto &[name, value] : after) {
    const auto it = before.find(name);
    const long long delta = value - (it == before.end() ? 0 : it->second);
    if (delta)
      out += " " + name + (delta > 0 ? " +" : " ") + std::to_string(delta);
  }
  return out.empty() ? " none" : out;
}

}  // namespace nltest
