// The metrics endpoint: a small HTTP/1.1 server of GET /metrics on its own
// thread. What it reads (the --metrics-listen address, a request head) is
// http_request.cpp.
#include "netlatd/output/http.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "http_request.hpp"

namespace netlatd {


namespace {

using Clock = std::chrono::steady_clock;

// What one connection may cost. A scrape is a request line and a few headers,
// sent at once; nothing legitimate comes near these.
constexpr auto kRequestTimeout = std::chrono::seconds(1);   // for the whole request head to arrive
constexpr auto kResponseTimeout = std::chrono::seconds(1);  // for the client to take the response
constexpr auto kLingerTimeout = std::chrono::milliseconds(100);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr int kListenBacklog = 64;
// Connections served at once. A new one past this closes the oldest: a
// client that trickles its request (or never sends one) cannot keep a scrape
// that sends its request at once from being answered.
constexpr size_t kMaxConnections = 32;

// One client: its request head coming in, then the response going out, then
// a short wait for the client to close first. Closing with unread bytes would
// reset the connection, and a reset can destroy the response before the
// client reads it.
struct Connection {
  enum class State { Reading, Writing, Lingering };
  int fd = -1;
  State state = State::Reading;
  Clock::time_point accepted, deadline;
  std::string in, out;
  size_t sent = 0;
};

bool would_block(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR); }

// Moves `c` on as far as its socket allows; false when it is done with.
bool progress(Connection &c, const MetricsServer::Render &render) {
  if (c.state == Connection::State::Reading) {
    char buf[1024];
    const ssize_t n = ::recv(c.fd, buf, std::min(sizeof(buf), http::kMaxRequestHead - c.in.size()), 0);
    if (would_block(n))
      return true;
    if (n <= 0)
      return false;  // the client went away
    c.in.append(buf, static_cast<size_t>(n));
    std::string response;
    try {
      response = http::answer(c.in, render);
    } catch (const std::bad_alloc &) {
      return false;  // out of memory building a response: this scrape fails, the daemon goes on
    }
    if (response.empty())
      return true;
    c.out = std::move(response);
    c.in = std::string();
    c.state = Connection::State::Writing;
    c.deadline = Clock::now() + kResponseTimeout;
  }
  if (c.state == Connection::State::Writing) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (would_block(n))
        return true;
      if (n < 0)
        return false;
      c.sent += static_cast<size_t>(n);
    }
    ::shutdown(c.fd, SHUT_WR);
    c.out = std::string();
    c.state = Connection::State::Lingering;
    c.deadline = Clock::now() + kLingerTimeout;
    return true;
  }
  char discard[512];
  for (;;) {
    const ssize_t n = ::recv(c.fd, discard, sizeof(discard), 0);
    if (would_block(n))
      return true;
    if (n <= 0)
      return false;
  }
}

}  // namespace

MetricsServer::MetricsServer(std::string_view listen, Render render)
    : address_(parse_listen_address(listen)), render_(std::move(render)) {
  const std::string shown = shown_address(address_);
  auto fail = [&](int err) {
    stop();
    return MetricsError("cannot listen on " + shown + ": " + std::strerror(err));
  };

  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const bool is_v6 = address_.host.find(':') != std::string::npos;
  if (is_v6) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(address_.port);
    inet_pton(AF_INET6, address_.host.c_str(), &v6.sin6_addr);  // validated by parse_listen_address
  } else {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(address_.port);
    inet_pton(AF_INET, address_.host.c_str(), &v4.sin_addr);
  }
  sockaddr *const sa = is_v6 ? reinterpret_cast<sockaddr *>(&v6) : reinterpret_cast<sockaddr *>(&v4);
  socklen_t sa_len = is_v6 ? sizeof(v6) : sizeof(v4);

  listen_fd_ = ::socket(is_v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0)
    throw fail(errno);
  // SO_REUSEADDR lets a restarted daemon bind while the old one's connections
  // sit in TIME_WAIT. Never SO_REUSEPORT: it would let a second daemon bind the
  // same port and silently get half of the scrapes.
  const int yes = 1, no = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  // [::] takes IPv4 too, whatever net.ipv6.bindv6only says.
  if (is_v6)
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
  if (::bind(listen_fd_, sa, sa_len) != 0 || ::listen(listen_fd_, kListenBacklog) != 0)
    throw fail(errno);
  if (address_.port == 0) {
    if (::getsockname(listen_fd_, sa, &sa_len) != 0)
      throw fail(errno);
    address_.port = ntohs(is_v6 ? v6.sin6_port : v4.sin_port);
  }

  start_thread();
}

MetricsServer::MetricsServer(int listening_fd, Render render) : render_(std::move(render)) {
  listen_fd_ = listening_fd;
  auto fail = [&](const std::string &why) {
    stop();
    return MetricsError("the socket passed by the service manager " + why);
  };
  if (sd_is_socket(listen_fd_, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
    throw fail("is not a listening stream socket");
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  char host[INET6_ADDRSTRLEN] = {};
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &len) != 0)
    throw fail(std::string("cannot be named: ") + std::strerror(errno));
  if (ss.ss_family == AF_INET) {
    const auto *v4 = reinterpret_cast<const sockaddr_in *>(&ss);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    address_ = {host, ntohs(v4->sin_port)};
  } else if (ss.ss_family == AF_INET6) {
    const auto *v6 = reinterpret_cast<const sockaddr_in6 *>(&ss);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    address_ = {host, ntohs(v6->sin6_port)};
  } else {
    throw fail("is not an IPv4 or IPv6 socket");
  }
  // The serve loop polls before it accepts; a client gone in between must
  // not block the accept.
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  ::fcntl(listen_fd_, F_SETFD, FD_CLOEXEC);
  start_thread();
}

void MetricsServer::start_thread() {
  auto fail = [&](int err) {
    stop();
    return MetricsError("cannot start the metrics endpoint on " + shown_address(address_) + ": " +
                        std::strerror(err));
  };
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0)
    throw fail(errno);
  try {
    thread_ = std::thread([this] { serve(); });
  } catch (const std::system_error &e) {
    throw fail(e.code().value());
  }
}

int take_activated_socket() {
  const int n = sd_listen_fds(1);
  if (n <= 0)
    return -1;
  if (n > 1) {
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; ++fd)
      ::close(fd);
    throw MetricsError("the service manager passed " + std::to_string(n) +
                       " sockets; netlatd serves metrics on one (ListenStream= once in netlatd.socket)");
  }
  return SD_LISTEN_FDS_START;
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() {
  if (thread_.joinable()) {
    eventfd_write(stop_fd_, 1);
    thread_.join();
  }
  for (int *fd : {&listen_fd_, &stop_fd_}) {
    if (*fd >= 0)
      ::close(*fd);
    *fd = -1;
  }
}

void MetricsServer::serve() {
  std::vector<Connection> connections;
  connections.reserve(kMaxConnections);
  auto close_at = [&](size_t i) {
    ::close(connections[i].fd);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
  };
  Clock::time_point accept_paused_until{};
  std::vector<pollfd> fds;
  for (;;) {
    auto now = Clock::now();
    auto wake = now + std::chrono::hours(1);
    fds.assign({{stop_fd_, POLLIN, 0}, {now < accept_paused_until ? -1 : listen_fd_, POLLIN, 0}});
    if (now < accept_paused_until)
      wake = accept_paused_until;
    for (const Connection &c : connections) {
      fds.push_back({c.fd, static_cast<short>(c.state == Connection::State::Writing ? POLLOUT : POLLIN), 0});
      wake = std::min(wake, c.deadline);
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait_ms, 0))) < 0 && errno != EINTR)
      return;
    if (fds[0].revents != 0)
      break;  // stopping: abandon every connection
    now = Clock::now();
    // Connections first (their pollfds follow the first two, in order), from
    // the back so that closing one does not move those still to look at.
    for (size_t i = connections.size(); i-- > 0;) {
      if (fds[2 + i].revents != 0 && !progress(connections[i], render_))
        close_at(i);
      else if (connections[i].deadline <= now)
        close_at(i);  // too slow: close without a word
    }
    if (fds[1].revents == 0)
      continue;
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        // Out of descriptors or memory: the connection stays queued and poll()
        // would return at once, so back off rather than spin.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until = now + kAcceptBackoff;
        break;
      }
      if (connections.size() >= kMaxConnections)
        close_at(0);  // the oldest: connections are kept in the order they came
      connections.push_back({fd, Connection::State::Reading, now, now + kRequestTimeout, {}, {}, 0});
    }
  }
  for (const Connection &c : connections)
    ::close(c.fd);
}

}  // namespace netlatd
