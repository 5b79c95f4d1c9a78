#include "netlatd/metrics.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <thread>
#include <cstring>

#include <arpa/inet.h>
#include <httplib.h>
#include <sys/socket.h>

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

MetricsServer::MetricsServer(std::string_view listen, Render render)
    : address_(parse_listen_address(listen)), server_(std::make_unique<httplib::Server>()) {
  // One worker: scrapes are rare and serialising them means `render` never
  // runs twice at once.
  server_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  // The worker waits up to the keep-alive timeout for another request on an
  // idle connection and stop() waits for the worker, so these bound how long
  // a scraper can hold up the daemon's exit. Prometheus scrapes every 15 s or
  // so: a connection idle for a second is not worth keeping.
  server_->set_read_timeout(1, 0);
  server_->set_write_timeout(1, 0);
  server_->set_keep_alive_timeout(1);
  server_->set_keep_alive_max_count(10);
  // httplib's default also sets SO_REUSEPORT, which would let a second daemon
  // bind the same port and silently get half of the scrapes. SO_REUSEADDR alone
  // still allows a quick restart while old connections sit in TIME_WAIT.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->Get("/metrics", [render = std::move(render)](const httplib::Request &, httplib::Response &res) {
    try {
      res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
    } catch (const std::exception &e) {
      res.status = 500;
      res.set_content(std::string("netlatd: metrics unavailable: ") + e.what() + "\n", "text/plain");
    }
  });

  const std::string shown = (address_.host.find(':') != std::string::npos ? "[" + address_.host + "]" : address_.host) +
                            ":" + std::to_string(address_.port);
  errno = 0;
  bool bound;
  if (address_.port == 0) {
    const int port = server_->bind_to_any_port(address_.host);
    bound = port > 0;
    if (bound)
      address_.port = static_cast<uint16_t>(port);
  } else {
    bound = server_->bind_to_port(address_.host, address_.port);
  }
  if (!bound) {
    const int err = errno;
    throw MetricsError("cannot listen on " + shown + (err ? std::string(": ") + std::strerror(err) : std::string()));
  }

  thread_ = std::thread([this] {
    server_->listen_after_bind();
    thread_done_ = true;
  });
  // httplib's stop() only acts once the listen loop runs; wait for it so a
  // stop() right after construction cannot leave the thread listening forever.
  // listen_after_bind() either sets is_running() at once or returns, so this ends.
  while (!server_->is_running() && !thread_done_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!server_->is_running()) {
    stop();
    throw MetricsError("cannot listen on " + shown + ": the server thread did not start");
  }
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() {
  if (!thread_.joinable())
    return;
  server_->stop();
  thread_.join();
}

}  // namespace netlatd
