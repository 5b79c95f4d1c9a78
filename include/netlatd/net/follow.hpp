#pragma once
// The traced interfaces followed while the daemon runs: deleted, re-created
// with another ifindex and other IRQ lines, renamed, a bond gaining or losing
// slaves, and with `all` or `irq` interfaces joining and leaving the set.
// rtnetlink link events say when to look again; a 1 s comparison of the
// namespace's interface list catches what they miss.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "netlatd/net/interface.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/net/watch.hpp"

namespace netlatd {

class InterfaceFollower {
public:
  // `traced`: as looked up at start (logged by log_start); `ids`: each name's
  // number in the records, kept for the daemon's life; `netns_fd`: --netns
  // (-1: the daemon's own namespace), owned by the caller.
  InterfaceFollower(std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids, int netns_fd);

  // The start's log lines: IRQ lines, the devices below each, problems.
  void log_start() const;
  // Opens the rtnetlink socket (warned, not fatal, when it cannot be).
  void watch_links();
  int link_fd() const { return links_ ? links_->fd() : -1; }

  // Every traced interface looked up again; what changed is logged. True
  // when the kernel filter's target changed.
  bool refresh(const std::vector<std::string> &ifaces, const std::vector<int> &irqs);
  // Link events are waiting on link_fd(): read them; any (or a lost one)
  // refreshes. True when a refresh ran.
  bool on_link_events(const std::vector<std::string> &ifaces, const std::vector<int> &irqs);
  // The 1 s fallback: a refresh only when the interface list changed. True
  // when a refresh ran.
  bool check(const std::vector<std::string> &ifaces, const std::vector<int> &irqs);

  const std::vector<TracedInterface> &traced() const { return traced_; }
  const TraceTarget &target() const { return target_; }
  size_t present() const;  // traced interfaces that exist now

private:
  bool use(std::vector<TracedInterface> traced, const std::vector<std::string> &ifaces, bool log_changes);

  std::vector<TracedInterface> traced_;
  TraceTarget target_;
  std::map<std::string, uint32_t> ids_;
  std::set<std::string> warned_left_out_;
  std::vector<std::pair<uint32_t, std::string>> seen_links_;  // the 1 s fallback's view (if_nameindex)
  int netns_fd_ = -1;
  uint32_t netns_inode_ = 0;
  std::unique_ptr<LinkMonitor> links_;
};

}  // namespace netlatd
