// The Prometheus endpoint under a real HTTP scrape: exact counts while
// packets flow, a port in use (exit 70), the breakdown by port, protocol,
// family and reader cgroup in JSON and Prometheus, and the socket systemd
// passes. Every test runs the real binary as root.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <nlohmann/json.hpp>

#include "daemon_run.hpp"
#include "http_get.hpp"
#include "net_fixture.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/version.hpp"
#include "process.hpp"
#include "scrape.hpp"

using Catch::Matchers::ContainsSubstring;
using nlohmann::json;
using namespace nltest;
using namespace nltest::daemon_run;

namespace {

// This process's cgroup v2 path ("/user.slice/..."), as netlatd names a reader's; "" if none.
std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0)
      return line.substr(3);
  return "";
}

// The page once `sent` datagrams were read by one UDP reader of `series`
// (dport="...",proto="udp"): each has its softirq stage, each but those read
// without a reader the total; nothing over TCP.
void check_udp_counts(const std::string &page, const std::string &series, uint64_t sent) {
  // A read that raced a push still in flight on the other CPU is not tied
  // to its datagram by queue order (6.18): its packet is counted without
  // a reader, with its stages up to the queue and no total (2 of 50 in
  // one ASan tier run). Every other one has the whole path.
  const double unknown = sample(page, "netlatd_records_reader_unknown_total");
  CHECK(unknown >= 0);
  CHECK(unknown <= static_cast<double>(sent) / 20);
  CHECK(sample(page, "netlatd_stage_latency_seconds_count{stage=\"total\"," + series + "}") ==
        static_cast<double>(sent) - unknown);
  CHECK(sample(page, "netlatd_stage_latency_seconds_bucket{stage=\"total\"," + series + ",le=\"+Inf\"}") ==
        static_cast<double>(sent) - unknown);
  CHECK(sample(page, "netlatd_stage_latency_seconds_count{stage=\"softirq\"," + series + "}") ==
        static_cast<double>(sent));
  CHECK(sample(page, "netlatd_packets_total{proto=\"tcp\"}") == 0);
}

// The total's le buckets of `series`: cumulative, never above _count, which
// is the `sent` datagrams less those read without a reader.
void check_total_buckets(const std::string &page, const std::string &series, uint64_t sent) {
  double prev = 0;
  std::vector<std::string> les;
  for (uint64_t bound : netlatd::prometheus_bounds_ns(4))
    les.push_back(netlatd::prometheus_le_label(bound));
  les.push_back("+Inf");
  for (const std::string &le : les) {
    const double v = sample(page, "netlatd_stage_latency_seconds_bucket{stage=\"total\"," + series + ",le=\"" + le + "\"}");
    INFO(le);
    CHECK(v >= prev);
    prev = v;
  }
  CHECK(prev == static_cast<double>(sent) - sample(page, "netlatd_records_reader_unknown_total"));
}

// The counters beside the series: kernel drops and netlatd's losses by
// reason present, no IRQ stage on lo, and the kernel's stack drops not
// among netlatd's losses.
void check_other_counters(const std::string &page) {
  CHECK(sample(page, "netlatd_kernel_drops_total") >= 0);
  CHECK(sample(page, "netlatd_stage_applicable{stage=\"irq\"}") == 0);  // lo has no IRQ line
  CHECK(page.find("stack_dropped") == std::string::npos);  // the kernel's, not a loss of netlatd's
  for (const char *reason : {"ringbuf_full", "inflight_full", "output_dropped",
                             "outliers_rate_limited", "unjoined_expired"}) {
    INFO(reason);
    CHECK(sample(page, std::string("netlatd_losses_total{reason=\"") + reason + "\"}") >= 0);
  }
}

// The labels of a series of the breakdown test, whose readers are threads
// of this process, in `cgroup`.
std::string series(uint16_t port, const char *proto, const char *family, const std::string &cgroup) {
  return "dport=\"" + std::to_string(port) + "\",proto=\"" + proto + "\",family=\"" + family + "\",cgroup=\"" +
         cgroup + "\"";
}

// The breakdown test's page: the 65 datagrams under the readers' UDP series
// or without a reader (`unknown`), every TCP record under its series, and
// nothing under any other label set.
void check_breakdown_page(const std::string &page, const LoReaders &r, const std::string &cgroup, double unknown,
                          double tcp_records) {
  auto count = [&](const std::string &stage, uint16_t port, const char *proto, const char *family) {
    return sample(page, "netlatd_stage_latency_seconds_count{stage=\"" + stage + "\"," +
                            series(port, proto, family, cgroup) + "}");
  };
  CHECK(unknown <= 3);
  CHECK(count("total", r.udp_port, "udp", "ipv4") + count("total", r.udp_port, "udp", "ipv6") + unknown == 65);
  CHECK(count("in_socket", r.tcp_port, "tcp", "ipv4") == tcp_records);
  // Nothing under any other label set.
  CHECK(page.find("proto=\"tcp\",family=\"ipv6\"") == std::string::npos);
  CHECK(page.find("cgroup=\"other\"") == std::string::npos);
}

// The breakdown test's interval line: a row per series of the readers'
// cgroup with its exact count, less the packets under cgroup "unknown"
// (no reader), which add up to reader_unknown.
void check_breakdown_line(const std::string &out, const LoReaders &r, const std::string &cgroup, double tcp_records) {
  const Totals tot = interval_totals(out);
  REQUIRE(tot.lines == 1);
  const json &j = tot.last;
  CHECK(j["by"] == json::array({"dport", "proto", "family", "cgroup"}));
  std::map<std::string, json> rows;
  std::map<std::string, uint64_t> unknown_rows;  // packet-only records: no reader, no cgroup
  for (const json &row : j["breakdown"]) {
    const std::string key = std::to_string(row["dport"].get<int>()) + "/" + row["proto"].get<std::string>() + "/" +
                            row["family"].get<std::string>();
    if (row["cgroup"] == "unknown") {
      unknown_rows[key] += row["packets"].get<uint64_t>();
      continue;
    }
    CHECK(row["cgroup"] == cgroup);  // the readers are threads of this process
    rows[key] = row;
  }
  REQUIRE(rows.size() == 3);
  const std::string udp4 = std::to_string(r.udp_port) + "/udp/ipv4", udp6 = std::to_string(r.udp_port) + "/udp/ipv6",
                    tcp4 = std::to_string(r.tcp_port) + "/tcp/ipv4";
  CHECK(j["reader_unknown"].get<uint64_t>() == unknown_rows[udp4] + unknown_rows[udp6] + unknown_rows[tcp4]);
  const json &u4 = rows.at(udp4);
  CHECK(u4["packets"].get<uint64_t>() + unknown_rows[udp4] == 40);
  CHECK(u4["stages"]["total"]["count"] == u4["packets"]);
  CHECK(rows.at(udp6)["packets"].get<uint64_t>() + unknown_rows[udp6] == 25);
  CHECK(rows.at(tcp4)["packets"].get<double>() == tcp_records);
  CHECK_FALSE(u4["stages"].contains("irq"));  // lo has no IRQ line
  // The breakdown's p99 is the series' own: within the interval's range.
  CHECK(u4["stages"]["total"]["p99_ns"].get<uint64_t>() <= j["stages"]["total"]["max_ns"].get<uint64_t>());
}

}  // namespace

TEST_CASE("metrics endpoint: a real scrape while packets flow, exact counts", "[service][metrics]") {
  SKIP_UNLESS_ROOT();
  const uint16_t port = free_port(), metrics_port = free_port(SOCK_STREAM);
  Reader reader("", "udp", 4, "127.0.0.1", port);
  // A 60 s interval: what the scrape shows comes from the drain loop, not from interval lines.
  Daemon nl(netlatd_on_lo(port, {"--interval", "60", "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)}));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  CHECK_THAT(nl->err(), ContainsSubstring("Prometheus metrics on http://127.0.0.1:" + std::to_string(metrics_port)));

  std::string page = scrape(metrics_port);
  REQUIRE(!page.empty());
  CHECK(sample(page, "netlatd_packets_total{proto=\"udp\"}") == 0);
  CHECK_THAT(page, ContainsSubstring(std::string("netlatd_build_info{version=\"") + netlatd::kVersion + "\""));

  // 1 ms apart, so that the reader never falls far behind even on a busy
  // machine (past the per-socket FIFO the tracer counts sock_fifo_full, not
  // measures).
  uint64_t sent = 0;
  const std::string series = "dport=\"" + std::to_string(port) + "\",proto=\"udp\"";
  for (int batch : {50, 100}) {
    send_udp("", 4, "127.0.0.1", port, batch, 64, 1000);
    sent += static_cast<uint64_t>(batch);
    REQUIRE(reader.wait_for(sent, 5000));
    const bool counted = eventually(3000, [&] {
      page = scrape(metrics_port);
      return sample(page, "netlatd_packets_total{proto=\"udp\"}") == static_cast<double>(sent);
    });
    INFO(page);
    REQUIRE(counted);
    check_udp_counts(page, series, sent);
  }
  check_total_buckets(page, series, sent);
  check_other_counters(page);
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  // The port is released with the daemon.
  CHECK_FALSE(http_request("127.0.0.1", metrics_port, "GET", "/metrics", 1000));
}

TEST_CASE("metrics endpoint: a port in use exits 70 with one line and nothing attached", "[service][metrics]") {
  SKIP_UNLESS_ROOT();
  int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(busy, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
  REQUIRE(listen(busy, 1) == 0);
  socklen_t len = sizeof(a);
  getsockname(busy, reinterpret_cast<sockaddr *>(&a), &len);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));

  Exit e = run_netlatd({"--iface", "lo", "--port", "5000", "--metrics-listen", taken});
  close(busy);
  INFO(e.err);
  CHECK(e.code == 70);
  CHECK_THAT(e.err, ContainsSubstring("netlatd: error: metrics endpoint: cannot listen on " + taken +
                                      ": Address already in use\n"));
  CHECK(e.err.find("error") == e.err.rfind("error"));  // one error line
  CHECK(e.err.find("programs attached") == std::string::npos);  // it failed before attaching anything

  e = run_netlatd({"--iface", "lo", "--port", "5000", "--metrics-listen", "127.0.0.1:99999"});
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: --metrics-listen: bad listen address '127.0.0.1:99999': port '99999' is not a "
                 "number in 0-65535\n");
}

TEST_CASE("breakdown: per port, protocol, family and reader cgroup, in JSON and Prometheus, exact counts",
          "[service][metrics][breakdown]") {
  SKIP_UNLESS_ROOT();
  LoReaders readers(free_port(), free_port(SOCK_STREAM));
  const uint16_t metrics_port = free_port(SOCK_STREAM);
  Daemon nl(netlatd_on_lo(readers.udp_port, {"--port", std::to_string(readers.tcp_port), "--interval", "60", "--by",
                                             "dport,proto,family,cgroup", "--metrics-listen",
                                             "127.0.0.1:" + std::to_string(metrics_port)}));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  send_mixed(readers, {40, 1000}, {25, 1000});

  const std::string cgroup = own_cgroup();
  std::string page;
  const bool counted = eventually(3000, [&] {
    page = scrape(metrics_port);
    return sample(page, "netlatd_packets_total{proto=\"udp\"}") == 65 &&
           sample(page, "netlatd_tcp_bytes_total{kind=\"reported\"}") == 3000;
  });
  // Segments the stack coalesced are one record: as many as TCP made.
  const double tcp_records = sample(page, "netlatd_packets_total{proto=\"tcp\"}");
  CHECK(tcp_records >= 1);
  INFO(page);
  REQUIRE(counted);
  // A read tied to no datagram on 6.18 (docs/JOIN.md) leaves its packet's
  // record without a reader, so under cgroup="unknown": counted, and short of
  // the reader's own series by exactly that.
  const double unknown = sample(page, "netlatd_records_reader_unknown_total");
  INFO("records without a reader " << unknown);
  check_breakdown_page(page, readers, cgroup, unknown, tcp_records);

  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  check_breakdown_line(nl->exit().out, readers, cgroup, tcp_records);
}

TEST_CASE("socket activation: the endpoint serves on the socket systemd passes", "[service][metrics]") {
  SKIP_UNLESS_ROOT();
  if (sh_output("command -v systemd-socket-activate").empty())
    SKIP("systemd-socket-activate (package systemd) is not installed");
  const uint16_t port = free_port(), metrics_port = free_port(SOCK_STREAM);
  const std::string listen = "127.0.0.1:" + std::to_string(metrics_port);
  // systemd-socket-activate binds, then runs netlatd with LISTEN_FDS=1 and
  // the socket as fd 3, as a .socket unit does. --metrics-listen names
  // another port, which must stay unused.
  const uint16_t unused = free_port(SOCK_STREAM);
  // It gives the child a fresh environment: NOTIFY_SOCKET is passed on by name.
  std::vector<std::string> argv{"systemd-socket-activate", "-E", "NOTIFY_SOCKET", "-l", listen};
  for (const std::string &a : netlatd_on_lo(port, {"--interval", "60", "--metrics-listen",
                                                   "127.0.0.1:" + std::to_string(unused)}))
    argv.push_back(a);
  Daemon nl(argv);
  INFO(nl->err());
  // Like a socket unit, it starts the service on the first connection: the
  // first scrape waits in the socket's backlog until netlatd answers it.
  REQUIRE(nl->wait_for_stderr("Listening on " + listen, 5000));
  // The scrape on a thread of its own, with no Catch2 assertion there (they
  // are not thread-safe): get() joins it and rethrows here what it threw,
  // and the future joins it if this throws first.
  std::future<std::optional<HttpResponse>> scraper = std::async(
      std::launch::async, [&] { return http_request("127.0.0.1", metrics_port, "GET", "/metrics", 20000); });
  const bool ready = nl.wait_ready(15000);
  const std::optional<HttpResponse> first = scraper.get();
  REQUIRE(ready);
  REQUIRE(first);
  CHECK(first->status == 200);
  CHECK_THAT(first->body, ContainsSubstring("netlatd_build_info{"));
  CHECK_THAT(nl->err(), ContainsSubstring("Prometheus metrics on http://" + listen + "/metrics"));
  CHECK_THAT(nl->err(), ContainsSubstring("serving on the socket systemd passed"));
  CHECK_THAT(scrape(metrics_port), ContainsSubstring("netlatd_packets_total{"));
  CHECK_FALSE(http_request("127.0.0.1", unused, "GET", "/metrics", 500));
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
}
