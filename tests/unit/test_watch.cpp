// Which devices count for which traced interface (src/watch.cpp): the
// kernel filter's entries built from the devices below a bond or a VLAN
// (found in tests/unit/test_link_dump.cpp), and the log lines of interface
// following.
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/watch.hpp"
#include "netlatd/output/labels.hpp"

using namespace netlatd;

namespace {

InterfaceInfo info(const std::string &name, uint32_t ifindex, std::vector<int> irqs = {}) {
  InterfaceInfo i;
  i.name = name;
  i.ifindex = ifindex;
  i.irqs = std::move(irqs);
  return i;
}

}  // namespace

TEST_CASE("the kernel filter's entries: each device once, the upper interface wins, IRQs of all", "[watch]") {
  TracedInterface bond{"bond0", 1, info("bond0", 10), {}, ""};
  bond.lowers = {{{"eth0", 0}, info("eth0", 2, {24, 25})}, {{"eth1", 0}, info("eth1", 3, {26})}};
  TracedInterface vlan100{"eth2.100", 2, info("eth2.100", 11), {{{"eth2", 100}, info("eth2", 4, {27})}}, ""};
  // eth0 also traced by its own name (as with --iface all): its packets are
  // the bond's, where a socket receives them.
  TracedInterface eth0{"eth0", 3, info("eth0", 2, {24, 25}), {}, ""};
  TracedInterface gone{"eth9", 4, std::nullopt, {}, ""};
  const TraceTarget t = trace_target({eth0, bond, vlan100, gone}, 4026531840u);
  CHECK(t.netns_inode == 4026531840u);
  // The NICs below take their NET_RX run's IRQ stamp; the bond and VLAN
  // devices have no IRQ lines (their packets are first seen below anyway).
  CHECK(t.devices == std::vector<WatchedDevice>{{2, 0, 1, false, true},     // eth0: the bond's
                                                {3, 0, 1, false, true},     // eth1: the bond's
                                                {4, 100, 2, false, true},   // eth2 tagged 100: the VLAN's
                                                {10, 0, 1, true, false},    // bond0 itself
                                                {11, 0, 2, true, false}});  // eth2.100 itself
  CHECK(t.irqs == std::vector<int>{24, 25, 26, 27});
}

// lo traced beside a NIC: a loopback packet processed in a NET_RX run the
// NIC's IRQ raised must not take that IRQ (or its raise) as its own.
TEST_CASE("the kernel filter's entries: only a device with IRQ lines takes its run's IRQ", "[watch]") {
  TracedInterface lo{"lo", 1, info("lo", 1), {}, ""};
  TracedInterface eth0{"eth0", 2, info("eth0", 2, {24}), {}, ""};
  const TraceTarget t = trace_target({lo, eth0}, 4026531840u);
  CHECK(t.devices == std::vector<WatchedDevice>{{1, 0, 1, false, false}, {2, 0, 2, false, true}});
  CHECK(t.irqs == std::vector<int>{24});
}

TEST_CASE("interface following: one line per change, per interface", "[watch]") {
  TracedInterface a{"eth0", 1, info("eth0", 2), {}, ""};
  TracedInterface b{"eth1", 2, info("eth1", 3), {}, ""};
  TracedInterface b_gone{"eth1", 2, std::nullopt, {}, ""};
  TracedInterface b_back{"eth1", 2, info("eth1", 9), {}, ""};
  auto texts = [](const std::vector<InterfaceChange> &changes) {
    std::vector<std::string> out;
    for (const auto &c : changes)
      out.push_back(c.text);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(interface_changes({a, b}, {a, b}, false).empty());
  CHECK(texts(interface_changes({a, b}, {a, b_gone}, false)) ==
        V{"interface eth1 disappeared; waiting for it to come back"});
  CHECK(texts(interface_changes({a, b_gone}, {a, b_back}, false)) ==
        V{"interface eth1 is back (ifindex 9); tracing resumes"});
  CHECK(texts(interface_changes({a}, {a, b}, true)) == V{"interface eth1 appeared (ifindex 3); tracing it"});
  CHECK(texts(interface_changes({a, b}, {a}, true)) == V{"interface eth1 disappeared; no longer traced"});
  TracedInterface bond{"bond0", 3, info("bond0", 10), {{{"eth0", 0}, info("eth0", 2)}}, ""};
  TracedInterface bond2 = bond;
  bond2.lowers.push_back({{"eth1", 0}, info("eth1", 3)});
  CHECK(texts(interface_changes({bond}, {bond2}, false)) ==
        V{"interface bond0: its packets arrive first on eth0, eth1"});

  IfaceNames names;
  remember_names(names, {a, b});
  remember_names(names, {a});  // a name once traced keeps its number's entry
  CHECK(names == IfaceNames{{1, "eth0"}, {2, "eth1"}});
  BreakdownSpec by;
  by.iface = true;
  CgroupNames cgroups([](uint64_t) { return std::nullopt; });
  SeriesKey k;
  k.iface = 2;
  CHECK(series_labels(by, k, cgroups, &names).front() == std::pair<std::string, std::string>{"iface", "eth1"});
  k.iface = 7;
  CHECK(series_labels(by, k, cgroups, &names).front() == std::pair<std::string, std::string>{"iface", "iface-id:7"});
}
