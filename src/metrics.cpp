#include "netlatd/metrics.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <system_error>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace netlatd {

namespace {

// The `le` labels as Go's strconv.FormatFloat(v, 'g', -1, 64) writes them, which
// is what the official client libraries emit: identical label values let a
// query aggregate netlatd's buckets with other exporters' without relabelling.
constexpr std::array<std::string_view, kPrometheusBoundsNs.size()> kBoundLabels{
    "1e-06", "2.5e-06", "5e-06", "1e-05", "2.5e-05", "5e-05", "0.0001",
    "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05", "0.1", "0.25", "0.5", "1"};

std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

// Label values escape backslash, double quote and newline (format 0.0.4).
void append_label_value(std::string &out, std::string_view v) {
  for (char c : v) {
    switch (c) {
    case '\\': out += "\\\\"; break;
    case '"': out += "\\\""; break;
    case '\n': out += "\\n"; break;
    default: out.push_back(c);
    }
  }
}

void append_header(std::string &out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

void append_sample(std::string &out, std::string_view name, Labels labels, std::string_view value) {
  out.append(name);
  if (labels.size() != 0) {
    out.push_back('{');
    bool first = true;
    for (const auto &[k, v] : labels) {
      if (!first)
        out.push_back(',');
      first = false;
      out.append(k).append("=\"");
      append_label_value(out, v);
      out.push_back('"');
    }
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(value);
  out.push_back('\n');
}

std::string join_ports(const std::vector<uint16_t> &ports) {
  std::string s;
  for (uint16_t p : ports) {
    if (!s.empty())
      s.push_back(',');
    s += std::to_string(p);
  }
  return s;
}

void append_histogram(std::string &out, std::string_view stage, const Histogram &h) {
  // Per-bound (not yet cumulative) counts; index kBounds is +Inf.
  std::array<uint64_t, kPrometheusBoundsNs.size() + 1> per_bound{};
  for (const auto &b : h.nonempty_buckets()) {
    size_t i = 0;
    while (i < kPrometheusBoundsNs.size() && b.upper > kPrometheusBoundsNs[i])
      ++i;
    per_bound[i] += b.count;
  }
  constexpr std::string_view name = "netlatd_stage_latency_seconds";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kPrometheusBoundsNs.size(); ++i) {
    cumulative += per_bound[i];
    append_sample(out, "netlatd_stage_latency_seconds_bucket", {{"stage", stage}, {"le", kBoundLabels[i]}},
                  std::to_string(cumulative));
  }
  // +Inf is the total by definition, so it equals _count even if a bucket's
  // bounds were ever inconsistent with count().
  append_sample(out, "netlatd_stage_latency_seconds_bucket", {{"stage", stage}, {"le", "+Inf"}},
                std::to_string(h.count()));
  append_sample(out, std::string(name) + "_sum", {{"stage", stage}},
                format_double(static_cast<double>(h.sum()) / 1e9));
  append_sample(out, std::string(name) + "_count", {{"stage", stage}}, std::to_string(h.count()));
}

}  // namespace

std::string render_prometheus(const MetricsSnapshot &s) {
  std::string out;
  out.reserve(8192);

  append_header(out, "netlatd_build_info", "gauge",
                "netlatd version, running kernel, watched interface and ports; always 1.");
  const std::string ports = join_ports(s.ports);
  append_sample(out, "netlatd_build_info",
                {{"version", s.version}, {"kernel", s.kernel}, {"iface", s.iface}, {"ports", ports}}, "1");

  append_header(out, "netlatd_stage_applicable", "gauge",
                "1 when the stage is measured on this interface and kernel, 0 when it does not apply.");
  for (Stage st : kAllStages) {
    const auto &m = s.stages[static_cast<size_t>(st)];
    append_sample(out, "netlatd_stage_applicable", {{"stage", stage_name(st)}}, m.applicable ? "1" : "0");
  }

  append_header(out, "netlatd_stage_hook_info", "gauge",
                "The kernel hooks a stage starts and ends at, chosen at start-up; always 1.");
  for (Stage st : kAllStages) {
    const auto &m = s.stages[static_cast<size_t>(st)];
    if (!m.applicable)
      continue;
    append_sample(out, "netlatd_stage_hook_info",
                  {{"stage", stage_name(st)}, {"start_hook", m.start_hook}, {"end_hook", m.end_hook}}, "1");
  }

  append_header(out, "netlatd_stage_latency_seconds", "histogram",
                "Time packets spent in each receive-path stage, since the daemon started.");
  for (Stage st : kAllStages) {
    const auto &m = s.stages[static_cast<size_t>(st)];
    if (m.applicable)
      append_histogram(out, stage_name(st), m.latency);
  }

  append_header(out, "netlatd_packets_total", "counter",
                "Packets whose receive path was measured, by transport protocol.");
  append_sample(out, "netlatd_packets_total", {{"proto", "udp"}}, std::to_string(s.packets_udp));
  append_sample(out, "netlatd_packets_total", {{"proto", "tcp"}}, std::to_string(s.packets_tcp));

  append_header(out, "netlatd_drops_total", "counter",
                "Packets or records netlatd could not measure, by reason (see netlatd(8)).");
  for (const auto &[reason, n] : s.drops)
    append_sample(out, "netlatd_drops_total", {{"reason", reason}}, std::to_string(n));

  append_header(out, "netlatd_reads_unnamed_total", "counter",
                "UDP reads whose datagram no record names, by why: ambiguous (several could be it), untracked.");
  for (const auto &[why, n] : s.reads_unnamed)
    append_sample(out, "netlatd_reads_unnamed_total", {{"why", why}}, std::to_string(n));

  append_header(out, "netlatd_queue_stamp_missing_total", "counter",
                "Records written without their socket-queue stamp: the queueing hook did not run for them.");
  append_sample(out, "netlatd_queue_stamp_missing_total", {}, std::to_string(s.queue_unseen));

  append_header(out, "netlatd_tcp_bytes_total", "counter",
                "TCP payload bytes on watched sockets: read by receive calls, reported in records, skipped in gaps.");
  for (const auto &[kind, n] : s.tcp_bytes)
    append_sample(out, "netlatd_tcp_bytes_total", {{"kind", kind}}, std::to_string(n));

  append_header(out, "netlatd_hook_misses_total", "counter",
                "Times a hook's BPF program did not run because it was already running on that CPU.");
  for (const auto &[hook, n] : s.hook_misses)
    append_sample(out, "netlatd_hook_misses_total", {{"hook", hook}}, std::to_string(n));

  return out;
}

ListenAddress parse_listen_address(std::string_view text) {
  const std::string shown(text);
  ListenAddress a;
  std::string_view port = text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument("bad listen address '" + shown + "': expected [IPV6]:PORT");
    a.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
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
                                (bracketed ? "v6" : "v4") + " address (e.g. 127.0.0.1:9464 or [::1]:9464)");
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

std::string shown_address(const ListenAddress &a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

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

  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0)
    throw fail(errno);
  try {
    thread_ = std::thread([this] { serve(); });
  } catch (const std::system_error &e) {
    throw fail(e.code().value());
  }
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
