// The real daemon on the real kernel with real packets: a veth pair between
// two namespaces this test creates, a real reader calling recvmsg(), and the
// JSON lines netlatd writes. Counts are asserted exactly.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "netlatd_output.hpp"
#include "process.hpp"

using nlohmann::json;
using namespace nltest;

namespace {

const char *kStages[] = {"softirq", "netif_receive", "sock_queue", "oncpu", "total"};

}  // namespace

TEST_CASE("UDP over veth: every stage of every datagram, nothing else", "[bpf][udp]") {
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
  Totals t = stop_netlatd(nl->proc());

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

TEST_CASE("UDP bursts: back-to-back datagrams queued in batches are each joined", "[bpf][udp]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5302;
  const int bursts = 20, per_burst = 16;
  Reader reader(net.rx_ns, "udp", 4, "", port);
  // Every datagram's timeline: each record must be of the datagram its read returned.
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--outliers-over", "0ns", "--outliers-max-per-sec",
                                "1000000"});
  // No gap inside a burst, and two senders on two CPUs at once (veth receives
  // on the sender's CPU): the kernel may queue several datagrams before one
  // data-ready call; fewer than the socket FIFO's slots are ever unread.
  auto sender = [&](int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    for (int b = 0; b < bursts / 2; b++) {
      // A size of its own per burst and sender, so records can be told apart.
      send_udp(net.tx_ns, 4, net.rx_addr, port, per_burst, 100 + cpu * 200 + b, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  std::thread a(sender, 0), b(sender, 1);
  a.join();
  b.join();
  REQUIRE(reader.wait_for(bursts * per_burst, 10000));
  Totals t = stop_netlatd(nl->proc());
  Received got = reader.result();
  REQUIRE(got.lengths.size() == static_cast<size_t>(bursts * per_burst));
  // Every read has its record, or is counted. The one loss allowed: on 6.18
  // a reader on the other CPU can take a datagram between its queueing and
  // the data-ready call that announces it (batched producers widen that
  // window), and no hook names the skb a UDP read took; netlatd counts that
  // read as untracked_dequeue. Seen in a few per cent of runs, one or two
  // datagrams of the 320.
  const uint64_t lost = t.drops["untracked_dequeue"];
  CHECK(t.packets + lost == got.lengths.size());
  CHECK(lost <= 3);
  // Records in the order the reads returned, each with the length read:
  // aligned by skipping exactly the reads counted as lost, never more.
  size_t k = 0, skipped = 0, wrong = 0;
  for (size_t i = 0; i < got.lengths.size(); i++) {
    if (k < t.outliers.size() && t.outliers[k]["len"].get<uint32_t>() == got.lengths[i]) {
      k++;
    } else if (skipped < lost) {
      skipped++;
    } else {
      if (getenv("NETLATD_TEST_VERBOSE") && wrong < 3) {
        std::string rd, rec;
        for (size_t j = (i > 5 ? i - 5 : 0); j < std::min(i + 6, got.lengths.size()); j++)
          rd += std::to_string(got.lengths[j]) + " ";
        for (size_t j = (k > 5 ? k - 5 : 0); j < std::min(k + 6, t.outliers.size()); j++)
          rec += std::to_string(t.outliers[j]["len"].get<uint32_t>()) + "@" +
                 std::to_string(t.outliers[j]["rx_cpu"].get<int>()) + " ";
        std::fprintf(stderr, "at read %zu: %s\n  record %zu: %s\n", i, rd.c_str(), k, rec.c_str());
      }
      wrong++;
      k++;
    }
  }
  CHECK(wrong == 0);
  CHECK(k == t.outliers.size());
  CHECK(t.unordered == 0);
  // The on-CPU stamp is the reader's switch-in, the CPU's last traced
  // sched_switch. On the machines we test on, the sandbox agent's threads
  // (pid 1's) are switched in with a sched_switch event but out without one
  // (the kernel's own event shows it too): a reader switched in from one of
  // them has no traced switch-in, and its reads until the next switch carry no
  // on-CPU stamp (nor the sock_queue stage, which ends there). One burst's
  // reads at most in the runs seen; the stamp is left out, never guessed.
  const uint64_t no_oncpu = t.packets - t.stage_count["oncpu"];
  CHECK(no_oncpu <= 2 * per_burst);
  for (const char *s : kStages) {
    INFO(s);
    if (std::string(s) == "oncpu" || std::string(s) == "sock_queue")
      CHECK(t.stage_count[s] == t.packets - no_oncpu);
    else
      CHECK(t.stage_count[s] == t.packets);
  }
  for (auto &[name, v] : t.drops) {
    INFO(name);
    if (name == "untracked_dequeue")
      continue;
    // A lost datagram's in-flight entry is reclaimed (and counted) once more
    // when its skb address is reused or the entry expires.
    if (name == "unjoined_reused" || name == "unjoined_expired")
      CHECK(v <= lost);
    else
      CHECK(v == 0);
  }
}

TEST_CASE("IPv6 UDP and a TCP stream, several ports", "[bpf][tcp][ipv6]") {
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
  Totals t = stop_netlatd(nl->proc());

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

TEST_CASE("loopback: exactly the datagrams sent to the watched port", "[bpf][udp][lo]") {
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
  Totals t = stop_netlatd(nl.proc());
  CHECK(t.packets == 150);
  CHECK(t.stage_count["total"] == 150);
}

// The kernel's own receive stamp (SO_TIMESTAMPNS, taken when veth hands the
// datagram to netif_rx, just before NET_RX is raised) and the reader's clock
// when recvmsg() has returned, against netlatd's twin span of the same
// datagram: softirq_raise -> recv_return. Datagrams pair up one to one: one
// socket, one reader, records in the order the reads returned.
struct Paired {
  std::vector<double> ref, ours, gap;  // gap = ref - ours, per datagram
  size_t woken = 0;                    // datagrams whose reader slept and was woken for them
};

std::string self_comm() {
  std::string name = sh_output("cat /proc/" + std::to_string(getpid()) + "/comm");
  while (!name.empty() && name.back() == '\n')
    name.pop_back();
  return name;
}

Paired measure_pairs(Reader &reader, const VethNamespaces &net, uint16_t port, int bursts, int per_burst,
                     int burst_gap_us) {
  // Resolve the neighbour first: a datagram held back for ARP joins the NET_RX
  // run that the ARP exchange started, and that run's raise is its start.
  send_udp(net.tx_ns, 4, net.rx_addr, static_cast<uint16_t>(port + 100), 1, 16, 0);
  // Every datagram's timeline, so each reference span has its netlatd twin.
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--outliers-over", "0ns", "--outliers-max-per-sec",
                                "1000000"});
  for (int b = 0; b < bursts; b++) {
    send_udp(net.tx_ns, 4, net.rx_addr, port, per_burst, 200, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(burst_gap_us));
  }
  const int n = bursts * per_burst;
  REQUIRE(reader.wait_for(static_cast<uint64_t>(n), 20000));
  Totals t = stop_netlatd(nl->proc());
  Received got = reader.result();
  REQUIRE(got.kernel_to_user_ns.size() == static_cast<size_t>(n));
  REQUIRE(t.outliers.size() == static_cast<size_t>(n));
  Paired p;
  for (size_t i = 0; i < t.outliers.size(); i++) {
    const json &off = t.outliers[i]["offsets_ns"];
    REQUIRE(off.contains("recv_return"));
    double start = off.contains("softirq_raise") ? off["softirq_raise"].get<double>() : off["softirq_entry"].get<double>();
    double ours = off["recv_return"].get<double>() - start;
    double ref = static_cast<double>(got.kernel_to_user_ns[i]);
    p.ours.push_back(ours);
    p.ref.push_back(ref);
    p.gap.push_back(ref - ours);
    // The reader is a thread of this test process: its name and pid.
    CHECK(t.outliers[i]["reader_comm"].get<std::string>() == self_comm());
    CHECK(t.outliers[i]["reader_pid"].get<int>() == static_cast<int>(getpid()));
    if (t.outliers[i]["woken"].get<bool>()) {
      // The wake-up lies between the enqueue and the reader's switch-in.
      REQUIRE(off.contains("wakeup"));
      CHECK(off["wakeup"].get<double>() >= off["sock_queue"].get<double>());
      CHECK(off["wakeup"].get<double>() <= off["oncpu"].get<double>());
      p.woken++;
    }
  }
  return p;
}

void print_pairs(const char *what, const Paired &p) {
  std::fprintf(stderr, "accuracy (%s): SO_TIMESTAMPNS p50 %.0f p99 %.0f ns; netlatd p50 %.0f p99 %.0f ns; "
                       "per-datagram difference p50 %.0f p99 %.0f ns\n",
               what, percentile(p.ref, 50), percentile(p.ref, 99), percentile(p.ours, 50), percentile(p.ours, 99),
               percentile(p.gap, 50), percentile(p.gap, 99));
}

TEST_CASE("accuracy against SO_TIMESTAMPNS: datagrams waiting in the queue", "[bpf][accuracy]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5321;
  Reader reader(net.rx_ns, "udp", 4, "", port, /*timestamps=*/true);
  // A slow application: bursts of 5 back to back, read 500 us apart, so the
  // spans run from ~10 us to ~2 ms: the latency netlatd exists to explain.
  reader.pause_after_each(500);
  Paired p = measure_pairs(reader, net, port, 40, 5, 5000);
  print_pairs("queued", p);
  for (double q : {50.0, 99.0}) {
    double r = percentile(p.ref, q), o = percentile(p.ours, q);
    INFO("p" << q << ": SO_TIMESTAMPNS " << r << " ns, netlatd " << o << " ns");
    CHECK(std::abs(o - r) <= 0.10 * r);
  }
}

TEST_CASE("accuracy against SO_TIMESTAMPNS: a reader waiting in recvmsg", "[bpf][accuracy]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5322;
  Reader reader(net.rx_ns, "udp", 4, "", port, /*timestamps=*/true);
  Paired p = measure_pairs(reader, net, port, 200, 1, 2000);
  print_pairs("fast reader", p);
  // netlatd's span lies inside the reference one: it starts at the NET_RX
  // raise just after the kernel's stamp and ends when the socket layer
  // returns, before the syscall's exit path and the reader's clock_gettime().
  // That difference is all the reference sees that netlatd does not; it is
  // small and does not grow with the latency.
  for (size_t i = 0; i < p.gap.size(); i++) {
    INFO("datagram " << i << ": SO_TIMESTAMPNS " << p.ref[i] << " ns, netlatd " << p.ours[i] << " ns");
    CHECK(p.gap[i] >= -1000.0);
  }
  CHECK(percentile(p.gap, 50) <= 5000.0);
  // The reader sleeps in recvmsg between datagrams 2 ms apart: each one wakes it.
  CHECK(p.woken >= p.gap.size() * 9 / 10);
}
