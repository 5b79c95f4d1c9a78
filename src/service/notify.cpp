#include "netlatd/service/notify.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "netlatd/base/clock.hpp"

namespace netlatd {

namespace {

// A full socket is said on the first drop, then at most this often.
constexpr uint64_t kDropLogEveryNs = 60'000'000'000ull;

enum class Sent { yes, full, failed };

// NOTIFY_SOCKET as sd_notify(3) reads it: an absolute path, or an abstract
// name written with '@' for its leading NUL. 0 for anything else.
socklen_t unix_address(std::string_view socket, sockaddr_un &addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (socket.size() < 2 || (socket[0] != '/' && socket[0] != '@') || socket.size() >= sizeof(addr.sun_path))
    return 0;
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  const bool abstract = socket[0] == '@';
  if (abstract)
    addr.sun_path[0] = '\0';
  // A path's length counts its NUL, an abstract name's does not.
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket.size() + (abstract ? 0 : 1));
}

// One datagram on a connected non-blocking socket. A full receiver queue
// makes send() fail with EAGAIN; poll() says when the receiver has read one
// (a connected unix datagram socket is writable only while its peer's queue
// has room), so the wait ends as soon as there is room, or at `wait`.
Sent send_connected(int fd, std::string_view message, std::chrono::milliseconds wait) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(wait.count()) * 1'000'000u;
  for (;;) {
    const ssize_t n = ::send(fd, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0)
      return static_cast<size_t>(n) == message.size() ? Sent::yes : Sent::failed;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Sent::failed;
    const uint64_t now = monotonic_ns();
    if (now >= deadline)
      return Sent::full;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>((deadline - now + 999'999u) / 1'000'000u));
  }
}

// A socket of its own for each message, as sd_notify() opens one: a
// manager that re-executes binds the path anew.
Sent send_datagram(const sockaddr_un &addr, socklen_t len, std::string_view message,
                   std::chrono::milliseconds wait) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return Sent::failed;
  Sent sent = Sent::failed;
  if (::connect(fd, reinterpret_cast<const sockaddr *>(&addr), len) == 0)
    sent = send_connected(fd, message, wait);
  ::close(fd);
  return sent;
}

}  // namespace

Notifier::Notifier(std::chrono::milliseconds wait_for_room) : wait_for_room_(wait_for_room) {
  const char *socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  if (!enabled_)
    return;
  addr_len_ = unix_address(socket, addr_);
  if (addr_len_ == 0)
    spdlog::warn("NOTIFY_SOCKET={} is neither an absolute path nor an abstract socket (@name): "
                 "nothing is sent to the service manager",
                 socket);
  uint64_t usec = 0;
  // sd_watchdog_enabled() checks WATCHDOG_PID against getpid(): a watchdog meant
  // for a wrapper script must not be fed by us.
  if (sd_watchdog_enabled(0, &usec) > 0)
    watchdog_ = std::chrono::microseconds(usec);
}

bool Notifier::send(std::string_view message, std::chrono::milliseconds wait) const {
  if (addr_len_ == 0)
    return false;
  const Sent sent = send_datagram(addr_, addr_len_, message, wait);
  if (sent == Sent::full)
    count_drop(message);
  return sent == Sent::yes;
}

void Notifier::count_drop(std::string_view message) const {
  ++dropped_;
  const uint64_t now = monotonic_ns();
  if (dropped_ > 1 && now - last_drop_log_ns_ < kDropLogEveryNs)
    return;
  last_drop_log_ns_ = now;
  spdlog::warn("the service manager's notify socket is full, nobody reads it: {} was not sent "
               "({} dropped so far; said at most once a minute)",
               message.substr(0, message.find('=')), dropped_);
}

bool Notifier::ready() const { return send("READY=1", wait_for_room_); }

bool Notifier::status(std::string_view text) const {
  std::string message = "STATUS=";
  message.reserve(message.size() + text.size());
  for (char c : text)
    message.push_back(c == '\n' || c == '\r' ? ' ' : c);
  return send(message, std::chrono::milliseconds(0));
}

bool Notifier::watchdog() const {
  if (watchdog_.count() == 0)
    return false;
  return send("WATCHDOG=1", std::chrono::milliseconds(0));
}

bool Notifier::stopping() const { return send("STOPPING=1", wait_for_room_); }

bool Notifier::reloading() const {
  const uint64_t usec = monotonic_ns() / 1000u;
  return send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec), wait_for_room_);
}

}  // namespace netlatd
