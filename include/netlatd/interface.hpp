#pragma once
// What netlatd needs to know of a network interface, read from sysfs/procfs,
// and the rtnetlink notifications that tell when it goes away and comes back.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace netlatd {

struct InterfaceInfo {
  std::string name;
  uint32_t ifindex = 0;
  std::vector<int> irqs;  // hard IRQ lines of its device; empty for lo, veth, tun
  std::string driver;     // e.g. "e1000", "veth", "" for lo
};

// nullopt when there is no such interface in this network namespace.
std::optional<InterfaceInfo> lookup_interface(const std::string &name);
// IRQ lines of an interface: its device's MSI vectors, its legacy INTx line,
// and /proc/interrupts lines named after it (e.g. "eth0-rx-0").
std::vector<int> interface_irqs(const std::string &name);
// The same from what it reads: the names in device/msi_irqs/, device/irq
// (used when there are no MSI vectors) and /proc/interrupts. Sorted, no
// duplicates. Public for the fuzz harness; the daemon calls interface_irqs().
std::vector<int> irqs_of_interface(const std::string &name, const std::vector<std::string> &msi_irq_entries,
                                   std::istream &legacy_irq, std::istream &proc_interrupts);
// Inode of this process's network namespace (what the kernel's ns.inum holds).
uint32_t current_netns_inode();

// One link notification of this network namespace (RTM_NEWLINK / RTM_DELLINK).
// A "new" one is also sent when an existing link changes (up, down, renamed),
// so a consumer compares the index and name with what it already knows.
struct LinkEvent {
  enum class Kind { New, Deleted };
  Kind kind = Kind::New;
  uint32_t ifindex = 0;
  std::string name;  // IFLA_IFNAME; empty if the message had none
};

// Decodes a buffer of rtnetlink messages as read from the socket; other
// message types are skipped, a truncated message ends the walk.
std::vector<LinkEvent> parse_link_messages(const void *data, size_t len);

// An rtnetlink socket (NETLINK_ROUTE) subscribed to RTMGRP_LINK: the kernel
// tells it at once when a link is added, changed or deleted, so an interface
// deleted and re-created within a moment is still seen to go and come back
// (a periodic lookup by name would only see a new ifindex, or nothing).
class LinkMonitor {
public:
  // Throws std::system_error when the socket cannot be made (no AF_NETLINK).
  LinkMonitor();
  ~LinkMonitor();
  LinkMonitor(const LinkMonitor &) = delete;
  LinkMonitor &operator=(const LinkMonitor &) = delete;

  int fd() const noexcept { return fd_; }  // non-blocking; readable when events wait

  // Every notification waiting, oldest first; never blocks. Sets `lost` when
  // the kernel dropped notifications because the socket buffer was full
  // (ENOBUFS): the caller must then re-read the state it cares about.
  std::vector<LinkEvent> read_events(bool &lost);

private:
  int fd_ = -1;
};

}  // namespace netlatd
