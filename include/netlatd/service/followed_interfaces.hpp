#pragma once
// The traced interfaces as the daemon follows them: the follower's look-ups
// (rtnetlink events, the 1 s check, a reload), what the loaded programs
// filter on, and the interface fields of the report header.
#include <functional>
#include <string>
#include <vector>

#include "netlatd/kernel/hooks.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/net/follow.hpp"

namespace netlatd {

class FollowedInterfaces {
public:
  // `plan` names each stage's hooks in the header; it outlives this.
  FollowedInterfaces(InterfaceFollower follower, const HookPlan &plan);

  // Called with the new target whenever the kernel filter's target changes
  // (from when the programs are loaded on).
  void on_retarget(std::function<void(const TraceTarget &)> retarget) { retarget_ = std::move(retarget); }

  // The header's interface fields from the last look-up (`ifaces`: --iface);
  // the kernel filter retargeted when its target changed.
  void update(ReportHeader &h, const std::vector<std::string> &ifaces);

  // Each looks the interfaces up when it has cause to and then updates `h`;
  // true when it did.
  bool on_link_events(ReportHeader &h, const std::vector<std::string> &ifaces, const std::vector<int> &irqs);
  bool check(ReportHeader &h, const std::vector<std::string> &ifaces, const std::vector<int> &irqs);
  // A reload with other interfaces or IRQ lines: always looked up.
  void refresh(ReportHeader &h, const std::vector<std::string> &ifaces, const std::vector<int> &irqs);

  const TraceTarget &target() const { return target_; }
  size_t present() const { return follower_.present(); }
  int link_fd() const { return follower_.link_fd(); }
  void watch_links() { follower_.watch_links(); }
  void log_start() const { follower_.log_start(); }

private:
  InterfaceFollower follower_;
  const HookPlan &plan_;
  TraceTarget target_;  // what the loaded programs filter on
  std::function<void(const TraceTarget &)> retarget_;
};

}  // namespace netlatd
