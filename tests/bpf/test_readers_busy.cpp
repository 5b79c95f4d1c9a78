// Busy TCP servers (issue 11): ten thousand connections open on one watched
// port, bulk streams at full speed, and one read of many small segments.
// Every segment traced (>= 99.9 %), the rest counted under a reason.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_counters.hpp"
#include "net_fixture.hpp"
#include "netlatd_output.hpp"
#include "reader_apps.hpp"
#include "reader_run.hpp"

using nlohmann::json;
using namespace nltest;

namespace {

// Both ends of 10,000 connections are processes this one starts: they
// inherit its limit (and raise their own where they can).
void raise_open_files(rlim_t want) {
  rlimit rl{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  if (rl.rlim_cur >= want)
    return;
  rl.rlim_cur = want;
  rl.rlim_max = std::max(rl.rlim_max, want);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

std::string counted(const Totals &t) {
  std::string s;
  for (const auto &[reason, n] : t.drops)
    if (n)
      s += " " + reason + "=" + std::to_string(n);
  return s.empty() ? " none" : s;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Waits until something listens on TCP port `port` in namespace `ns`.
bool listening(const std::string &ns, uint16_t port) {
  for (int i = 0; i < 200; i++) {
    if (!sh_output("ip netns exec " + ns + " ss -Htln 'sport = :" + std::to_string(port) + "'").empty())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("readers: 10000 concurrent TCP connections to one watched port", "[bpf][readers][busy]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const auto start = std::chrono::steady_clock::now();
  const int conns = scaled(10000), requests = 2, size = 100;  // fewer in the vm tier's TCG guests
  const uint16_t port = 5421;
  raise_open_files(conns + 1024);
  VethNamespaces net;
  // Tuned as a server holding 10,000 connections is: the default accept
  // queue (4,096) is shorter than the connects it may have to hold if the
  // acceptor falls behind, and a dropped handshake is retried after 1 s.
  REQUIRE(sh("ip netns exec " + net.rx_ns + " sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535") ==
          0);
  send_udp(net.tx_ns, 4, net.rx_addr, static_cast<uint16_t>(port + 1000), 1, 16, 0);
  // A ring that holds every record even if the daemon (ASan, a loaded
  // host) drains none in time: what is checked is the kernel side.
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--ringbuf-mb", "8"});
  ReaderApp server(net.rx_ns, "tcp-conns",
                   {"--bind", net.rx_addr, "--port", std::to_string(port), "--conns", std::to_string(conns),
                    "--threads", "2", "--idle-ms", "5000"});
  // Every connection open first, then one request on each in turn, twice:
  // all 10,000 sockets hold traced data at once.
  SenderResult sent = run_senders(net.tx_ns, "tcp-conns",
                                {"--to", net.rx_addr, "--port", std::to_string(port), "--conns",
                                 std::to_string(conns), "--requests", std::to_string(requests), "--size",
                                 std::to_string(size), "--gap-ms", "20"},
                                60000);
  const bool served = server.finish(20000);
  INFO(sent.output);
  INFO(server.output());
  INFO(sh_output("ip netns exec " + net.rx_ns + " nstat -az TcpExtListenOverflows TcpExtListenDrops"));
  CHECK(sent.ok);
  CHECK(served);
  Totals t = stop_netlatd(nl->proc());
  uint64_t bytes = 0;
  for (const ReadEntry &r : server.log().reads)
    bytes += r.len;
  REQUIRE(bytes == static_cast<uint64_t>(conns) * requests * size);

  // TCP_NODELAY and the whole round between two writes of a connection:
  // one write, one segment.
  const uint64_t segments = static_cast<uint64_t>(conns) * requests;
  std::fprintf(stderr, "readers [%d connections]: %llu of %llu segments traced (%.2f %%); counted:%s; %.1f s\n",
               conns, static_cast<unsigned long long>(t.tcp), static_cast<unsigned long long>(segments),
               100.0 * static_cast<double>(t.tcp) / static_cast<double>(segments), counted(t).c_str(),
               seconds_since(start));
  CHECK(t.tcp <= segments);
  CHECK(t.tcp >= segments * 999 / 1000);
  CHECK(t.tcp + t.all_drops() >= segments);
}

// A reader held until a stream of small writes is all queued reads it in
// one call: hundreds or thousands of segments. A read's walk once looked at
// 48 segments: those past the 48th were left behind the next read and
// counted unseen_read, their bytes read but never reported (tcp_bytes.read
// above reported + skipped).
namespace {

// One connection carries `requests` writes of `size` bytes, 1 ms apart
// (TCP_NODELAY: one write, one segment), all queued before its reader's
// first read, which takes many segments at once.
struct ManySegments {
  Totals t;
  uint64_t bytes = 0, largest = 0;
  std::string rx_tcp, tx_tcp;  // the counters each side's stack changed
  long long retransmitted = 0;  // the sender's Tcp.RetransSegs
};

// The sender retransmits only on a real loss: no tail loss probe
// (tcp_early_retrans 0) and no timeout under 5 s, and the receiver acks at
// once. In a TCG guest, late delayed ACKs made the sender probe, and a
// retransmission that straddles the receiver's next byte is queued as one
// skb from the earlier sequence: a gap for the read's walk, counted by name
// (tcp_gap), before the walk reaches its bound.
void quiet_retransmissions(const VethNamespaces &net) {
  REQUIRE(sh("ip netns exec " + net.tx_ns + " sh -c 'echo 0 > /proc/sys/net/ipv4/tcp_early_retrans'") == 0);
  REQUIRE(sh("ip -n " + net.tx_ns + " route replace " + net.rx_addr + "/32 dev " + net.tx_if + " rto_min 5s") == 0);
  REQUIRE(sh("ip -n " + net.rx_ns + " route replace " + net.tx_addr + "/32 dev " + net.rx_if + " quickack 1") == 0);
}

// Whether the rx namespace's connection on `port` is in CLOSE-WAIT: its
// peer's FIN is queued, and TCP takes a FIN only after every byte before it,
// so every byte sent is in the socket's receive queue.
bool all_queued(const std::string &ns, uint16_t port) {
  Process ss({"ip", "netns", "exec", ns, "ss", "-tnH", "state", "close-wait", "sport", "=", ":" + std::to_string(port)});
  return ss.wait(5000) && ss.exit().code == 0 && !ss.exit().out.empty();
}

// One connection of `requests` writes of `size` bytes, every one of them
// queued before the reader's first read: it reads up to 64 KiB a call, so
// the first read takes them all when they fit. Held until the sender has
// closed and its FIN is queued after the last byte; no sleep decides it (a
// reader that slept 7 s read 44,604 of 60,000 bytes first in a slow guest).
ManySegments one_read_of_many_segments(const char *name, uint16_t port, int requests, int size) {
  ManySegments m;
  VethNamespaces net;
  quiet_retransmissions(net);
  auto nl = start_netlatd(net, {"--port", std::to_string(port)});
  const NetCounters rx_before = net_counters(net.rx_ns), tx_before = net_counters(net.tx_ns);
  ReaderApp server(net.rx_ns, "tcp-conns",
                   {"--bind", net.rx_addr, "--port", std::to_string(port), "--conns", "1", "--threads", "1",
                    "--idle-ms", "5000"},
                   ReaderApp::Start::Held);
  // The sender shuts its side, then waits for the server's close: it ends
  // only after the reads, so it runs beside the wait.
  auto sender = std::async(std::launch::async, [&] {
    return run_senders(net.tx_ns, "tcp-conns",
                       {"--to", net.rx_addr, "--port", std::to_string(port), "--conns", "1", "--requests",
                        std::to_string(requests), "--size", std::to_string(size), "--gap-ms", "1"},
                       patient_ms(60000));
  });
  bool queued = false;
  for (int waited = 0; !(queued = all_queued(net.rx_ns, port)) && waited < patient_ms(60000); waited += 50)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.go();
  SenderResult sent = sender.get();
  const bool served = server.finish(20000);
  INFO(sent.output);
  INFO(server.output());
  CHECK(sent.ok);
  CHECK(queued);
  CHECK(served);
  m.t = stop_netlatd(nl->proc());
  for (const ReadEntry &r : server.log().reads) {
    m.bytes += r.len;
    m.largest = std::max<uint64_t>(m.largest, r.len);
  }
  std::fprintf(stderr,
               "readers [%s]: largest read %llu bytes; tcp_bytes read %llu reported %llu skipped %llu; %llu records "
               "of %llu segments; counted:%s\n",
               name, static_cast<unsigned long long>(m.largest), static_cast<unsigned long long>(m.t.tcp_read),
               static_cast<unsigned long long>(m.t.tcp_reported), static_cast<unsigned long long>(m.t.tcp_skipped),
               static_cast<unsigned long long>(m.t.tcp), static_cast<unsigned long long>(m.t.matching),
               counted(m.t).c_str());
  // What TCP did besides: a retransmission or a collapsed queue changes
  // which segments the reads complete.
  const NetCounters tx_after = net_counters(net.tx_ns);
  m.retransmitted = tx_after.at("Tcp.RetransSegs") - tx_before.at("Tcp.RetransSegs");
  m.rx_tcp = counter_changes(rx_before, net_counters(net.rx_ns));
  m.tx_tcp = counter_changes(tx_before, tx_after);
  std::fprintf(stderr, "  the receiver's stack counted:%s\n  the sender's:%s\n", m.rx_tcp.c_str(), m.tx_tcp.c_str());
  return m;
}

}  // namespace

TEST_CASE("readers: one TCP read of a hundred segments and more reports each", "[bpf][readers][busy]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const int requests = 400, size = 100;
  ManySegments m = one_read_of_many_segments("one TCP read of many segments", 5424, requests, size);
  REQUIRE(m.bytes == static_cast<uint64_t>(requests) * size);
  // What is tested: a read past the old walk's 48 segments happened.
  REQUIRE(m.largest > 48 * static_cast<uint64_t>(size));
  CHECK(m.t.drops["unseen_read"] == 0);
  CHECK(m.t.tcp_reported + m.t.tcp_skipped == m.t.tcp_read);
  CHECK(m.t.tcp_read == m.bytes);
}

TEST_CASE("readers: one TCP read of over 4,096 segments counts the rest by name", "[bpf][readers][busy]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const int requests = 5000, size = 12;  // 12: the least nlsenders writes
  ManySegments m = one_read_of_many_segments("one TCP read past the walk's bound", 5425, requests, size);
  REQUIRE(m.bytes == static_cast<uint64_t>(requests) * size);
  // What is tested: one read completed more segments than a walk reports
  // (bpf/tcp/state.bpf.h TCP_READ_WALK).
  REQUIRE(m.largest > 4096 * static_cast<uint64_t>(size));
  const uint64_t too_many = m.t.drops["tcp_read_too_many"], gaps = m.t.drops["tcp_gap"];
  CHECK(m.t.drops["unseen_read"] == 0);
  CHECK(m.t.tcp_read == m.bytes);
  // Every segment is in a record or counted under a reason (tcp_gap counts
  // gaps, not segments).
  CHECK(m.t.tcp + m.t.all_drops() - gaps == m.t.matching);
  if (m.retransmitted == 0) {
    // In order, once each: the walk reached its bound, and counted the
    // rest under that name; nothing else was lost.
    CHECK(too_many > 0);
    CHECK(m.t.all_drops() == too_many);
  } else {
    // A retransmission despite quiet_retransmissions (a stall past 5 s):
    // a gap may come before the bound. Each gap is counted and its bytes
    // skipped; the walk's bound is then not what this run tested.
    std::fprintf(stderr, "  the sender retransmitted %lld segments: the bound is not asserted\n", m.retransmitted);
    CHECK((gaps == 0) == (m.t.tcp_skipped == 0));
  }
}

namespace {

// iperf3 -P 4 for 2 s to `addr`: its server in the rx namespace, its client
// in `client_ns`, netlatd tracing `iface` with a record of every segment.
// The records' payload is held against what the server received; the
// control connection (same port) adds a few hundred bytes of its own.
// Returns whether nearly every byte was in a record (the rest is checked).
bool bulk_streams_covered(const std::string &name, const VethNamespaces &net, const std::string &iface,
                          const std::string &client_ns, const std::string &addr, uint16_t port) {
  const auto start = std::chrono::steady_clock::now();
  const std::string p = std::to_string(port);
  std::vector<std::string> flags{"--port", p};
  for (const std::string &f : every_record_flags())
    flags.push_back(f);
  auto nl = start_netlatd(net, flags, iface);
  Process server({"ip", "netns", "exec", net.rx_ns, "iperf3", "-s", "-1", "-B", addr, "-p", p});
  REQUIRE(listening(net.rx_ns, port));
  Process client({"ip", "netns", "exec", client_ns, "iperf3", "-c", addr, "-p", p, "-t", "2", "-P", "4", "-J"});
  REQUIRE(client.wait(30000));
  REQUIRE(server.wait(10000));
  INFO(client.exit().err);
  REQUIRE(client.exit().code == 0);
  const json result = json::parse(client.exit().out);
  const uint64_t received = result["end"]["sum_received"]["bytes"].get<uint64_t>();
  const double gbits = result["end"]["sum_received"]["bits_per_second"].get<double>() / 1e9;
  Totals t = stop_netlatd(nl->proc());
  uint64_t traced = 0, records = 0;
  for (const json &j : t.outliers)
    if (j.value("proto", "") == "tcp" && j.value("dport", 0) == port) {
      traced += j["len"].get<uint64_t>();
      records++;
    }
  std::fprintf(stderr, "readers [%s, %.1f Gbit/s]: %llu records, %llu of %llu bytes traced (%.2f %%); counted:%s; %.1f s\n",
               name.c_str(), gbits, static_cast<unsigned long long>(records), static_cast<unsigned long long>(traced),
               static_cast<unsigned long long>(received), 100.0 * static_cast<double>(traced) / static_cast<double>(received),
               counted(t).c_str(), seconds_since(start));
  std::fprintf(stderr, "  tcp bytes: read %llu, in records %llu, skipped in counted gaps %llu\n",
               static_cast<unsigned long long>(t.tcp_read), static_cast<unsigned long long>(t.tcp_reported),
               static_cast<unsigned long long>(t.tcp_skipped));
  CHECK(traced <= received + 65536);
  // The daemon's own byte count agrees with its records, and bytes read but
  // in no record are in gaps counted under a reason, or in the one segment
  // per connection (4 streams and the control one) whose last byte was never
  // read: a segment is reported by the read that takes its last byte, and the
  // server closes with data unread.
  CHECK(t.tcp_reported == traced);
  CHECK(t.tcp_read >= received);
  CHECK(t.tcp_reported + t.tcp_skipped + 5 * 65536 >= t.tcp_read);
  return traced * 100 >= received * 99;
}

// Nearly every byte is in a record (99.94-99.98 % on an idle 2-vCPU VM);
// what is not is in gaps counted under tcp_gap, left by BPF runs the kernel
// skipped (hook_misses), which a busy machine makes more of: 99.82 % with a
// compiler running beside it, 98.4 % once in a CI-like run. The accounting
// is the invariant, checked in full on every run; the fraction is a floor
// well under what an idle host gives: a run that misses it gets one more,
// and a change that loses bytes misses both.
void check_bulk_streams(const std::string &name, const VethNamespaces &net, const std::string &iface,
                        const std::string &client_ns, const std::string &addr, uint16_t port) {
  if (bulk_streams_covered(name, net, iface, client_ns, addr, port))
    return;
  WARN(name << ": under 99 % of the bytes in records; once more");
  CHECK(bulk_streams_covered(name, net, iface, client_ns, addr, port));
}

std::string why_no_iperf3() {
  if (auto why = why_no_root_tier(); !why.empty())
    return why;
  if (sh("command -v iperf3 >/dev/null") != 0)
    return "iperf3 is not installed (scripts/install-deps.sh installs it)";
  return "";
}

}  // namespace

TEST_CASE("readers: bulk TCP streams at full speed over the veth (iperf3 -P 4)", "[bpf][readers][busy]") {
  if (auto why = why_no_iperf3(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  check_bulk_streams("iperf3 -P 4 over veth", net, "", net.tx_ns, net.rx_addr, 5422);
}

// Loopback inside the rx namespace: 64 KiB segments, the fastest path there is.
TEST_CASE("readers: bulk TCP streams at full speed over lo (iperf3 -P 4)", "[bpf][readers][busy]") {
  if (auto why = why_no_iperf3(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  check_bulk_streams("iperf3 -P 4 over lo", net, "lo", net.rx_ns, "127.0.0.1", 5423);
}
