#include "netlatd/net/watch.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/base/fd.hpp"

namespace netlatd {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const LinkEvent *link_named(const std::vector<LinkEvent> &links, const std::string &name) {
  for (const LinkEvent &l : links)
    if (l.name == name)
      return &l;
  return nullptr;
}

// A VLAN's id, for a link the 8021q module made with one (1-4094).
std::optional<uint16_t> vlan_of(const LinkEvent &l) {
  if (l.type != "vlan" || l.vlan_id == 0 || l.vlan_id > 4094)
    return std::nullopt;
  return l.vlan_id;
}

// The devices right below a bond or VLAN, sorted by name: a bond's slaves
// (their IFLA_MASTER), a VLAN's real device (its IFLA_LINK).
std::vector<std::string> lower_names(const std::vector<LinkEvent> &links, const LinkEvent &upper) {
  std::vector<std::string> names;
  if (upper.type == "vlan") {
    for (const LinkEvent &l : links)
      if (upper.link != 0 && l.ifindex == upper.link)
        names.push_back(l.name);
  } else {
    for (const LinkEvent &l : links)
      if (l.master == upper.ifindex)
        names.push_back(l.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void walk_lowers(const std::vector<LinkEvent> &links, const std::string &ifname, uint16_t vlan, int depth,
                 std::vector<LowerDevice> &out, std::string &problem) {
  // Stacks deeper than this do not exist in practice; a loop must not hang us.
  if (depth > 8) {
    problem = "devices below " + ifname + " are stacked more than 8 deep";
    return;
  }
  const LinkEvent *self = link_named(links, ifname);
  if (!self)
    return;
  const auto own_vlan = vlan_of(*self);
  if (own_vlan && vlan) {
    problem = ifname + " is a VLAN inside a VLAN (802.1ad); netlatd matches one tag";
    return;
  }
  if (!own_vlan && self->type != "bond")
    return;
  if (own_vlan && self->link_netnsid) {
    // Its ifindex is another namespace's: which device, and that
    // namespace's inode for the filter, are not known here.
    problem = fmt::format("the real device of VLAN {} is in another network namespace (netnsid {})", ifname,
                          *self->link_netnsid);
    return;
  }
  const uint16_t tag = own_vlan ? *own_vlan : vlan;
  for (const std::string &lower : lower_names(links, *self)) {
    out.push_back({lower, tag});
    walk_lowers(links, lower, tag, depth + 1, out, problem);
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

std::vector<LowerDevice> lower_devices(const std::vector<LinkEvent> &links, const std::string &ifname,
                                       std::string &problem) {
  std::vector<LowerDevice> out;
  problem.clear();
  walk_lowers(links, ifname, 0, 0, out, problem);
  if (!problem.empty())
    out.clear();  // a partial set would count some of the interface's packets
  return out;
}

namespace {

// An interface of another namespace as its link dump and ethtool show it:
// this process's sysfs has no entry for it, the bus device's entry is there.
InterfaceInfo interface_there(const LinkEvent &link, int ethtool_fd, const std::vector<int> &irq_override,
                              const std::string &interrupts) {
  InterfaceInfo info;
  info.name = link.name;
  info.ifindex = link.ifindex;
  const auto driver = ethtool_fd >= 0 ? driver_info(ethtool_fd, link.name) : std::nullopt;
  if (driver)
    info.driver = driver->driver;
  info.irq_lines = !irq_override.empty() ? irq_lines_given(irq_override, interrupts)
                   : driver             ? find_irq_lines_by_bus("/", link.name, *driver, interrupts)
                                        : std::vector<IrqLine>{};
  info.irqs = counted_irqs(info.irq_lines);
  return info;
}

}  // namespace

namespace {

// What look_up_interfaces knows of the namespace: the links with what they
// sit on, for the devices below a bond or VLAN; in another namespace also
// their names and indexes, and its drivers through an ethtool socket there.
class LinkView {
public:
  explicit LinkView(int netns_fd) : elsewhere_(netns_fd >= 0) {
    // In another namespace a failure is the caller's to report; here only
    // the devices below go unknown.
    if (elsewhere_) {
      links_ = dump_links(netns_fd);
    } else {
      try {
        links_ = dump_links();
      } catch (const std::system_error &e) {
        no_links_ = fmt::format("the devices below it cannot be looked up ({})", e.what());
      }
    }
    if (elsewhere_) {
      interrupts_ = read_text("/proc/interrupts");
      try {
        ethtool_.emplace(ethtool_socket(netns_fd));
      } catch (const std::system_error &) {
        // No socket there: no driver to ask, so no IRQ lines but --irq's.
      }
    }
  }

  std::optional<InterfaceInfo> info_of(const std::string &name, const std::vector<int> &irqs) const {
    if (!elsewhere_)
      return lookup_interface(name, irqs);
    const LinkEvent *l = link_named(links_, name);
    if (!l)
      return std::nullopt;
    return interface_there(*l, ethtool_ ? ethtool_->get() : -1, irqs, interrupts_);
  }

  // --iface's names, or for a set (all, irq) every interface there is.
  std::vector<std::string> names(const std::vector<std::string> &ifaces, bool set_mode) const {
    if (!set_mode)
      return ifaces;
    if (!elsewhere_)
      return all_interface_names();
    std::vector<std::string> names;
    for (const LinkEvent &l : links_)
      names.push_back(l.name);
    std::sort(names.begin(), names.end());
    return names;
  }

  // The devices below a traced interface that is there.
  void add_lowers(TracedInterface &t) const {
    if (!no_links_.empty()) {
      t.problem = no_links_;
      return;
    }
    for (const LowerDevice &d : lower_devices(links_, t.name, t.problem)) {
      // A device below reports its own IRQ lines: a bond's are its slaves'
      // (--irq names the traced interface's only).
      const auto info = info_of(d.name, {});
      if (info)
        t.lowers.push_back({d, *info});
    }
  }

private:
  bool elsewhere_;
  std::vector<LinkEvent> links_;
  std::string no_links_;
  std::string interrupts_;
  std::optional<Fd> ethtool_;
};

// The name's number in the records: kept for the daemon's life, a new one
// while fewer than kMaxIfaces were given. False when none is left.
bool number_of(const std::string &name, std::map<std::string, uint32_t> &ids, uint32_t &id) {
  if (auto known = ids.find(name); known != ids.end()) {
    id = known->second;
    return true;
  }
  if (ids.size() >= kMaxIfaces)
    return false;
  id = static_cast<uint32_t>(ids.size() + 1);
  ids.emplace(name, id);
  return true;
}

}  // namespace

std::vector<TracedInterface> look_up_interfaces(const std::vector<std::string> &ifaces,
                                                const std::vector<int> &irq_override,
                                                std::map<std::string, uint32_t> &ids,
                                                std::vector<std::string> &left_out, int netns_fd) {
  const bool set_mode = ifaces.size() == 1 && is_iface_set_word(ifaces[0]);
  const LinkView view(netns_fd);
  std::vector<TracedInterface> out;
  for (const std::string &name : view.names(ifaces, set_mode)) {
    TracedInterface t;
    t.name = name;
    t.info = view.info_of(name, irq_override);
    if (set_mode && (!t.info || (ifaces[0] == "irq" && t.info->irqs.empty())))
      continue;
    if (!number_of(name, ids, t.id)) {
      left_out.push_back(name);
      continue;
    }
    if (t.info)
      view.add_lowers(t);
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
    devices.try_emplace({t.info->ifindex, 0}, WatchedDevice{t.info->ifindex, 0, t.id, !t.lowers.empty(), !t.info->irqs.empty()});
    irqs.insert(t.info->irqs.begin(), t.info->irqs.end());
  }
  for (const TracedInterface &t : traced) {
    if (!t.info)
      continue;
    for (const auto &l : t.lowers) {
      devices[{l.info.ifindex, l.device.vlan}] = WatchedDevice{l.info.ifindex, l.device.vlan, t.id, false, !l.info.irqs.empty()};
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
