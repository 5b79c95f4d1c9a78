#include "netlatd/service/followed_interfaces.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/net/interface.hpp"
#include "netlatd/net/watch.hpp"

namespace netlatd {

FollowedInterfaces::FollowedInterfaces(InterfaceFollower follower, const HookPlan &plan)
    : follower_(std::move(follower)), plan_(plan) {}

void FollowedInterfaces::update(ReportHeader &h, const std::vector<std::string> &ifaces) {
  const TraceTarget &next = follower_.target();
  if (retarget_ && (next.devices != target_.devices || next.irqs != target_.irqs))
    retarget_(next);
  target_ = next;
  const auto &traced = follower_.traced();
  h.iface = fmt::format("{}", fmt::join(ifaces, ","));
  h.ifindex = !traces_several_ifaces(ifaces) && !traced.empty() && traced[0].info
                  ? static_cast<int>(traced[0].info->ifindex)
                  : 0;
  remember_names(h.iface_names, traced);
  fill_stage_hooks(h, plan_, target_.irqs.size());
}

bool FollowedInterfaces::on_link_events(ReportHeader &h, const std::vector<std::string> &ifaces,
                                        const std::vector<int> &irqs) {
  if (!follower_.on_link_events(ifaces, irqs))
    return false;
  update(h, ifaces);
  return true;
}

bool FollowedInterfaces::check(ReportHeader &h, const std::vector<std::string> &ifaces, const std::vector<int> &irqs) {
  if (!follower_.check(ifaces, irqs))
    return false;
  update(h, ifaces);
  return true;
}

void FollowedInterfaces::refresh(ReportHeader &h, const std::vector<std::string> &ifaces,
                                 const std::vector<int> &irqs) {
  follower_.refresh(ifaces, irqs);
  update(h, ifaces);
}

}  // namespace netlatd
