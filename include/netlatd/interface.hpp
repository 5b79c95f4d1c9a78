#pragma once
// What netlatd needs to know of a network interface, read from sysfs/procfs.
#include <cstdint>
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
// Inode of this process's network namespace (what the kernel's ns.inum holds).
uint32_t current_netns_inode();

}  // namespace netlatd
