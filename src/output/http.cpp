// The metrics endpoint: --metrics-listen parsed, and a small HTTP/1.1 server
// of GET /metrics on its own thread.
#include "netlatd/output/http.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
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

namespace netlatd {


std::string shown_address(const ListenAddress &a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

ListenAddress parse_listen_address(std::string_view text) {
  const std::string shown(text);
  const std::string default_port = std::to_string(kDefaultMetricsPort);
  ListenAddress a;
  std::string_view port = text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    const bool alone = close != std::string_view::npos && close + 1 == text.size();
    if (close == std::string_view::npos || (!alone && text[close + 1] != ':'))
      throw std::invalid_argument("bad listen address '" + shown + "': expected [IPV6]:PORT or [IPV6]");
    a.host = std::string(text.substr(1, close - 1));
    port = alone ? std::string_view(default_port) : text.substr(close + 2);
  } else if (text.find('.') != std::string_view::npos && text.find(':') == std::string_view::npos) {
    a.host = std::string(text);  // an IPv4 address alone
    port = default_port;
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon)
      throw std::invalid_argument("bad listen address '" + shown + "': write IPv6 addresses as [ADDR]:PORT");
    a.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  const bool bracketed = !text.empty() && text.front() == '[';
  if (a.host.empty() && !bracketed)
    a.host = "127.0.0.1";
  unsigned value = 0;
  const auto res = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || res.ec != std::errc{} || res.ptr != port.data() + port.size() || value > 65535)
    throw std::invalid_argument("bad listen address '" + shown + "': port '" + std::string(port) +
                                "' is not a number in 0-65535");
  a.port = static_cast<uint16_t>(value);
  // An address, not a name: a name could resolve to something else tomorrow
  // (or to every interface), and the endpoint has no authentication.
  in6_addr scratch{};
  const bool ok = bracketed ? inet_pton(AF_INET6, a.host.c_str(), &scratch) == 1
                            : inet_pton(AF_INET, a.host.c_str(), &scratch) == 1;
  if (!ok)
    throw std::invalid_argument("bad listen address '" + shown + "': '" + a.host + "' is not an IP" +
                                (bracketed ? "v6" : "v4") + " address (e.g. 127.0.0.1:9659 or [::1]:9659)");
  return a;
}

namespace {

using Clock = std::chrono::steady_clock;

// What one connection may cost. A scrape is a request line and a few headers,
// sent at once; nothing legitimate comes near these.
constexpr size_t kMaxRequestHead = 8192;
constexpr auto kRequestTimeout = std::chrono::seconds(1);   // for the whole request head to arrive
constexpr auto kResponseTimeout = std::chrono::seconds(1);  // for the client to take the response
constexpr auto kLingerTimeout = std::chrono::milliseconds(100);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr int kListenBacklog = 64;
// Connections served at once. A new one past this closes the oldest: a
// client that trickles its request (or never sends one) cannot keep a scrape
// that sends its request at once from being answered.
constexpr size_t kMaxConnections = 32;

const char *reason_phrase(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  default: return "Error";
  }
}

// The path of an origin-form request target ("/metrics?x=1" -> "/metrics"),
// %XX escapes decoded, as clients may escape any character; "" when malformed.
std::string target_path(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  std::string path;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '%') {
      path.push_back(target[i]);
      continue;
    }
    unsigned value = 0;
    const char *first = target.data() + i + 1;
    if (i + 2 >= target.size() || std::from_chars(first, first + 2, value, 16).ptr != first + 2)
      return "";
    path.push_back(static_cast<char>(value));
    i += 2;
  }
  return path;
}

std::string http_response(int status, std::string_view content_type, std::string_view body, bool head_only) {
  std::string out;
  out.reserve(160 + (head_only ? 0 : body.size()));
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(reason_phrase(status)).append("\r\n");
  if (!content_type.empty())
    out.append("Content-Type: ").append(content_type).append("\r\n");
  if (status == 405)
    out.append("Allow: GET, HEAD\r\n");
  out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("Connection: close\r\n\r\n");
  if (!head_only)
    out.append(body);
  return out;
}

// The response to the request head received so far, or "" while more is
// needed. Anything but GET or HEAD of /metrics is answered as soon as its
// request line is in, without waiting for the headers.
std::string answer(std::string_view head, const MetricsServer::Render &render) {
  const auto eol = head.find('\n');
  if (eol == std::string_view::npos)
    return head.size() >= kMaxRequestHead ? http_response(414, "", "", false) : "";
  // Request line: METHOD SP TARGET SP HTTP/1.x
  std::string_view line = head.substr(0, eol);
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0)
    return http_response(400, "", "", false);
  const std::string_view method = line.substr(0, sp1);
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only)
    return http_response(405, "", "", false);
  if (target_path(line.substr(sp1 + 1, sp2 - sp1 - 1)) != "/metrics")
    return http_response(404, "", "", head_only);
  // Until the empty line that ends the head (CRLF, or bare LF from lenient clients).
  if (head.find("\n\r\n") == std::string_view::npos && head.find("\n\n") == std::string_view::npos)
    return head.size() >= kMaxRequestHead ? http_response(431, "", "", false) : "";
  try {
    return http_response(200, "text/plain; version=0.0.4; charset=utf-8", render(), head_only);
  } catch (const std::bad_alloc &) {
    throw;
  } catch (const std::exception &e) {
    return http_response(500, "text/plain", std::string("netlatd: metrics unavailable: ") + e.what() + "\n",
                         head_only);
  }
}

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
    const ssize_t n = ::recv(c.fd, buf, std::min(sizeof(buf), kMaxRequestHead - c.in.size()), 0);
    if (would_block(n))
      return true;
    if (n <= 0)
      return false;  // the client went away
    c.in.append(buf, static_cast<size_t>(n));
    std::string response;
    try {
      response = answer(c.in, render);
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
