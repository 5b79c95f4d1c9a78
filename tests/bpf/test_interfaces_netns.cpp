// Another network namespace's interfaces as the daemon finds them, with no
// traffic: a --netns that names none exits in one line; the links read in
// that namespace, against iproute2's, and the devices below them; and IRQ
// lines found through a NIC's PCI address, as --netns finds them, against
// those found through /sys/class/net. Its traffic, traced with --netns, is
// in test_interfaces.cpp.
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/net/watch.hpp"
#include "process.hpp"
#include "scratch.hpp"

using nlohmann::json;
using namespace nltest;

TEST_CASE("another network namespace: one that does not exist, or a file that is none, exits 68 in one line",
          "[bpf][ifaces][netns]") {
  SKIP_UNLESS_ROOT();
  Exit e = run_netlatd({"--netns", "nltest-no-such-ns", "--iface", "lo", "--port", "5000"});
  CHECK(e.code == 68);
  CHECK(e.err == "netlatd: error: no network namespace 'nltest-no-such-ns' (/run/netns/nltest-no-such-ns: No such "
                 "file or directory)\n");
  e = run_netlatd({"--netns", "/proc/self/ns/uts", "--iface", "lo", "--port", "5000"});
  CHECK(e.code == 68);
  CHECK(e.err == "netlatd: error: '/proc/self/ns/uts' is not a network namespace\n");
}

namespace {

const netlatd::LinkEvent *link_named(const std::vector<netlatd::LinkEvent> &links, const std::string &name) {
  for (const netlatd::LinkEvent &l : links)
    if (l.name == name)
      return &l;
  return nullptr;
}

}  // namespace

// The links of another namespace as the daemon reads them (a dump asked from
// a socket made there), against what iproute2 says of the same links; the
// devices below found from them. A bridge's port and a macvlan's lower
// device are not followed; a VLAN's real device is, unless it is in
// another namespace.
TEST_CASE("another network namespace: its links read there, and the devices below them",
          "[bpf][ifaces][netns]") {
  SKIP_UNLESS_ROOT();
  VethNamespaces net;
  const std::string br = "nlbr" + std::to_string(getpid() % 10000), port = net.rx_if + "p", mv = net.rx_if + "m";
  REQUIRE(sh("set -e; ip -n " + net.rx_ns + " link add " + br + " type bridge; ip -n " + net.rx_ns + " link add " +
             port + " type veth peer name " + port + "q; ip -n " + net.rx_ns + " link set " + port + " master " + br +
             "; ip -n " + net.rx_ns + " link add " + mv + " link " + net.rx_if + " type macvlan") == 0);
  const netlatd::Fd ns(netlatd::open_netns(net.rx_ns));
  const auto links = netlatd::dump_links(ns.get());
  const json shown = json::parse(sh_output("ip -n " + net.rx_ns + " -j -d link show"));
  REQUIRE(shown.is_array());
  CHECK(links.size() == shown.size());
  for (const json &l : shown) {
    const std::string name = l.value("ifname", "");
    INFO(name);
    const netlatd::LinkEvent *mine = link_named(links, name);
    REQUIRE(mine);
    CHECK(mine->ifindex == l.value("ifindex", 0u));
    const std::string kind = l.contains("linkinfo") ? l["linkinfo"].value("info_kind", "") : "";
    CHECK(mine->type == kind);
    const auto *master = l.contains("master") ? link_named(links, l["master"].get<std::string>()) : nullptr;
    CHECK(mine->master == (master ? master->ifindex : 0u));
    CHECK(mine->link_netnsid.has_value() == l.contains("link_netnsid"));
  }
  REQUIRE(link_named(links, net.rx_if));
  CHECK(link_named(links, net.rx_if)->link_netnsid.has_value());  // its peer is in the tx namespace
  std::string problem;
  CHECK(netlatd::lower_devices(links, br, problem).empty());
  CHECK(netlatd::lower_devices(links, mv, problem).empty());
  CHECK(problem.empty());

  // The daemon's lookup: every interface there, each with its driver, none with
  // IRQ lines (veth, bridge, macvlan and lo deliver in software).
  std::map<std::string, uint32_t> ids;
  std::vector<std::string> left_out;
  const auto traced = netlatd::look_up_interfaces({"all"}, {}, ids, left_out, ns.get());
  CHECK(traced.size() == links.size());
  for (const netlatd::TracedInterface &t : traced) {
    INFO(t.name);
    REQUIRE(t.info);
    CHECK(t.info->ifindex == link_named(links, t.name)->ifindex);
    CHECK(t.info->irq_lines.empty());
    CHECK(t.lowers.empty());
    CHECK(t.problem.empty());
    if (t.name == br)
      CHECK(t.info->driver == "bridge");
    if (t.name == net.rx_if)
      CHECK(t.info->driver == "veth");
  }

  if (sh("ip -n " + net.rx_ns + " link add link " + net.rx_if + " name " + net.rx_if + ".7 type vlan id 7") != 0)
    SKIP("this kernel cannot make a VLAN device (CONFIG_VLAN_8021Q): the rest is about VLANs");
  // A VLAN of the tx side's veth, moved here: its real device is there.
  REQUIRE(sh("set -e; ip -n " + net.tx_ns + " link add link " + net.tx_if + " name " + net.tx_if +
             ".9 type vlan id 9; ip -n " + net.tx_ns + " link set " + net.tx_if + ".9 netns " + net.rx_ns) == 0);
  const auto stacked = netlatd::dump_links(ns.get());
  CHECK(netlatd::lower_devices(stacked, net.rx_if + ".7", problem) ==
        std::vector<netlatd::LowerDevice>{{net.rx_if, 7}});
  CHECK(problem.empty());
  CHECK(netlatd::lower_devices(stacked, net.tx_if + ".9", problem).empty());
  CHECK(problem.find("the real device of VLAN " + net.tx_if + ".9 is in another network namespace (netnsid ") == 0);
}

// With --netns an interface's IRQ lines are found through its PCI address,
// not its entry in /sys/class/net: for this machine's own NICs, both ways
// must find the same lines (the bus way is the one another namespace's NIC
// gets; moving this machine's NIC away to try it would cut it off).
TEST_CASE("IRQ lines through the PCI address: the same as through /sys/class/net, for this machine's NICs",
          "[bpf][ifaces][netns][irq]") {
  const netlatd::Fd sock(netlatd::ethtool_socket());
  const std::string interrupts = read_file("/proc/interrupts");
  int compared = 0;
  for (const auto &[index, name] : netlatd::interface_names()) {
    const auto driver = netlatd::driver_info(sock.get(), name);
    if (!driver || driver->bus_info.empty() ||
        access(("/sys/bus/pci/devices/" + driver->bus_info).c_str(), F_OK) != 0)
      continue;
    INFO(name << " (" << driver->driver << " at " << driver->bus_info << ")");
    const auto by_class = netlatd::find_irq_lines("/", name, interrupts);
    const auto by_bus = netlatd::find_irq_lines_by_bus("/", name, *driver, interrupts);
    REQUIRE(by_bus.size() == by_class.size());
    for (size_t i = 0; i < by_bus.size(); ++i) {
      CHECK(by_bus[i].irq == by_class[i].irq);
      CHECK(by_bus[i].name == by_class[i].name);
      CHECK(by_bus[i].role == by_class[i].role);
      CHECK(by_bus[i].counted == by_class[i].counted);
      CHECK(by_bus[i].found_by.rfind("/sys/bus/pci/devices/" + driver->bus_info + "/", 0) == 0);
    }
    ++compared;
  }
  if (compared == 0)
    SKIP("no interface here has a PCI device");
}
