// The real daemon on the real kernel with real packets: a veth pair between
// two namespaces this test creates, a real reader calling recvmsg(), and the
// JSON lines netlatd writes. Counts are asserted exactly.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "process.hpp"

using nlohmann::json;
using namespace nltest;

namespace {

const char *kStages[] = {"softirq", "netif_receive", "sock_queue", "oncpu", "total"};

struct Totals {
  uint64_t packets = 0, udp = 0, tcp = 0, unordered = 0;
  std::map<std::string, uint64_t> stage_count;
  std::map<std::string, uint64_t> drops;
  std::map<std::string, bool> applicable;
  std::map<std::string, std::string> hook_end;
  std::vector<json> outliers;
  bool saw_final = false;
};

Totals parse_lines(const std::string &out) {
  Totals t;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    json j = json::parse(line);
    if (j["type"] == "outlier") {
      t.outliers.push_back(j);
      continue;
    }
    REQUIRE(j["type"] == "interval");
    REQUIRE(j["schema"] == 1);
    t.packets += j["packets"].get<uint64_t>();
    t.udp += j["udp"].get<uint64_t>();
    t.tcp += j["tcp"].get<uint64_t>();
    t.unordered += j.value("unordered", 0);
    if (j.value("final", false))
      t.saw_final = true;
    for (auto &[name, st] : j["stages"].items()) {
      t.applicable[name] = st["applicable"].get<bool>();
      t.hook_end[name] = st["hook_end"].get<std::string>();
      if (st.contains("count"))
        t.stage_count[name] += st["count"].get<uint64_t>();
    }
    for (auto &[name, v] : j["drops"].items())
      t.drops[name] += v.get<uint64_t>();
  }
  return t;
}

// netlatd inside the receiving namespace, tracing its end of the veth.
std::unique_ptr<Daemon> start_netlatd(const VethNamespaces &net, const std::vector<std::string> &extra) {
  std::vector<std::string> argv{"ip", "netns", "exec", net.rx_ns, NETLATD_BINARY, "--iface", net.rx_if,
                                "--interval", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto d = std::make_unique<Daemon>(argv);
  INFO(d->proc().err());
  REQUIRE(d->wait_ready(15000));
  return d;
}

Totals stop(Process &p) {
  p.signal(SIGTERM);
  REQUIRE(p.wait(3000));
  INFO(p.exit().err);
  REQUIRE(p.exit().code == 0);
  if (getenv("NETLATD_TEST_VERBOSE")) fprintf(stderr, "%s\n", p.exit().err.c_str());
  Totals t = parse_lines(p.exit().out);
  CHECK(t.saw_final);
  return t;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

TEST_CASE("UDP over veth: every stage of every datagram, nothing else", "[bpf][udp][!mayfail]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5301;
  const int n = 200;
  Reader reader(net.rx_ns, "udp", 4, "", port);
  auto nl = start_netlatd(net, {"--port", std::to_string(port)});

  // Not to be counted: the same port over another interface (lo of the
  // receiving namespace, read by the same socket), and another port.
  send_udp(net.rx_ns, 4, "127.0.0.1", port, 30, 100, 500);
  send_udp(net.tx_ns, 4, net.rx_addr, port + 1, 30, 100, 200);
  send_udp(net.tx_ns, 4, net.rx_addr, port, n, 200, 1000);
  send_udp(net.rx_ns, 4, "127.0.0.1", port, 20, 100, 500);
  REQUIRE(reader.wait_for(30 + n + 20, 10000));
  Totals t = stop(nl->proc());

  CHECK(t.packets == n);
  CHECK(t.udp == n);
  CHECK(t.tcp == 0);
  CHECK(t.unordered == 0);
  CHECK_FALSE(t.applicable["irq"]);  // veth has no hard IRQ
  for (const char *s : kStages) {
    INFO(s);
    CHECK(t.applicable[s]);
    CHECK(t.stage_count[s] == n);
  }
  CHECK(t.drops["ringbuf_full"] == 0);
  CHECK(t.drops["inflight_full"] == 0);
  CHECK(t.hook_end["oncpu"].find("sock_recv") != std::string::npos);
}

TEST_CASE("IPv6 UDP and a TCP stream, several ports", "[bpf][tcp][ipv6][!mayfail]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t udp_port = 5311, tcp_port = 5312;
  const int n6 = 100, writes = 100;
  Reader udp6(net.rx_ns, "udp", 6, "", udp_port);
  Reader tcp(net.rx_ns, "tcp", 4, "", tcp_port);
  auto nl = start_netlatd(net, {"--port", std::to_string(udp_port), "--port", std::to_string(tcp_port)});

  send_udp(net.tx_ns, 6, net.rx_addr6, udp_port, n6, 300, 1000);
  send_tcp(net.tx_ns, 4, net.rx_addr, tcp_port, writes, 100, 1000);
  REQUIRE(udp6.wait_for(n6, 10000));
  REQUIRE(tcp.wait_for(static_cast<uint64_t>(writes) * 100, 10000));
  Totals t = stop(nl->proc());

  CHECK(t.udp == n6);
  // Each write is one segment with TCP_NODELAY and 1 ms gaps, unless the
  // sender merged some; never more segments than writes.
  CHECK(t.tcp >= writes * 9 / 10);
  CHECK(t.tcp <= writes);
  CHECK(t.packets == t.udp + t.tcp);
  CHECK(t.unordered == 0);
  for (const char *s : kStages) {
    INFO(s);
    CHECK(t.stage_count[s] == t.packets);
  }
}

TEST_CASE("loopback: exactly the datagrams sent to the watched port", "[bpf][udp][lo][!mayfail]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const uint16_t port = 47321;
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Reader other("", "udp", 4, "127.0.0.1", port + 1);
  std::vector<std::string> argv{NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(port), "--interval", "1"};
  Daemon nl(argv);
  REQUIRE(nl.wait_ready(15000));
  send_udp("", 4, "127.0.0.1", port, 150, 64, 500);
  send_udp("", 4, "127.0.0.1", port + 1, 50, 64, 500);
  REQUIRE(reader.wait_for(150, 10000));
  REQUIRE(other.wait_for(50, 10000));
  Totals t = stop(nl.proc());
  CHECK(t.packets == 150);
  CHECK(t.stage_count["total"] == 150);
}

TEST_CASE("accuracy against the kernel's own SO_TIMESTAMPNS stamp", "[bpf][accuracy][!mayfail]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5321;
  const int n = 300;
  Reader reader(net.rx_ns, "udp", 4, "", port, /*timestamps=*/true);
  // Every packet's timeline, so each reference span has its netlatd twin.
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--outliers-over", "0ns",
                                "--outliers-max-per-sec", "1000000"});
  send_udp(net.tx_ns, 4, net.rx_addr, port, n, 200, 2000);
  REQUIRE(reader.wait_for(n, 10000));
  Totals t = stop(nl->proc());
  Received got = reader.result();
  REQUIRE(got.kernel_to_user_ns.size() == static_cast<size_t>(n));
  REQUIRE(t.outliers.size() == static_cast<size_t>(n));

  // SO_TIMESTAMPNS is taken when veth hands the packet to netif_rx, just
  // before it raises NET_RX; the reader reads its clock when recvmsg returns.
  // netlatd's twin span: softirq_raise (or softirq_entry) -> recv_return.
  std::vector<double> ref, ours;
  for (int64_t v : got.kernel_to_user_ns)
    ref.push_back(static_cast<double>(v));
  for (const json &o : t.outliers) {
    const json &off = o["offsets_ns"];
    double start = off.contains("softirq_raise") ? off["softirq_raise"].get<double>() : off["softirq_entry"].get<double>();
    ours.push_back(off["recv_return"].get<double>() - start);
  }
  for (double p : {50.0, 99.0}) {
    double r = percentile(ref, p), o = percentile(ours, p);
    INFO("p" << p << ": SO_TIMESTAMPNS " << r << " ns, netlatd " << o << " ns");
    CHECK(std::abs(o - r) <= 0.10 * r);
  }
}
