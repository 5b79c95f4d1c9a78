#pragma once
// The daemon's one event loop: epoll over the descriptors it watches, timers
// on CLOCK_MONOTONIC, and a drain that runs after every wait. Each pass:
// wait (not at all when the last drain left work, else until the earliest
// timer, at most max_wait), drain, the callbacks of the ready descriptors in
// the order they were watched, then the timers that are due in the order
// they were added. stop() ends the pass where it is and run() returns.
#include <cstdint>
#include <functional>
#include <vector>

#include "netlatd/base/clock.hpp"
#include "netlatd/base/fd.hpp"

namespace netlatd {

class EventLoop {
public:
  using TimerId = size_t;
  static constexpr int64_t kNever = INT64_MAX;

  // `max_wait_ns`: the longest a wait lasts, so that the drain runs at least
  // that often. Throws Error(Software) when epoll cannot be made.
  explicit EventLoop(int64_t max_wait_ns);

  // Calls on_ready when fd is readable (level-triggered: what it leaves
  // unread wakes the next pass too). Throws Error(Software).
  void watch(int fd, std::function<void()> on_ready);
  // Runs after every wait; returns true when it stopped on a budget with
  // more waiting, so the next wait does not block.
  void drain(std::function<bool()> fn) { drain_ = std::move(fn); }

  // A timer due at `due_ns` (kNever: not armed). It is disarmed as it fires:
  // `fn(now)` arms it again with set_due, or not.
  TimerId at(int64_t due_ns, std::function<void(int64_t now)> fn);
  // A timer every `period_ns` from `first_ns`, the next one `period_ns`
  // after the pass it fired in.
  TimerId every(int64_t period_ns, int64_t first_ns, std::function<void()> fn);
  void set_due(TimerId id, int64_t due_ns) { timers_[id].due = due_ns; }
  int64_t due(TimerId id) const { return timers_[id].due; }

  // Returns after stop(). Throws Error(Software) when epoll_wait fails.
  void run();
  void stop() { stopping_ = true; }

private:
  struct Watched {
    int fd;
    std::function<void()> on_ready;
  };
  struct Timer {
    int64_t due;
    std::function<void(int64_t now)> fn;
  };

  Fd epoll_;
  int64_t max_wait_ns_;
  std::vector<Watched> watched_;
  std::vector<Timer> timers_;
  std::function<bool()> drain_;
  bool stopping_ = false;
};

}  // namespace netlatd
