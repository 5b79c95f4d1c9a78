// Which devices count for which traced interface (src/watch.cpp): the
// devices below a bond or a VLAN, read from a sysfs/procfs tree built here
// as the kernel shows them, the kernel filter's entries built from them, and
// the log lines of interface following.
#include <fstream>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/breakdown.hpp"
#include "netlatd/watch.hpp"
#include "scratch.hpp"

using namespace netlatd;
namespace fs = std::filesystem;

namespace {

// A device in the fixture tree: its uevent and its lower_* links.
void device(const fs::path &root, const std::string &name, const std::string &devtype,
            const std::vector<std::string> &lowers = {}) {
  const fs::path dir = root / "sys/class/net" / name;
  fs::create_directories(dir);
  std::ofstream(dir / "uevent") << (devtype.empty() ? "" : "DEVTYPE=" + devtype + "\n") << "INTERFACE=" << name
                                << "\nIFINDEX=1\n";
  for (const std::string &l : lowers)
    fs::create_directory_symlink("../" + l, dir / ("lower_" + l));
}

// A VLAN device as the 8021q module shows it in /proc/net/vlan.
void vlan(const fs::path &root, const std::string &name, int vid, const std::string &real) {
  device(root, name, "vlan", {real});
  fs::create_directories(root / "proc/net/vlan");
  std::ofstream(root / "proc/net/vlan" / name)
      << name << "  VID: " << vid << "\t REORDER_HDR: 1  dev->priv_flags: 1001\n"
      << "Device: " << real << "\n";
}

InterfaceInfo info(const std::string &name, uint32_t ifindex, std::vector<int> irqs = {}) {
  InterfaceInfo i;
  i.name = name;
  i.ifindex = ifindex;
  i.irqs = std::move(irqs);
  return i;
}

}  // namespace

TEST_CASE("parse_vlan_id reads /proc/net/vlan/NAME and refuses what is not a VLAN id", "[watch]") {
  CHECK(parse_vlan_id("eth0.100  VID: 100\t REORDER_HDR: 1  dev->priv_flags: 1001\n") == 100);
  CHECK(parse_vlan_id("v  VID: 4094\t REORDER_HDR: 1\n") == 4094);
  CHECK(!parse_vlan_id("v  VID: 4095\n"));
  CHECK(!parse_vlan_id("v  VID: 0\n"));
  CHECK(!parse_vlan_id("v  VID: x\n"));
  CHECK(!parse_vlan_id(""));
}

TEST_CASE("lower devices: a bond's slaves untagged, a VLAN's real device with its tag, nested, and what is not followed",
          "[watch]") {
  nltest::TempDir dir("netlatd-watch");
  const fs::path root = dir.path();
  device(root, "eth0", "");
  device(root, "eth1", "");
  device(root, "eth2", "");
  device(root, "bond0", "bond", {"eth0", "eth1"});
  vlan(root, "eth2.100", 100, "eth2");
  vlan(root, "bond0.7", 7, "bond0");
  vlan(root, "eth2.100.5", 5, "eth2.100");
  device(root, "macv0", "macvlan", {"eth2"});  // the lower device carries other traffic too
  device(root, "br0", "bridge", {"eth1"});     // a bridge hands its packets up itself

  std::string problem;
  CHECK(lower_devices(root, "bond0", problem) == std::vector<LowerDevice>{{"eth0", 0}, {"eth1", 0}});
  CHECK(problem.empty());
  CHECK(lower_devices(root, "eth2.100", problem) == std::vector<LowerDevice>{{"eth2", 100}});
  // A VLAN over a bond: the slaves carry the VLAN's tag.
  CHECK(lower_devices(root, "bond0.7", problem) ==
        std::vector<LowerDevice>{{"bond0", 7}, {"eth0", 7}, {"eth1", 7}});
  CHECK(lower_devices(root, "eth0", problem).empty());
  CHECK(lower_devices(root, "macv0", problem).empty());
  CHECK(lower_devices(root, "br0", problem).empty());
  CHECK(problem.empty());
  // 802.1ad: two tags; the filter matches one, so nothing below is followed.
  CHECK(lower_devices(root, "eth2.100.5", problem).empty());
  CHECK(problem == "eth2.100 is a VLAN inside a VLAN (802.1ad); netlatd matches one tag");
}

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
  CHECK(t.devices == std::vector<WatchedDevice>{{2, 0, 1, false},     // eth0: the bond's
                                                {3, 0, 1, false},     // eth1: the bond's
                                                {4, 100, 2, false},   // eth2 tagged 100: the VLAN's
                                                {10, 0, 1, true},     // bond0 itself
                                                {11, 0, 2, true}});   // eth2.100 itself
  CHECK(t.irqs == std::vector<int>{24, 25, 26, 27});
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
