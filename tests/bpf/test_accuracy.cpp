// How accurate netlatd's stamps are: its span of each datagram against the
// kernel's own receive stamp (SO_TIMESTAMPNS) and the reader's clock, over
// the veth pair of tests/support/net_fixture.hpp, the real daemon's records.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "netlatd_output.hpp"
#include "process.hpp"

using nlohmann::json;
using namespace nltest;

// The kernel's own receive stamp (SO_TIMESTAMPNS, taken when veth hands the
// datagram to netif_rx, just before NET_RX is raised) and the reader's clock
// when recvmsg() has returned, against netlatd's twin span of the same
// datagram: softirq_raise -> recv_return. Datagrams pair up one to one: one
// socket, one reader, records in the order the reads returned.
struct Paired {
  std::vector<double> ref, ours, gap;  // gap = ref - ours, per datagram named
  size_t woken = 0;                    // datagrams whose reader slept and was woken for them
  size_t unnamed = 0;                  // records without their read: counted ambiguous
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
  // One reader: it read the datagrams in the order they arrived. The lines
  // come in the order they were written, and a read left ambiguous writes
  // its packet later, without the read (counted, never guessed): pair by
  // arrival, the netif_receive_skb stamp every record has.
  std::vector<json> lines(t.outliers.begin(), t.outliers.end());
  std::stable_sort(lines.begin(), lines.end(), [](const json &a, const json &b) {
    return a["stamps_mono_ns"]["netif_receive_skb"].get<uint64_t>() <
           b["stamps_mono_ns"]["netif_receive_skb"].get<uint64_t>();
  });
  Paired p;
  for (size_t i = 0; i < lines.size(); i++) {
    const json &line = lines[i];
    const json &off = line["offsets_ns"];
    if (!off.contains("recv_return")) {
      p.unnamed++;
      continue;
    }
    double start = off.contains("softirq_raise") ? off["softirq_raise"].get<double>() : off["softirq_entry"].get<double>();
    double ours = off["recv_return"].get<double>() - start;
    double ref = static_cast<double>(got.kernel_to_user_ns[i]);
    p.ours.push_back(ours);
    p.ref.push_back(ref);
    p.gap.push_back(ref - ours);
    // The reader is a thread of this test process: its name and pid.
    CHECK(line["reader_comm"].get<std::string>() == self_comm());
    CHECK(line["reader_pid"].get<int>() == static_cast<int>(getpid()));
    if (line["woken"].get<bool>()) {
      // The wake-up lies after the enqueue, and before the reader's
      // switch-in when that is traced (see the bursts test on untraced ones).
      REQUIRE(off.contains("wakeup"));
      CHECK(off["wakeup"].get<double>() >= off["sock_queue"].get<double>());
      // Asleep in recvmsg: the read starts at that switch-in.
      CHECK(line["slept_in_call"].get<bool>());
      if (off.contains("switch_in")) {
        CHECK(off["wakeup"].get<double>() <= off["switch_in"].get<double>());
        CHECK(off["read_start"] == off["switch_in"]);
      } else {
        CHECK_FALSE(off.contains("read_start"));
      }
      p.woken++;
    }
  }
  // Each unnamed read is counted: one reader blocked in recvmsg is named
  // unless its read overtook the datagram's data-ready call and the producer
  // CPU stayed busy past the wait (docs/JOIN.md; a loaded host, now and then).
  INFO("records without their read " << p.unnamed << ", ambiguous reads " << t.ambiguous_reads);
  CHECK(p.unnamed <= t.ambiguous_reads);
  CHECK(p.unnamed <= static_cast<size_t>(n) / 10);
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
  // small beside the latency: 5 us at most on a quiet machine, where the
  // spans' p50 is some 10-30 us. A loaded one preempts the reader between
  // the syscall's return and its clock, which only ever adds to the gap (CI
  // runs: a p50 of 5.5 us at spans of 40 us, 7.8 us at 90 us, 7.7 us at 39
  // us with a p99 of 2.4 ms; a p25 of 5.1 us on a host with a guest spinning
  // beside). So the datagrams read in a quiet moment judge netlatd's stamps:
  // a tenth of them (20) within 5 us (a stamp off by more, either way, fails
  // this); and the median, preemption and all, stays small beside the span.
  for (size_t i = 0; i < p.gap.size(); i++) {
    INFO("datagram " << i << ": SO_TIMESTAMPNS " << p.ref[i] << " ns, netlatd " << p.ours[i] << " ns");
    CHECK(p.gap[i] >= -1000.0);
  }
  CHECK(percentile(p.gap, 10) <= 5000.0);
  CHECK(percentile(p.gap, 50) <= std::max(10000.0, percentile(p.ref, 50) / 4));
  // The reader sleeps in recvmsg between datagrams 2 ms apart: each one wakes it.
  CHECK(p.woken >= p.gap.size() * 9 / 10);
}
