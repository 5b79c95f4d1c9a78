#include "netlatd/net/follow.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>


namespace netlatd {

InterfaceFollower::InterfaceFollower(std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids,
                                     int netns_fd)
    : ids_(std::move(ids)), netns_fd_(netns_fd), netns_inode_(netns_inode(netns_fd)) {
  use(std::move(traced), {}, false);
}

void InterfaceFollower::log_start() const {
  for (const TracedInterface &t : traced_) {
    if (t.info)
      log_irq_lines(*t.info);
    for (const auto &l : t.lowers) {
      spdlog::info("{}: its packets arrive first on {} (ifindex {}{})", t.name, l.device.name, l.info.ifindex,
                   l.device.vlan ? fmt::format(", VLAN {}", l.device.vlan) : "");
      log_irq_lines(l.info);
    }
    if (!t.problem.empty())
      spdlog::warn("interface {}: {}; only packets arriving on it are traced", t.name, t.problem);
  }
}

void InterfaceFollower::watch_links() {
  try {
    links_ = std::make_unique<LinkMonitor>(netns_fd_);
  } catch (const std::system_error &e) {
    spdlog::warn("cannot watch link changes ({}); the interface is looked up once a second instead", e.what());
  }
}

size_t InterfaceFollower::present() const {
  return static_cast<size_t>(std::count_if(traced_.begin(), traced_.end(), [](const auto &t) { return t.info.has_value(); }));
}

bool InterfaceFollower::refresh(const std::vector<std::string> &ifaces, const std::vector<int> &irqs) {
  std::vector<std::string> left_out;
  auto next = look_up_interfaces(ifaces, irqs, ids_, left_out, netns_fd_);
  for (const std::string &name : left_out)
    if (warned_left_out_.insert(name).second)
      spdlog::warn("interface {} is not traced: netlatd traces at most {} interfaces in a run", name, kMaxIfaces);
  return use(std::move(next), ifaces, true);
}

bool InterfaceFollower::use(std::vector<TracedInterface> traced, const std::vector<std::string> &ifaces,
                            bool log_changes) {
  const bool set_mode = ifaces.size() == 1 && is_iface_set_word(ifaces[0]);
  if (log_changes) {
    for (const InterfaceChange &c : interface_changes(traced_, traced, set_mode)) {
      if (c.warning)
        spdlog::warn("{}", c.text);
      else
        spdlog::info("{}", c.text);
    }
    // A device that came back may have other IRQ lines.
    for (const TracedInterface &t : traced) {
      auto was = std::find_if(traced_.begin(), traced_.end(), [&](const auto &o) { return o.name == t.name; });
      if (t.info && (was == traced_.end() || !was->info || was->info->ifindex != t.info->ifindex))
        log_irq_lines(*t.info);
    }
  }
  traced_ = std::move(traced);
  TraceTarget next = trace_target(traced_, netns_inode_);
  const bool changed = next.devices != target_.devices || next.irqs != target_.irqs;
  target_ = std::move(next);
  return changed;
}

bool InterfaceFollower::check(const std::vector<std::string> &ifaces, const std::vector<int> &irqs) {
  // One call gives every name and index: only when they changed is every
  // interface looked up again (sysfs, /proc/interrupts).
  std::vector<std::pair<uint32_t, std::string>> links;
  try {
    links = interface_names(netns_fd_);
  } catch (const std::system_error &e) {
    spdlog::warn("cannot list the interfaces: {}", e.what());
    return false;
  }
  if (links == seen_links_)
    return false;
  seen_links_ = std::move(links);
  refresh(ifaces, irqs);
  return true;
}

// The events say that something happened to a link; what is there now is
// looked up by name. A busy drain loop reads them late, after the 1 s
// lookup may have found the new interface: acting on each in turn would
// retarget to an ifindex already deleted (its last RTM_NEWLINK, as it went
// down) before its RTM_DELLINK is read.
bool InterfaceFollower::on_link_events(const std::vector<std::string> &ifaces, const std::vector<int> &irqs) {
  if (!links_)
    return false;
  bool lost = false;
  const auto events = links_->read_events(lost);
  if (lost)
    spdlog::debug("rtnetlink notifications were lost; looking the interfaces up again");
  // Any link change may concern a traced interface or a device below one
  // (a bond's slave added, a VLAN's real device renamed): look all up.
  if (events.empty() && !lost)
    return false;
  refresh(ifaces, irqs);
  return true;
}

}  // namespace netlatd
