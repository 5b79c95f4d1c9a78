#pragma once
// What netlatd needs to know of a network interface, read from sysfs/procfs
// (and, for another namespace's, from rtnetlink and ethtool asked there), and
// the rtnetlink notifications that tell when it goes away and comes back.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netlatd/base/fd.hpp"

namespace netlatd {

// One hard IRQ line of an interface's device, how it was found, and whether
// its interrupts count for the `irq` stage. Only lines that can raise the
// receive path count: the kernel side stamps the IRQ during which NET_RX was
// raised, so a receive line left out loses the stage, while a transmit-only or
// control line counted could only ever stamp a packet with an interrupt that
// did not deliver it.
struct IrqLine {
  int irq = 0;
  std::string name;      // its handler's name in /proc/interrupts ("eth0-rx-0"); "" when not listed
  std::string found_by;  // "/sys/class/net/eth0/device/msi_irqs", "/proc/interrupts", "--irq"
  std::string role;      // "receive", "receive and transmit", "transmit only", "device control", ...
  bool counted = false;
};

struct InterfaceInfo {
  std::string name;
  uint32_t ifindex = 0;
  std::vector<int> irqs;           // the counted lines (what the kernel side stamps); empty for lo, veth, tun
  std::vector<IrqLine> irq_lines;  // every line found, counted or not, for --check and the log
  std::string driver;              // e.g. "e1000", "veth", "" for lo
};

// nullopt when there is no such interface in this network namespace. A
// non-empty `irq_override` (--irq) replaces the discovery of its IRQ lines.
std::optional<InterfaceInfo> lookup_interface(const std::string &name, const std::vector<int> &irq_override = {});

// One numbered line of /proc/interrupts ("NMI:", "LOC:" and the like are skipped).
struct InterruptsLine {
  int irq = 0;
  std::string chip;                  // "IO-APIC", "PCI-MSIX-0000:00:03.0"
  std::vector<std::string> actions;  // handler names: {"eth0"}, {"eth1", "uhci_hcd:usb1"} on a shared line
};
// Never throws: a line it cannot read is skipped.
std::vector<InterruptsLine> parse_proc_interrupts(std::string_view text);

// The IRQ lines of interface `ifname`, read from a sysfs tree under `root`
// ("/" on a live system, a fixture directory in tests) and the text of
// /proc/interrupts:
// - the MSI/MSI-X vectors of its device (`device/msi_irqs/`), or of the
//   device's parent when the device is a bus child such as virtio0, else the
//   device's legacy line (`device/irq`, only when it has no MSI vectors: a
//   device using MSI-X still shows its unused INTx line there);
// - lines whose handler is named after the interface ("eth0-TxRx-0"), the
//   device ("virtio0-input.0") or its PCI address ("mlx5_comp0@pci:0000:..").
// Each line's role comes from its handler's name; see IrqLine. Sorted by irq.
std::vector<IrqLine> find_irq_lines(const std::filesystem::path &root, const std::string &ifname,
                                    std::string_view proc_interrupts);
// The lines --irq names, all counted, with their names in /proc/interrupts.
std::vector<IrqLine> irq_lines_given(const std::vector<int> &irqs, std::string_view proc_interrupts);
// The counted lines' numbers, sorted.
std::vector<int> counted_irqs(const std::vector<IrqLine> &lines);
// One line per IRQ line for --check and the log: number, counted or not and
// why, name, where it was found.
std::vector<std::string> describe_irq_lines(const std::vector<IrqLine> &lines);
// Inode of this process's network namespace (what the kernel's ns.inum holds).
uint32_t current_netns_inode();

// --netns: a name ("blue": /run/netns/blue, as `ip netns` makes), a pid
// ("1234": /proc/1234/ns/net) or a path (anything with a '/').
std::string netns_path(const std::string &spec);
// --netns opened (-1 when `spec` is empty). Throws Error(NoInterface) when
// there is no such namespace or the file is not one.
int open_netns(const std::string &spec);
// The inode of the namespace open at `fd` (-1: this process's own).
uint32_t netns_inode(int fd);
// Runs `fn` on a thread that has entered the network namespace open at
// `netns_fd` (-1: this process's own, on this thread) and waits for it:
// rtnetlink sockets made there, and if_nametoindex() there, see that
// namespace. Throws std::system_error when the namespace cannot be entered.
void in_network_namespace(int netns_fd, const std::function<void()> &fn);
// The interfaces of a namespace by index and name (if_nameindex), sorted.
std::vector<std::pair<uint32_t, std::string>> interface_names(int netns_fd = -1);

// One link notification of this network namespace (RTM_NEWLINK / RTM_DELLINK).
// A "new" one is also sent when an existing link changes (up, down, renamed),
// so a consumer compares the index and name with what it already knows.
// The same message answers a dump of the links (RTM_GETLINK): then it also
// says what the link is and what it sits on, for the devices below a bond or
// a VLAN (src/watch.cpp).
struct LinkEvent {
  enum class Kind { New, Deleted };
  Kind kind = Kind::New;
  uint32_t ifindex = 0;
  std::string name;  // IFLA_IFNAME; empty if the message had none
  uint32_t master = 0;           // IFLA_MASTER: the device it is enslaved to (a bond's slave); 0 none
  uint32_t link = 0;             // IFLA_LINK: the device it sits on (a VLAN's real device); 0 none
  std::optional<int32_t> link_netnsid;  // IFLA_LINK_NETNSID: `link` is an ifindex of another namespace
  std::string type;              // IFLA_INFO_KIND: "vlan", "bond", "veth", ...; "" for hardware and lo
  uint16_t vlan_id = 0;          // IFLA_VLAN_ID of a "vlan"; 0 when absent
};

// How a batch of rtnetlink messages ended: what a dump's reader needs besides
// the links.
struct LinkBatchEnd {
  bool done = false;         // NLMSG_DONE seen
  int error = 0;             // errno of an NLMSG_ERROR (0: none, or an acknowledgement)
  bool interrupted = false;  // NLM_F_DUMP_INTR: the links changed during the dump; ask again
};

// Decodes a buffer of rtnetlink messages as read from the socket; other
// message types are skipped, a truncated message or attribute ends its walk.
// `end`, when given, says whether the batch ended a dump and how.
std::vector<LinkEvent> parse_link_messages(const void *data, size_t len, LinkBatchEnd *end = nullptr);

// Every link of a namespace (-1: this process's), from an RTM_GETLINK dump
// asked on a socket made there. Throws std::system_error when it cannot be
// had (no netlink, the namespace not entered, a dump interrupted 4 times).
std::vector<LinkEvent> dump_links(int netns_fd = -1);

// What ETHTOOL_GDRVINFO says of an interface: its driver and the address of
// its device on its bus ("0000:00:03.0" for PCI); both empty when the
// interface has no driver to ask (lo).
struct DriverInfo {
  std::string driver;    // "e1000", "virtio_net", "veth", "bonding"
  std::string bus_info;  // "" for a virtual device (veth, bond, VLAN)
};
// A datagram socket made in the namespace (-1: this process's), for
// driver_info(): SIOCETHTOOL finds the interface by name in the namespace
// of the socket. Throws std::system_error.
int ethtool_socket(int netns_fd = -1);
std::optional<DriverInfo> driver_info(int ethtool_fd, const std::string &ifname);

// The IRQ lines of interface `ifname` of another network namespace, whose
// /sys/class/net this process cannot see: its device found by bus address
// under `root`/sys/bus/pci/devices/<bus_info> (sysfs shows every bus device
// whatever its interface's namespace), then as find_irq_lines(). A bus child
// driven by the interface's driver (virtio0 under a virtio PCI device) is the
// device, its parent holding the vectors. No lines for a device without a
// PCI address (veth, lo, bond, VLAN).
std::vector<IrqLine> find_irq_lines_by_bus(const std::filesystem::path &root, const std::string &ifname,
                                           const DriverInfo &driver, std::string_view proc_interrupts);

// An rtnetlink socket (NETLINK_ROUTE) subscribed to RTMGRP_LINK: the kernel
// tells it at once when a link is added, changed or deleted, so an interface
// deleted and re-created within a moment is still seen to go and come back
// (a periodic lookup by name would only see a new ifindex, or nothing).
class LinkMonitor {
public:
  // Throws std::system_error when the socket cannot be made (no AF_NETLINK).
  // `netns_fd`: the namespace whose links it hears (-1: this process's).
  explicit LinkMonitor(int netns_fd = -1);

  int fd() const noexcept { return fd_.get(); }  // non-blocking; readable when events wait

  // Every notification waiting, oldest first; never blocks. Sets `lost` when
  // the kernel dropped notifications because the socket buffer was full
  // (ENOBUFS): the caller must then re-read the state it cares about.
  std::vector<LinkEvent> read_events(bool &lost);

private:
  Fd fd_;
};

// One log line per IRQ line of the interface: counted or not, and why.
void log_irq_lines(const InterfaceInfo &iface);

// The kernel's rule for a network device name (what `--iface` accepts).
bool valid_interface_name(const std::string &name);
// At most this many interfaces are traced at once (named, or found by all/irq).
inline constexpr size_t kMaxIfaces = 64;
// --iface all / --iface irq: a set of interfaces, not a name.
bool is_iface_set_word(const std::string &word);
// Whether the figures are split by interface (an `iface` key) without --by
// asking: several interfaces, or a set.
bool traces_several_ifaces(const std::vector<std::string> &ifaces);

}  // namespace netlatd
