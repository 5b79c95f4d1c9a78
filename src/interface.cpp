#include "netlatd/interface.hpp"

#include <net/if.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace netlatd {
namespace fs = std::filesystem;

std::vector<int> interface_irqs(const std::string &name) {
  std::vector<int> irqs;
  const fs::path dev = fs::path("/sys/class/net") / name / "device";
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dev / "msi_irqs", ec)) {
    try {
      irqs.push_back(std::stoi(e.path().filename().string()));
    } catch (const std::exception &) {
    }
  }
  if (irqs.empty()) {
    std::ifstream f(dev / "irq");
    int irq = 0;
    if (f >> irq && irq > 0)
      irqs.push_back(irq);
  }
  // Multi-queue drivers name their vectors after the interface.
  std::ifstream pi("/proc/interrupts");
  std::string line;
  while (std::getline(pi, line)) {
    std::istringstream ls(line);
    std::string first;
    ls >> first;
    if (first.empty() || first.back() != ':' || !std::isdigit(static_cast<unsigned char>(first[0])))
      continue;
    std::string tok, last;
    while (ls >> tok)
      last = tok;
    if (last == name || last.rfind(name + "-", 0) == 0) {
      try {
        irqs.push_back(std::stoi(first));
      } catch (const std::exception &) {
      }
    }
  }
  std::sort(irqs.begin(), irqs.end());
  irqs.erase(std::unique(irqs.begin(), irqs.end()), irqs.end());
  return irqs;
}

std::optional<InterfaceInfo> lookup_interface(const std::string &name) {
  if (name.empty() || name.size() >= IF_NAMESIZE)
    return std::nullopt;
  unsigned idx = if_nametoindex(name.c_str());
  if (idx == 0)
    return std::nullopt;
  InterfaceInfo info;
  info.name = name;
  info.ifindex = idx;
  info.irqs = interface_irqs(name);
  std::error_code ec;
  fs::path drv = fs::read_symlink(fs::path("/sys/class/net") / name / "device" / "driver", ec);
  if (!ec)
    info.driver = drv.filename().string();
  return info;
}

uint32_t current_netns_inode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0)
    return 0;
  return static_cast<uint32_t>(st.st_ino);
}

}  // namespace netlatd
