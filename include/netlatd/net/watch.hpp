#pragma once
// Which devices' packets count, for which traced interface: --iface's names
// (or every interface, or every one with IRQ lines), each followed through
// deletion, re-creation and renaming, and the devices below a bond or VLAN
// that its packets reach netif_receive_skb on first.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/kernel/tracer.hpp"

namespace netlatd {

// A device below a traced interface. A bond's slaves carry its packets as
// they are; a VLAN's real device carries them with the VLAN's tag.
struct LowerDevice {
  std::string name;
  uint16_t vlan = 0;  // the tag a packet for the upper interface carries on this device; 0 untagged
  bool operator==(const LowerDevice &) const = default;
};

// The devices below `ifname` whose packets are its packets, from the links
// of its namespace as an rtnetlink dump gives them (dump_links()): a bond's
// slaves (IFLA_MASTER, for a link of kind "bond") or a VLAN's real device
// (IFLA_LINK of a "vlan", with its IFLA_VLAN_ID), then theirs, depth first,
// each level sorted by name. Other uppers (macvlan, bridge, ...) add none:
// their lower device carries other traffic too, and a bridge hands its own
// packets to netif_receive_skb itself. `problem` is set (and nothing
// returned) for a VLAN in a VLAN, whose outer tag this filter does not
// match, and for a VLAN whose real device is in another namespace
// (IFLA_LINK_NETNSID): its ifindex there names no device here.
std::vector<LowerDevice> lower_devices(const std::vector<LinkEvent> &links, const std::string &ifname,
                                       std::string &problem);

// One traced interface as last looked up.
struct TracedInterface {
  std::string name;
  uint32_t id = 0;  // its number in the records: fixed for the name for the daemon's life
  std::optional<InterfaceInfo> info;  // nullopt: not there now
  struct Lower {
    LowerDevice device;
    InterfaceInfo info;
  };
  std::vector<Lower> lowers;
  std::string problem;  // why devices below it are not followed, "" if none
};

// The interfaces --iface names now: the names as given, or for "all" every
// interface in /sys/class/net, for "irq" those with counted IRQ lines
// (sorted by name). `irq_override` is --irq (one named interface only).
// `ids` gives each name its number, adding new names while fewer than
// kMaxIfaces have one; a name beyond them is left out and named in `left_out`.
// The devices below come from a link dump of the namespace. `netns_fd` >= 0
// (--netns): the interfaces of that namespace, from that dump; this
// process's /sys/class/net shows its own namespace's, so their IRQ lines are
// found through their bus device (find_irq_lines_by_bus()). Throws
// std::system_error when that namespace's links cannot be listed.
std::vector<TracedInterface> look_up_interfaces(const std::vector<std::string> &ifaces,
                                                const std::vector<int> &irq_override,
                                                std::map<std::string, uint32_t> &ids,
                                                std::vector<std::string> &left_out, int netns_fd = -1);

// The kernel filter's view of them: every present interface and the devices
// below it, with the IRQ lines of all. A device that is both traced itself
// and below another traced interface (a bond's slave with `all`) counts its
// packets for the upper one: that is where a socket receives them.
TraceTarget trace_target(const std::vector<TracedInterface> &traced, uint32_t netns_inode);

// One log line per change between two lookups: "interface eth1 disappeared;
// waiting for it to come back", "interface eth1 is back (ifindex 7); tracing
// resumes", "interface eth2 appeared (ifindex 9); tracing it", devices below
// that came or went.
struct InterfaceChange {
  bool warning = false;  // gone, or a problem: worth a warning, not info
  std::string text;
};
std::vector<InterfaceChange> interface_changes(const std::vector<TracedInterface> &before,
                                               const std::vector<TracedInterface> &after, bool set_mode);

// The names of the interfaces by number: what the `iface` key shows. Names
// once traced keep their number's entry.
void remember_names(IfaceNames &names, const std::vector<TracedInterface> &traced);

}  // namespace netlatd
