#include "netlatd/service/loop.hpp"

#include <sys/epoll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "netlatd/base/clock.hpp"
#include "netlatd/base/errors.hpp"

namespace netlatd {

EventLoop::EventLoop(int64_t max_wait_ns) : epoll_(epoll_create1(EPOLL_CLOEXEC)), max_wait_ns_(max_wait_ns) {
  if (epoll_.get() < 0)
    throw Error(ExitCode::Software, std::string("epoll_create1: ") + std::strerror(errno));
}

void EventLoop::watch(int fd, std::function<void()> on_ready) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    throw Error(ExitCode::Software, std::string("epoll_ctl: ") + std::strerror(errno));
  watched_.push_back({fd, std::move(on_ready)});
}

EventLoop::TimerId EventLoop::at(int64_t due_ns, std::function<void(int64_t now)> fn) {
  timers_.push_back({due_ns, std::move(fn)});
  return timers_.size() - 1;
}

EventLoop::TimerId EventLoop::every(int64_t period_ns, int64_t first_ns, std::function<void()> fn) {
  const TimerId id = timers_.size();
  return at(first_ns, [this, id, period_ns, fn = std::move(fn)](int64_t now) {
    fn();
    set_due(id, now + period_ns);
  });
}

void EventLoop::run() {
  bool behind = false;
  stopping_ = false;
  while (!stopping_) {
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    int64_t wake = now + max_wait_ns_;
    for (const Timer &t : timers_)
      wake = std::min(wake, t.due);
    const int timeout_ms = behind ? 0 : static_cast<int>(std::max<int64_t>(0, (wake - now + 999999) / 1000000));
    epoll_event events[8];
    const int n = epoll_wait(epoll_.get(), events, 8, timeout_ms);
    if (n < 0 && errno != EINTR)
      throw Error(ExitCode::Software, std::string("epoll_wait: ") + std::strerror(errno));
    behind = drain_ && drain_();
    for (const Watched &w : watched_) {
      if (stopping_)
        break;
      const bool ready = std::any_of(events, events + std::max(n, 0), [&](const epoll_event &e) { return e.data.fd == w.fd; });
      if (ready && w.on_ready)
        w.on_ready();
    }
    now = clock_ns(CLOCK_MONOTONIC);
    for (Timer &t : timers_) {
      if (stopping_)
        break;
      if (now >= t.due) {
        t.due = kNever;
        t.fn(now);
      }
    }
  }
}

}  // namespace netlatd
