#include "netlatd/watch.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/options.hpp"

namespace netlatd {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool is_bond(const fs::path &root, const std::string &ifname) {
  const std::string uevent = read_text(root / "sys/class/net" / ifname / "uevent");
  return uevent.find("DEVTYPE=bond\n") != std::string::npos;
}

std::optional<uint16_t> vlan_of(const fs::path &root, const std::string &ifname) {
  std::error_code ec;
  const fs::path p = root / "proc/net/vlan" / ifname;
  if (!fs::exists(p, ec))
    return std::nullopt;
  return parse_vlan_id(read_text(p));
}

// The names behind the lower_* links of a device, sorted.
std::vector<std::string> lower_links(const fs::path &root, const std::string &ifname) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(root / "sys/class/net" / ifname, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("lower_", 0) == 0 && n.size() > 6)
      names.push_back(n.substr(6));
  }
  std::sort(names.begin(), names.end());
  return names;
}

void walk_lowers(const fs::path &root, const std::string &ifname, uint16_t vlan, int depth,
                 std::vector<LowerDevice> &out, std::string &problem) {
  // Stacks deeper than this do not exist in practice; a loop must not hang us.
  if (depth > 8) {
    problem = "devices below " + ifname + " are stacked more than 8 deep";
    return;
  }
  const auto own_vlan = vlan_of(root, ifname);
  if (own_vlan && vlan) {
    problem = ifname + " is a VLAN inside a VLAN (802.1ad); netlatd matches one tag";
    return;
  }
  if (!own_vlan && !is_bond(root, ifname))
    return;
  const uint16_t tag = own_vlan ? *own_vlan : vlan;
  for (const std::string &lower : lower_links(root, ifname)) {
    out.push_back({lower, tag});
    walk_lowers(root, lower, tag, depth + 1, out, problem);
  }
}

std::vector<std::string> all_interface_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator("/sys/class/net", ec))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::optional<uint16_t> parse_vlan_id(std::string_view text) {
  const auto at = text.find("VID:");
  if (at == std::string_view::npos)
    return std::nullopt;
  size_t i = at + 4;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
    ++i;
  unsigned v = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 5; ++i, ++digits)
    v = v * 10 + static_cast<unsigned>(text[i] - '0');
  if (digits == 0 || v == 0 || v > 4094)
    return std::nullopt;
  return static_cast<uint16_t>(v);
}

std::vector<LowerDevice> lower_devices(const fs::path &root, const std::string &ifname, std::string &problem) {
  std::vector<LowerDevice> out;
  problem.clear();
  walk_lowers(root, ifname, 0, 0, out, problem);
  if (!problem.empty())
    out.clear();  // a partial set would count some of the interface's packets
  return out;
}

std::vector<TracedInterface> look_up_interfaces(const std::vector<std::string> &ifaces,
                                                const std::vector<int> &irq_override,
                                                std::map<std::string, uint32_t> &ids,
                                                std::vector<std::string> &left_out, int netns_fd) {
  const bool set_mode = ifaces.size() == 1 && is_iface_set_word(ifaces[0]);
  std::vector<TracedInterface> out;
  std::vector<std::pair<uint32_t, std::string>> there;  // another namespace's interfaces
  std::string interrupts;
  if (netns_fd >= 0) {
    there = interface_names(netns_fd);
    if (!irq_override.empty())
      interrupts = read_text("/proc/interrupts");
  }
  std::vector<std::string> names = set_mode ? all_interface_names() : ifaces;
  if (netns_fd >= 0 && set_mode) {
    names.clear();
    for (const auto &[index, name] : there)
      names.push_back(name);
    std::sort(names.begin(), names.end());
  }
  for (const std::string &name : names) {
    TracedInterface t;
    t.name = name;
    if (netns_fd < 0) {
      t.info = lookup_interface(name, irq_override);
    } else {
      for (const auto &[index, n] : there)
        if (n == name) {
          t.info = InterfaceInfo{};
          t.info->name = name;
          t.info->ifindex = index;
          t.info->irq_lines = irq_lines_given(irq_override, interrupts);
          t.info->irqs = counted_irqs(t.info->irq_lines);
        }
    }
    if (set_mode && (!t.info || (ifaces[0] == "irq" && t.info->irqs.empty())))
      continue;
    if (auto id = ids.find(name); id != ids.end()) {
      t.id = id->second;
    } else if (ids.size() < kMaxIfaces) {
      t.id = static_cast<uint32_t>(ids.size() + 1);
      ids.emplace(name, t.id);
    } else {
      left_out.push_back(name);
      continue;
    }
    if (t.info && netns_fd < 0) {
      for (const LowerDevice &d : lower_devices("/", name, t.problem)) {
        // A device below reports its own IRQ lines: a bond's are its slaves'.
        if (auto info = lookup_interface(d.name))
          t.lowers.push_back({d, *info});
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

TraceTarget trace_target(const std::vector<TracedInterface> &traced, uint32_t netns_inode) {
  TraceTarget target;
  target.netns_inode = netns_inode;
  // By device and tag: the entry below another interface wins over the
  // device's own (see the header).
  std::map<std::pair<uint32_t, uint16_t>, WatchedDevice> devices;
  std::set<int> irqs;
  for (const TracedInterface &t : traced) {
    if (!t.info)
      continue;
    devices.try_emplace({t.info->ifindex, 0}, WatchedDevice{t.info->ifindex, 0, t.id, !t.lowers.empty()});
    irqs.insert(t.info->irqs.begin(), t.info->irqs.end());
  }
  for (const TracedInterface &t : traced) {
    if (!t.info)
      continue;
    for (const auto &l : t.lowers) {
      devices[{l.info.ifindex, l.device.vlan}] = WatchedDevice{l.info.ifindex, l.device.vlan, t.id, false};
      irqs.insert(l.info.irqs.begin(), l.info.irqs.end());
    }
  }
  for (const auto &[key, d] : devices)
    target.devices.push_back(d);
  target.irqs.assign(irqs.begin(), irqs.end());
  return target;
}

std::vector<InterfaceChange> interface_changes(const std::vector<TracedInterface> &before,
                                               const std::vector<TracedInterface> &after, bool set_mode) {
  std::vector<InterfaceChange> changes;
  std::map<std::string, const TracedInterface *> was;
  for (const TracedInterface &t : before)
    was[t.name] = &t;
  auto lowers_text = [](const TracedInterface &t) {
    std::vector<std::string> names;
    for (const auto &l : t.lowers)
      names.push_back(l.device.vlan ? fmt::format("{} (VLAN {})", l.device.name, l.device.vlan) : l.device.name);
    return fmt::format("{}", fmt::join(names, ", "));
  };
  for (const TracedInterface &t : after) {
    const auto it = was.find(t.name);
    const TracedInterface *old = it == was.end() ? nullptr : it->second;
    if (old)
      was.erase(it);
    const bool had = old && old->info;
    if (!t.info) {
      if (had)
        changes.push_back({true, fmt::format("interface {} disappeared; waiting for it to come back", t.name)});
      continue;
    }
    if (!old && set_mode)
      changes.push_back({false, fmt::format("interface {} appeared (ifindex {}); tracing it", t.name, t.info->ifindex)});
    else if (!had || old->info->ifindex != t.info->ifindex)
      changes.push_back({true, fmt::format("interface {} is back (ifindex {}); tracing resumes", t.name, t.info->ifindex)});
    const std::string now_below = lowers_text(t);
    if (!now_below.empty() && (!had || now_below != lowers_text(*old)))
      changes.push_back({false, fmt::format("interface {}: its packets arrive first on {}", t.name, now_below)});
    else if (now_below.empty() && had && !old->lowers.empty())
      changes.push_back({true, fmt::format("interface {}: no device below it any more", t.name)});
    if (!t.problem.empty() && (!old || old->problem != t.problem))
      changes.push_back({true, fmt::format("interface {}: {}; only packets arriving on it are traced", t.name, t.problem)});
  }
  // Gone from the set (`all`, `irq`): no longer there, or no IRQ lines now.
  for (const auto &[name, old] : was)
    if (old->info)
      changes.push_back({true, fmt::format("interface {} disappeared; {}", name,
                                           set_mode ? "no longer traced" : "no longer named by --iface")});
  return changes;
}

void remember_names(IfaceNames &names, const std::vector<TracedInterface> &traced) {
  for (const TracedInterface &t : traced)
    names[t.id] = t.name;
}

}  // namespace netlatd
