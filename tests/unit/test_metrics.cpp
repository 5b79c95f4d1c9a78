// Prometheus exposition and the /metrics endpoint. The server test is a real
// HTTP scrape over 127.0.0.1 (and ::1) on an ephemeral port.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_get.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/model/snapshot.hpp"

using netlatd::MetricsSnapshot;
using netlatd::Stage;

namespace {

MetricsSnapshot::StageMetrics &stage_of(MetricsSnapshot &s, Stage st) {
  return s.stages[static_cast<size_t>(st)];
}

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

constexpr const char *kUdp5000 = R"(dport="5000",proto="udp")";

// The `_bucket` samples of one stage of one series, in output order: (le label, value).
std::vector<std::pair<std::string, uint64_t>> buckets_of(const std::string &text, const std::string &stage,
                                                         const std::string &series = kUdp5000) {
  std::vector<std::pair<std::string, uint64_t>> out;
  const std::string prefix = "netlatd_stage_latency_seconds_bucket{stage=\"" + stage + "\"," + series + ",le=\"";
  for (const auto &line : lines_of(text)) {
    if (line.rfind(prefix, 0) != 0)
      continue;
    const auto close = line.find("\"} ", prefix.size());
    out.emplace_back(line.substr(prefix.size(), close - prefix.size()), std::stoull(line.substr(close + 3)));
  }
  return out;
}

std::string sample_value(const std::string &text, const std::string &series) {
  for (const auto &line : lines_of(text))
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
      return line.substr(series.size() + 1);
  return "<absent>";
}

netlatd::Histogram &latency_of(MetricsSnapshot &s, uint16_t dport, uint8_t proto, Stage st) {
  auto &series = s.series[netlatd::SeriesKey{dport, proto, 0, 0}];
  series.labels = {{"dport", std::to_string(dport)}, {"proto", proto == 6 ? "tcp" : "udp"}};
  return series.latency[static_cast<size_t>(st)];
}

MetricsSnapshot example_snapshot() {
  MetricsSnapshot s;
  s.iface = "lo";
  s.ports = {5000, 5001};
  s.version = "0.1.0";
  s.kernel = "6.18.0-test";
  for (Stage st : netlatd::kAllStages) {
    auto &m = stage_of(s, st);
    m.applicable = st != Stage::Irq;  // lo has no NIC IRQ
    m.start_hook = "tp_btf/start";
    m.end_hook = "tp_btf/end";
  }
  auto &total = latency_of(s, 5000, 17, Stage::Total);
  total.record(90);             // 90 ns
  total.record(1'500);          // 1.5 us
  total.record(3'000'000);      // 3 ms
  total.record(20'000'000'000); // 20 s: beyond the last finite bound
  latency_of(s, 5001, 6, Stage::Total).record(700);
  s.packets_udp = 4;
  s.packets_tcp = 1;
  s.kernel_drops = 7;
  s.losses = {{"ringbuf_full", 2}, {"output_dropped", 0}};
  s.reads_unnamed = {{"ambiguous", 3}, {"untracked", 1}};
  s.queue_unseen = 5;
  s.sample = 16;
  s.sampled_out = 150;
  s.unordered = 8;
  s.reader_unknown = 9;
  s.tcp_bytes = {{"read", 1000}, {"reported", 900}, {"skipped", 64}};
  s.hook_misses = {{"tp_btf/tcp_probe", 6}, {"tp_btf/netif_receive_skb", 0}};
  return s;
}

}  // namespace

TEST_CASE("prometheus_bounds_ns: 64 ns to 10.7 s, edges of the JSON buckets, at the asked resolution", "[metrics]") {
  for (unsigned per : {1u, 2u, 4u, 8u}) {
    INFO("per power of two " << per);
    const auto bounds = netlatd::prometheus_bounds_ns(per);
    REQUIRE(bounds.size() >= 2);
    CHECK(bounds.front() == 64);  // below 100 ns: sub-microsecond stages are resolved
    CHECK(bounds.back() >= 10'000'000'000ull);
    CHECK(bounds[bounds.size() - 2] < 10'000'000'000ull);  // no bound past the first at 10 s
    // The powers of two from 2^6 to 2^32 whole, then 2^33 (8.6 s) on to the
    // first bound of at least 10 s.
    const std::map<unsigned, size_t> expected{{1, 29}, {2, 56}, {4, 110}, {8, 219}};
    CHECK(bounds.size() == expected.at(per));
    for (size_t i = 1; i < bounds.size(); ++i) {
      INFO("bound " << bounds[i]);
      CHECK(bounds[i] > bounds[i - 1]);
      // The resolution asked for: no step wider than one n-th of a power of two.
      CHECK(static_cast<double>(bounds[i]) / static_cast<double>(bounds[i - 1]) <= 1.0 + 1.0 / per + 1e-12);
    }
    // Every bound is the lower edge of a fine (JSON) bucket: a Prometheus
    // bucket is exactly a union of JSON buckets.
    for (uint64_t b : bounds)
      CHECK(netlatd::Histogram::bucket_bounds(netlatd::Histogram::bucket_index(b)).lower == b);
  }
  CHECK(netlatd::prometheus_bounds_ns(4).size() == 110);
  for (unsigned bad : {0u, 3u, 16u})
    CHECK_THROWS_AS(netlatd::prometheus_bounds_ns(bad), std::invalid_argument);
}

TEST_CASE("prometheus_le_label: seconds as the Go client libraries write them", "[metrics]") {
  using netlatd::prometheus_le_label;
  CHECK(prometheus_le_label(64) == "6.4e-08");
  CHECK(prometheus_le_label(80) == "8e-08");
  CHECK(prometheus_le_label(1'000) == "1e-06");
  CHECK(prometheus_le_label(2'500) == "2.5e-06");
  CHECK(prometheus_le_label(98'304) == "9.8304e-05");
  CHECK(prometheus_le_label(100'000) == "0.0001");
  CHECK(prometheus_le_label(131'072) == "0.000131072");
  CHECK(prometheus_le_label(1'310'720) == "0.00131072");
  CHECK(prometheus_le_label(1'000'000'000) == "1");
  CHECK(prometheus_le_label(10'737'418'240) == "10.73741824");
}

TEST_CASE("render_prometheus: histogram buckets are cumulative and end at _count", "[metrics]") {
  const std::string text = netlatd::render_prometheus(example_snapshot());
  const auto b = buckets_of(text, "total");
  REQUIRE(b.size() == netlatd::prometheus_bounds_ns(4).size() + 1);
  CHECK(b.front().first == "6.4e-08");
  CHECK(b.back().first == "+Inf");
  for (size_t i = 1; i < b.size(); ++i)
    CHECK(b[i].second >= b[i - 1].second);

  const std::map<std::string, uint64_t> by_le(b.begin(), b.end());
  CHECK(by_le.at("6.4e-08") == 0);
  CHECK(by_le.at("8e-08") == 0);
  CHECK(by_le.at("9.6e-08") == 1);  // 90 ns: its own bucket, not lumped under 1 µs
  CHECK(by_le.at("1.28e-06") == 1);
  CHECK(by_le.at("1.536e-06") == 2);  // 1.5 µs
  CHECK(by_le.at("0.00262144") == 2);
  CHECK(by_le.at("0.003145728") == 3);
  CHECK(by_le.at("10.73741824") == 3);
  CHECK(by_le.at("+Inf") == 4);
  CHECK(sample_value(text, std::string("netlatd_stage_latency_seconds_count{stage=\"total\",") + kUdp5000 + "}") ==
        "4");
  CHECK(std::stod(sample_value(text, std::string("netlatd_stage_latency_seconds_sum{stage=\"total\",") + kUdp5000 +
                                         "}")) == (90.0 + 1'500.0 + 3'000'000.0 + 20'000'000'000.0) / 1e9);

  // An applicable stage with no packets still has its series, all zero.
  const auto empty = buckets_of(text, "oncpu");
  REQUIRE(empty.size() == b.size());
  CHECK(empty.back().second == 0);

  // Each series of the breakdown is its own histogram.
  const auto tcp = buckets_of(text, "total", R"(dport="5001",proto="tcp")");
  REQUIRE(tcp.size() == b.size());
  CHECK(tcp.back().second == 1);
  CHECK(std::map<std::string, uint64_t>(tcp.begin(), tcp.end()).at("7.68e-07") == 1);  // 700 ns

  // The resolution is the snapshot's: 8 per power of two, 219 bounds.
  MetricsSnapshot fine = example_snapshot();
  fine.buckets_per_power_of_two = 8;
  CHECK(buckets_of(netlatd::render_prometheus(fine), "total").size() == 220);
}

TEST_CASE("render_prometheus: `le` counts exactly the values below its bound", "[metrics]") {
  // The bounds are edges of the fine buckets, so nothing is blurred: the
  // count under `le` is the number of values (whole nanoseconds) below it.
  for (unsigned per : {1u, 4u, 8u}) {
    MetricsSnapshot s = example_snapshot();
    s.buckets_per_power_of_two = per;
    const auto bounds = netlatd::prometheus_bounds_ns(per);
    auto &h = latency_of(s, 5000, 17, Stage::SockQueue);
    std::mt19937_64 rng(42);
    std::vector<uint64_t> values;
    for (int i = 0; i < 20'000; ++i) {
      // Log-uniform from 1 ns to ~40 s, so every bound gets neighbours.
      const double exp10 = std::uniform_real_distribution<double>(0.0, 10.6)(rng);
      values.push_back(static_cast<uint64_t>(std::pow(10.0, exp10)));
    }
    for (uint64_t bound : bounds)
      for (uint64_t v : {bound - 1, bound, bound + 1})
        values.push_back(v);
    for (uint64_t v : values)
      h.record(v);

    const auto b = buckets_of(netlatd::render_prometheus(s), "sock_queue");
    REQUIRE(b.size() == bounds.size() + 1);
    for (size_t i = 0; i < bounds.size(); ++i) {
      uint64_t below = 0;
      for (uint64_t v : values)
        below += v < bounds[i];
      INFO("le=" << b[i].first);
      CHECK(b[i].second == below);
    }
    CHECK(b.back().second == values.size());
  }
}

TEST_CASE("render_prometheus: families, labels, applicability", "[metrics]") {
  const std::string text = netlatd::render_prometheus(example_snapshot());
  CHECK(text.back() == '\n');

  // Only applicable stages have latency series; all stages have an applicable flag.
  CHECK(buckets_of(text, "irq").empty());
  CHECK(sample_value(text, "netlatd_stage_applicable{stage=\"irq\"}") == "0");
  CHECK(sample_value(text, "netlatd_stage_applicable{stage=\"softirq\"}") == "1");
  CHECK(sample_value(text, "netlatd_stage_hook_info{stage=\"total\",start_hook=\"tp_btf/start\",end_hook=\"tp_btf/end\"}") == "1");

  CHECK(sample_value(text, "netlatd_packets_total{proto=\"udp\"}") == "4");
  CHECK(sample_value(text, "netlatd_packets_total{proto=\"tcp\"}") == "1");
  // The kernel's drops are not netlatd's losses: two families.
  CHECK(sample_value(text, "netlatd_kernel_drops_total") == "7");
  CHECK(sample_value(text, "netlatd_losses_total{reason=\"ringbuf_full\"}") == "2");
  CHECK(sample_value(text, "netlatd_losses_total{reason=\"output_dropped\"}") == "0");
  CHECK(text.find("stack_dropped") == std::string::npos);
  CHECK(text.find("netlatd_drops_total") == std::string::npos);
  CHECK(sample_value(text, "netlatd_reads_unnamed_total{why=\"ambiguous\"}") == "3");
  CHECK(sample_value(text, "netlatd_queue_stamp_missing_total") == "5");
  CHECK(sample_value(text, "netlatd_sample_one_in") == "16");
  CHECK(sample_value(text, "netlatd_sampled_out_total") == "150");
  CHECK(sample_value(text, "netlatd_records_unordered_total") == "8");
  CHECK(sample_value(text, "netlatd_records_reader_unknown_total") == "9");
  // NAPI figures only where the hook gives them.
  CHECK(text.find("netlatd_napi_total") == std::string::npos);
  netlatd::MetricsSnapshot with_napi = example_snapshot();
  with_napi.napi = {{"polls", 10}, {"packets", 40}, {"budget_exhausted", 1}};
  const std::string napi_text = netlatd::render_prometheus(with_napi);
  CHECK(sample_value(napi_text, "netlatd_napi_total{kind=\"packets\"}") == "40");
  CHECK(sample_value(napi_text, "netlatd_napi_total{kind=\"budget_exhausted\"}") == "1");
  CHECK(sample_value(text, "netlatd_tcp_bytes_total{kind=\"read\"}") == "1000");
  CHECK(sample_value(text, "netlatd_tcp_bytes_total{kind=\"skipped\"}") == "64");
  CHECK(sample_value(text, "netlatd_hook_misses_total{hook=\"tp_btf/tcp_probe\"}") == "6");
  CHECK(sample_value(text, "netlatd_hook_misses_total{hook=\"tp_btf/netif_receive_skb\"}") == "0");
  CHECK(sample_value(text,
                     "netlatd_build_info{version=\"0.1.0\",kernel=\"6.18.0-test\",iface=\"lo\",ports=\"5000,5001\"}") ==
        "1");

  // Every sample line is well-formed and belongs to a family declared above it
  // with both HELP and TYPE.
  const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? \S+$)");
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  for (const auto &line : lines_of(text)) {
    INFO(line);
    if (line.rfind("# HELP ", 0) == 0) {
      helps.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      CHECK(helps.count(name) == 1);
      CHECK(types.count(name) == 0);  // declared once
      types[name] = line.substr(line.find(' ', 7) + 1);
      continue;
    }
    std::smatch m;
    REQUIRE(std::regex_match(line, m, sample_re));
    std::string family = m[1].str();
    for (const char *suffix : {"_bucket", "_sum", "_count"})
      if (!types.count(family) && family.size() > std::strlen(suffix) &&
          family.compare(family.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        family.resize(family.size() - std::strlen(suffix));
    CHECK(types.count(family) == 1);
  }
  CHECK(types.at("netlatd_stage_latency_seconds") == "histogram");
  CHECK(types.at("netlatd_packets_total") == "counter");
  CHECK(types.at("netlatd_kernel_drops_total") == "counter");
  CHECK(types.at("netlatd_losses_total") == "counter");
  CHECK(types.at("netlatd_build_info") == "gauge");
  CHECK(types.at("netlatd_stage_applicable") == "gauge");
}

TEST_CASE("render_prometheus: label values are escaped", "[metrics]") {
  MetricsSnapshot s = example_snapshot();
  s.iface = "we\"ird\\name\nx";
  s.losses = {{"a\"b", 1}};
  const std::string text = netlatd::render_prometheus(s);
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring(R"(iface="we\"ird\\name\nx")"));
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring(R"(netlatd_losses_total{reason="a\"b"} 1)"));
  // The raw newline must not survive: it would split the sample.
  for (const auto &line : lines_of(text))
    CHECK(line != "x\",ports=\"5000,5001\"} 1");
}

TEST_CASE("parse_listen_address", "[metrics]") {
  using netlatd::parse_listen_address;
  struct Case {
    const char *text, *host;
    int port;
  };
  for (const Case &c : {Case{"127.0.0.1:9464", "127.0.0.1", 9464}, Case{":9100", "127.0.0.1", 9100},
                        Case{"9100", "127.0.0.1", 9100}, Case{"0.0.0.0:0", "0.0.0.0", 0},
                        Case{"[::1]:9464", "::1", 9464},
                        // An address alone: the default port.
                        Case{"127.0.0.1", "127.0.0.1", 9659}, Case{"[::1]", "::1", 9659},
                        Case{"0.0.0.0", "0.0.0.0", 9659}}) {
    INFO(c.text);
    auto a = parse_listen_address(c.text);
    CHECK(a.host == c.host);
    CHECK(a.port == c.port);
  }
  for (const char *bad : {"127.0.0.1:http", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9464",
                          "[::1]9464", "[::1", "1.2.3.4:80x", "", "localhost:9464", "example.org:9464",
                          "[127.0.0.1]:9464", "[]:9464", "300.0.0.1:9464", "[::1]:", "300.1.2.3", "[::1]x",
                          "[]"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_listen_address(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_listen_address("localhost:http"),
                    Catch::Matchers::ContainsSubstring("port 'http' is not a number"));
  // A name is refused: it could resolve to any address, and the endpoint has no authentication.
  CHECK_THROWS_WITH(parse_listen_address("localhost:9464"),
                    Catch::Matchers::ContainsSubstring("'localhost' is not an IPv4 address"));
}

TEST_CASE("MetricsServer serves /metrics over real HTTP", "[metrics]") {
  const MetricsSnapshot snapshot = example_snapshot();
  std::atomic<int> scrapes{0};
  netlatd::MetricsServer server("127.0.0.1:0", [&] {
    ++scrapes;
    return netlatd::render_prometheus(snapshot);
  });
  REQUIRE(server.port() != 0);
  CHECK(server.host() == "127.0.0.1");

  auto res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK_THAT(res->header("content-type"), Catch::Matchers::StartsWith("text/plain; version=0.0.4"));
  CHECK(res->body == netlatd::render_prometheus(snapshot));
  CHECK(scrapes == 1);

  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/");
  REQUIRE(res);
  CHECK(res->status == 404);
  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metricsx");
  REQUIRE(res);
  CHECK(res->status == 404);
  res = nltest::http_request("127.0.0.1", server.port(), "POST", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 405);
  CHECK(res->header("allow") == "GET, HEAD");
  CHECK(scrapes == 1);
  // HEAD: the headers of a scrape, no body.
  res = nltest::http_request("127.0.0.1", server.port(), "HEAD", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->header("content-length") == std::to_string(netlatd::render_prometheus(snapshot).size()));
  CHECK(res->body.empty());
  // A query string is not part of the path.
  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics?name[]=x");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(scrapes == 3);

  server.stop();
  server.stop();  // idempotent
  CHECK_FALSE(nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 1000));
}

TEST_CASE("MetricsServer listens on IPv6", "[metrics]") {
  // lo has ::1 unless IPv6 is disabled on this host.
  const int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool have_v6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
  if (probe >= 0)
    close(probe);
  if (!have_v6)
    SKIP("no IPv6 loopback address (::1) on this host");

  netlatd::MetricsServer server("[::1]:0", [] { return std::string("netlatd_up 1\n"); });
  REQUIRE(server.port() != 0);
  CHECK(server.host() == "::1");
  auto res = nltest::http_request("::1", server.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body == "netlatd_up 1\n");
  // Only ::1 is bound: the same port on 127.0.0.1 is refused.
  CHECK_FALSE(nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 1000));
}

TEST_CASE("MetricsServer: a client that never sends its request holds nothing up", "[metrics]") {
  netlatd::MetricsServer server("127.0.0.1:0", [] { return std::string("netlatd_up 1\n"); });
  auto connect_silent = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
    return fd;
  };
  // The server gives a silent connection 1 s, then serves the next one.
  const int silent = connect_silent();
  auto t = std::chrono::steady_clock::now();
  auto res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 5000);
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(std::chrono::steady_clock::now() - t < std::chrono::milliseconds(2500));
  close(silent);

  // stop() does not wait for a silent client either.
  const int held = connect_silent();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // accepted, waiting for the request
  t = std::chrono::steady_clock::now();
  server.stop();
  CHECK(std::chrono::steady_clock::now() - t < std::chrono::milliseconds(500));
  close(held);
}

TEST_CASE("MetricsServer: render failure is a 500, busy port is a clear error", "[metrics]") {
  netlatd::MetricsServer failing("127.0.0.1:0", []() -> std::string { throw std::runtime_error("no snapshot yet"); });
  auto res = nltest::http_request("127.0.0.1", failing.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 500);
  CHECK_THAT(res->body, Catch::Matchers::ContainsSubstring("no snapshot yet"));

  const std::string taken = "127.0.0.1:" + std::to_string(failing.port());
  CHECK_THROWS_AS(netlatd::MetricsServer(taken, [] { return std::string(); }), netlatd::MetricsError);
  CHECK_THROWS_WITH(netlatd::MetricsServer(taken, [] { return std::string(); }),
                    Catch::Matchers::StartsWith("cannot listen on " + taken));
  CHECK_THROWS_AS(netlatd::MetricsServer("127.0.0.1:http", [] { return std::string(); }), std::invalid_argument);
}

namespace {

int connect_to(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(fd >= 0);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
  return fd;
}

void send_text(int fd, const std::string &text) {
  REQUIRE(send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
}

// What the server sends until it closes (or resets), within timeout_ms;
// `closed` says whether it did close.
std::string read_until_closed(int fd, int timeout_ms, bool &closed) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  closed = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) != 1)
      return got;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      closed = true;
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("MetricsServer: dozens of slow, huge and malformed clients hold no scrape up", "[metrics][hostile]") {
  std::atomic<int> scrapes{0};
  netlatd::MetricsServer server("127.0.0.1:0", [&] {
    ++scrapes;
    return std::string("netlatd_up 1\n");
  });
  const uint16_t port = server.port();
  const size_t fds_before = open_fds();
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };

  // Refused as soon as the request line is in, headers or not: a wrong
  // method (405), a wrong path (404), a line that is not HTTP (400).
  const std::pair<std::string, std::string> refused[] = {
      {"POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n", "HTTP/1.1 405 "},
      {"DELETE / HTTP/1.0\r\n", "HTTP/1.1 405 "},
      {"GET /admin HTTP/1.1\r\n", "HTTP/1.1 404 "},
      {"GET /metrics%zz HTTP/1.1\r\n", "HTTP/1.1 404 "},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n", 12), "HTTP/1.1 400 "},
      {"GET /metrics SPDY/3\r\n", "HTTP/1.1 400 "},
      {"\r\n", "HTTP/1.1 400 "},
  };
  for (const auto &[request, status] : refused) {
    INFO(request);
    const int fd = connect_to(port);
    const auto t = Clock::now();
    send_text(fd, request);
    bool closed = false;
    const std::string got = read_until_closed(fd, 2000, closed);
    CHECK(got.rfind(status, 0) == 0);
    CHECK(closed);
    CHECK(ms_since(t) < 500);
    close(fd);
  }
  // A head that never ends: 414 without a line end, 431 with one, at 8 KiB.
  for (const auto &[prefix, status] : {std::pair<std::string, std::string>{"GET /", "HTTP/1.1 414 "},
                                       {"GET /metrics HTTP/1.1\r\nX: ", "HTTP/1.1 431 "}}) {
    const int fd = connect_to(port);
    send_text(fd, prefix + std::string(8192, 'a'));
    bool closed = false;
    CHECK(read_until_closed(fd, 2000, closed).rfind(status, 0) == 0);
    CHECK(closed);
    close(fd);
  }
  CHECK(scrapes == 0);

  // 80 clients at once that never finish: silent, trickling, half a huge
  // head. Twice the connections served at once, so old ones are closed for
  // new ones; every real scrape among them is answered in well under the 1 s
  // a slow client may take.
  std::vector<int> hostile;
  for (int i = 0; i < 80; ++i) {
    const int fd = connect_to(port);
    if (i % 3 == 1)
      send_text(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n");  // no end of head, ever
    else if (i % 3 == 2)
      send_text(fd, "GET /" + std::string(4000, 'b'));
    hostile.push_back(fd);
    if (i % 10 == 9) {
      const auto t = Clock::now();
      auto res = nltest::http_request("127.0.0.1", port, "GET", "/metrics", 2000);
      REQUIRE(res);
      CHECK(res->status == 200);
      CHECK(res->body == "netlatd_up 1\n");
      CHECK(ms_since(t) < 300);
    }
  }
  CHECK(scrapes == 8);
  // Every hostile connection is closed by the server within its second.
  for (int fd : hostile) {
    bool closed = false;
    read_until_closed(fd, 2500, closed);
    CHECK(closed);
    close(fd);
  }
  // Nothing kept: the server's descriptors are back to the listening socket
  // and its eventfd, and it still answers.
  CHECK(open_fds() == fds_before);
  auto res = nltest::http_request("127.0.0.1", port, "GET", "/metrics", 2000);
  REQUIRE(res);
  CHECK(res->status == 200);
}
