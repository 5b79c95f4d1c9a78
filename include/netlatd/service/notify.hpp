#pragma once
// The daemon's side of systemd's notification protocol (sd_notify(3)), used by
// systemd/netlatd.service (Type=notify, WatchdogSec=). Every call is a no-op
// returning false when NOTIFY_SOCKET is unset, so the daemon calls them
// unconditionally whether or not systemd started it.
//
// No call blocks the daemon: sd_notify() itself does once the socket holds
// net.unix.max_dgram_qlen + 1 (11) unread datagrams, and a STATUS= an interval
// would then hang the loop, SIGTERM included, for as long as the manager
// does not read. A STATUS= or WATCHDOG=1 that finds the socket full is
// dropped (counted, logged at most once a minute); READY=1, RELOADING=1 and
// STOPPING=1 wait for room at most `wait_for_room`, then are dropped too.
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstdint>
#include <string_view>

namespace netlatd {

class Notifier {
public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID once. The environment
  // is left as is: children of the daemon do not exist, and tests need it.
  // NOTIFY_SOCKET is a path or an abstract name ("@..."); anything else
  // (vsock:) is logged and nothing is sent.
  explicit Notifier(std::chrono::milliseconds wait_for_room = std::chrono::seconds(1));

  bool enabled() const noexcept { return enabled_; }

  // READY=1: send after every BPF program is attached and the output is open,
  // and again after a SIGHUP reload has finished.
  bool ready() const;
  // STATUS=...: one line shown by `systemctl status`. Newlines become spaces
  // because a newline would start another assignment in the datagram.
  bool status(std::string_view text) const;
  // WATCHDOG=1, only when systemd asked for it for this very process
  // (WATCHDOG_PID matches); call it at least every watchdog_interval() / 2.
  bool watchdog() const;
  // STOPPING=1: at the start of shutdown (SIGTERM/SIGINT), before the final flush.
  bool stopping() const;
  // RELOADING=1 with MONOTONIC_USEC=now: at the start of a SIGHUP reload. systemd
  // >= 253 requires MONOTONIC_USEC to match the reload to its request (Type=notify-reload);
  // older versions ignore the unknown field, so it is always sent.
  bool reloading() const;

  // WATCHDOG_USEC when the watchdog is enabled for this process, else 0.
  std::chrono::microseconds watchdog_interval() const noexcept { return watchdog_; }
  // Messages not sent because the socket was full, since construction.
  uint64_t dropped() const noexcept { return dropped_; }

private:
  // Sends `message`, waiting up to `wait` for room when the socket is full.
  bool send(std::string_view message, std::chrono::milliseconds wait) const;
  void count_drop(std::string_view message) const;

  bool enabled_ = false;
  std::chrono::microseconds watchdog_{0};
  std::chrono::milliseconds wait_for_room_;
  sockaddr_un addr_{};
  socklen_t addr_len_ = 0;  // 0: NOTIFY_SOCKET unset or not a unix socket
  // The loop's thread alone sends: plain counters.
  mutable uint64_t dropped_ = 0;
  mutable uint64_t last_drop_log_ns_ = 0;
};

}  // namespace netlatd
