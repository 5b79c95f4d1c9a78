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

// The stages every record of a blocking reader has on lo and veth.
const char *kStages[] = {"softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"};

}  // namespace

TEST_CASE("UDP over veth: every stage of every datagram, nothing else", "[bpf][udp]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const uint16_t port = 5301;
  const int n = 200;
  Reader reader(net.rx_ns, "udp", 4, "", port);
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--outliers-over", "0ns", "--outliers-max-per-sec",
                                "1000000"});

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
  // The reader sleeps in recvmsg between datagrams: each read starts at its
  // switch-in after the wake-up. Unless that switch-in was not traced (see
  // the bursts test): then the read's start is left out, never guessed.
  // Or, under load, the reader was still busy with the previous one and
  // found this one queued: no call start on a kernel without fentry.
  uint64_t untraced = 0;
  for (const json &o : t.outliers) {
    if (o["stages"].contains("oncpu"))
      continue;
    INFO(o.dump());
    CHECK_FALSE(o["stamps"].contains("call_start"));
    CHECK_FALSE((o["slept_in_call"] == true && o["stamps"].contains("switch_in")));
    untraced++;
  }
  CHECK(untraced <= n / 10);
  CHECK_FALSE(t.applicable["irq"]);  // veth has no hard IRQ
  // On 6.18 a read is tied to its datagram by queue order once no producer
  // is mid-batch; one still is when its CPU stalls between the data-ready
  // call and the uncharge past the read's wait (2 of 200 in one of some
  // twenty full-tier runs). That read is ambiguous, and its packet written
  // without its reader: the stages up to the queue, never the read's.
  // A packet-only record is of a datagram whose read was not named: an
  // ambiguous read's, or an early one's (named for a gone placeholder that
  // kept the stamps of a datagram a read took under its data-ready call's
  // walk). An untracked read's datagram has no stamps, so no record.
  INFO("records without a reader " << t.reader_unknown << ", ambiguous reads " << t.ambiguous_reads
                                   << ", early reads " << t.early_reads << ", untracked reads " << t.untracked_reads);
  CHECK(t.reader_unknown <= t.ambiguous_reads + t.early_reads);
  CHECK(t.ambiguous_reads <= n / 50);
  for (const char *s : kStages) {
    INFO(s);
    CHECK(t.applicable[s]);
    const std::string name(s);
    // (A record without its reader has no switch-in either: among the
    // untraced above.)
    const bool to_read = name == "in_socket" || name == "total";
    CHECK(t.stage_count[s] ==
          (name == "sock_queue" || name == "oncpu" ? n - untraced : n) - (to_read ? t.reader_unknown : 0));
  }
  CHECK(t.drops["ringbuf_full"] == 0);
  CHECK(t.drops["inflight_full"] == 0);
  CHECK(t.hook_end["oncpu"].find("sock_recv") != std::string::npos);
  // The datagrams over lo were read by the same socket: each read is
  // counted, not named, and none left undecided. By queue order each of the
  // last 20 has a placeholder of its length (a placeholder 8 bytes short,
  // as the data-ready walk once made them, fits no read: those reads went
  // ambiguous).
  // Under load, a read of one of them made while a producer was mid-batch
  // is ambiguous instead (the socket's very first read among them): each
  // of the 250 reads is named, ambiguous, early or untracked, exactly once.
  INFO("untracked reads " << t.untracked_reads << ", ambiguous reads " << t.ambiguous_reads << ", early reads "
                          << t.early_reads);
  CHECK(t.untracked_reads <= 50);
  // (One of the first 30 read before the daemon's first reading of its
  // counts, which came after READY, was once counted in no interval line:
  // in a third of the runs on a loaded host, 249 of 250.)
  CHECK(n - t.reader_unknown + t.ambiguous_reads + t.untracked_reads + t.early_reads == 30 + n + 20);
}

// Back-to-back bursts, each of its own size, from `senders` CPUs at once
// (veth receives on the sender's CPU), read by one thread. Returns what
// netlatd named and counted; checks that every record it named is the
// datagram its read returned, and that records and counts account for every
// read.
struct BurstResult {
  uint64_t reads = 0, named = 0, ambiguous = 0, untracked = 0, early = 0;
};

BurstResult run_bursts(uint16_t port, int senders) {
  VethNamespaces net;
  const int bursts = 20, per_burst = 16;
  Reader reader(net.rx_ns, "udp", 4, "", port);
  auto nl = start_netlatd(net, {"--port", std::to_string(port), "--outliers-over", "0ns", "--outliers-max-per-sec",
                                "1000000"});
  auto sender = [&](int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    for (int b = 0; b < bursts / senders; b++) {
      // A size of its own per burst and sender, so records can be told apart.
      send_udp(net.tx_ns, 4, net.rx_addr, port, per_burst, 100 + cpu * 200 + b, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < senders; c++)
    threads.emplace_back(sender, c);
  for (auto &th : threads)
    th.join();
  REQUIRE(reader.wait_for(bursts * per_burst, 10000));
  Totals t = stop_netlatd(nl->proc());
  Received got = reader.result();
  REQUIRE(got.lengths.size() == static_cast<size_t>(bursts * per_burst));
  // The reader is blocked in its first call when netlatd attaches: where
  // the receive return is fexit/sock_recvmsg (6.1), that call's return is
  // never seen, and its datagram counts unseen_read.
  const uint64_t unseen = t.drops.count("unseen_read") ? t.drops.at("unseen_read") : 0;
  CHECK(unseen <= 1);
  const uint64_t lost = t.untracked_reads + t.ambiguous_reads + t.early_reads + unseen;
  INFO("untracked reads " << t.untracked_reads << ", ambiguous reads " << t.ambiguous_reads << ", early reads "
                          << t.early_reads << ", unseen reads " << unseen << ", records without a reader "
                          << t.reader_unknown);
  std::vector<const json *> named;
  for (const json &o : t.outliers)
    if (o.contains("reader_tid"))
      named.push_back(&o);
  // Every read has a record naming it, or is counted.
  CHECK(named.size() + lost == got.lengths.size());
  // Each packet-only record is of a read counted, not named (see above).
  CHECK(t.reader_unknown <= t.ambiguous_reads + t.early_reads);
  // Named records in the order the reads returned, each with the length
  // read: aligned by skipping exactly the reads counted, never more.
  size_t k = 0, skipped = 0, wrong = 0;
  for (size_t i = 0; i < got.lengths.size(); i++) {
    if (k < named.size() && (*named[k])["len"].get<uint32_t>() == got.lengths[i]) {
      k++;
    } else if (skipped < lost) {
      skipped++;
    } else {
      wrong++;
      k++;
    }
  }
  CHECK(wrong == 0);
  CHECK(k == named.size());
  CHECK(t.unordered == 0);
  // A read that found its datagram already queued (the reader was not asleep
  // in the call) has no call start on a kernel without fentry: its sock_queue
  // and oncpu are left out, never guessed; in_socket holds what it spent in
  // the socket. Back-to-back bursts leave many such reads. A record without
  // a reader still has its packet's own stages.
  for (const char *s : kStages) {
    INFO(s);
    const std::string name(s);
    if (name == "oncpu" || name == "sock_queue")
      CHECK(t.stage_count[s] <= named.size());
    else if (name == "softirq" || name == "netif_receive")
      CHECK(t.stage_count[s] == t.packets);
    else
      CHECK(t.stage_count[s] == named.size());
  }
  for (auto &[name, v] : t.drops) {
    INFO(name);
    // A datagram read before its push leaves its in-flight entry to expire;
    // one whose read was counted and whose slot a resync gave up is counted.
    if (name == "unjoined_reused" || name == "unjoined_expired" || name == "order_given_up")
      CHECK(v <= lost);
    else if (name != "unseen_read")  // checked above, and part of `lost`
      CHECK(v == 0);
  }
  std::fprintf(stderr, "bursts from %d CPU(s): %zu reads, %zu named, %lu ambiguous, %lu untracked, %lu early\n",
               senders, got.lengths.size(), named.size(), static_cast<unsigned long>(t.ambiguous_reads),
               static_cast<unsigned long>(t.untracked_reads), static_cast<unsigned long>(t.early_reads));
  return {got.lengths.size(), named.size(), t.ambiguous_reads, t.untracked_reads, t.early_reads};
}

TEST_CASE("UDP bursts from one CPU: every read named, each the datagram it returned", "[bpf][udp]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  // One CPU feeds the socket: its data-ready calls run in queue order, so a
  // read finds its datagram's slot whenever the queue still holds a later
  // one; with the queue drained it waits a moment for the producer. A read
  // can still take a datagram before its data-ready call runs (6.18 queues a
  // batch, unlocks, then calls data-ready): a few in some runs.
  // Measured: 0-6 of 320 over 48 runs (a read that overtakes its data-ready
  // call, and one more of its burst's equal lengths until that call runs);
  // 11 once, with the host busy elsewhere. The share is a floor of quality
  // on a shared VM, not the invariant (every run checks that in full): a run
  // that misses it gets one more, and a change that makes naming worse
  // misses both.
  auto unnamed = [](const BurstResult &r) { return r.ambiguous + r.untracked + r.early; };
  BurstResult r = run_bursts(5302, 1);
  if (unnamed(r) > r.reads / 40) {
    WARN("UDP bursts from one CPU: " << unnamed(r) << " of " << r.reads << " reads unnamed; once more");
    r = run_bursts(5302, 1);
  }
  CHECK(unnamed(r) <= r.reads / 40);
}

TEST_CASE("UDP bursts from two CPUs at once: every record right, the rest counted", "[bpf][udp]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  // Two CPUs queueing to one socket: a datagram dequeued before its
  // data-ready call ran can be older than a later one's slot until that call
  // runs, so a read is named only once the producer side is quiet, which it
  // waits a moment for: a few reads are left ambiguous (counted, never
  // guessed; docs/JOIN.md).
  // Measured: 316-320 of 320 named over 24 runs; 287 once, with the host
  // busy elsewhere. A floor of quality, once more on a miss (see above).
  BurstResult r = run_bursts(5303, 2);
  if (r.named < r.reads * 9 / 10) {
    WARN("UDP bursts from two CPUs: " << r.named << " of " << r.reads << " reads named; once more");
    r = run_bursts(5303, 2);
  }
  CHECK(r.named >= r.reads * 9 / 10);
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

  // Right or counted (docs/JOIN.md): on 6.18 a packet's stamps are lost when
  // a read takes it before its data-ready call ran (unjoined_reused, or
  // unjoined_expired once the sweep finds it), and a read made while a
  // producer CPU is stalled mid-batch is ambiguous: its packet is written
  // without its reader (reader_unknown), the stages up to the queue kept. Both
  // are rare at 1 ms apart (none in most runs); CI saw one run in some tens
  // short. Either may be a TCP segment's, so UDP is bounded on both sides.
  // And on 6.1 (fexit/sock_recvmsg) the read each reader was blocked in when
  // netlatd attached returns unseen: its datagram or bytes count unseen_read.
  const uint64_t lost = t.drops["unjoined_reused"] + t.drops["unjoined_expired"] + t.drops["unread_expired"] +
                        t.drops["unseen_read"];
  std::fprintf(stderr,
               "IPv6 UDP + TCP: udp %llu of %d, tcp %llu of %d writes, lost %llu, without reader %llu, "
               "ambiguous %llu, bytes read %llu reported %llu skipped %llu\n",
               static_cast<unsigned long long>(t.udp), n6, static_cast<unsigned long long>(t.tcp), writes,
               static_cast<unsigned long long>(lost), static_cast<unsigned long long>(t.reader_unknown),
               static_cast<unsigned long long>(t.ambiguous_reads), static_cast<unsigned long long>(t.tcp_read),
               static_cast<unsigned long long>(t.tcp_reported), static_cast<unsigned long long>(t.tcp_skipped));
  // Every non-zero drop, so that a failure says which reason it met (the
  // 6.1 guest once read 100 TCP bytes more than were reported or skipped,
  // with one datagram or segment lost, and the run did not say why).
  std::string drops;
  for (const auto &[name, n] : t.drops)
    if (n)
      drops += " " + name + "=" + std::to_string(n);
  INFO("lost " << lost << ", records without a reader " << t.reader_unknown << ", ambiguous reads "
               << t.ambiguous_reads << "; drops:" << (drops.empty() ? " none" : drops));
  CHECK(lost <= 3);
  CHECK(t.reader_unknown <= (n6 + writes) / 50);
  CHECK(t.udp <= n6);
  CHECK(t.udp + lost >= n6);
  // Each write is one segment with TCP_NODELAY and 1 ms gaps, unless the
  // sender merged some; never more segments than writes.
  CHECK(t.tcp >= writes * 9 / 10 - lost);
  CHECK(t.tcp <= writes);
  CHECK(t.packets == t.udp + t.tcp);
  CHECK(t.unordered == 0);
  // Every byte the reader read is in a record or in a counted gap; but for
  // the call it was blocked in when netlatd attached, whose return fexit
  // (6.1) does not see: one write at most.
  CHECK(t.tcp_read <= static_cast<uint64_t>(writes) * 100);
  CHECK(t.tcp_read + 100 >= static_cast<uint64_t>(writes) * 100);
  CHECK(t.tcp_reported + t.tcp_skipped == t.tcp_read);
  // 1 ms apart, the readers are asleep in their calls for nearly every packet;
  // one that finds its packet already there has no call start on 6.18, and
  // its sock_queue and oncpu are left out, never guessed. A record without
  // its reader has the stages up to the queue only. A TCP segment queued
  // where tcp_probe does not fire has no queue stamp, counted: the first
  // one can overtake the handshake's last ACK from the other CPU and be
  // queued by tcp_rcv_state_process (1 run in some tens in the 6.1 guest).
  INFO("records without a queue stamp " << t.queue_unseen);
  CHECK(t.queue_unseen <= 3);
  for (const char *s : kStages) {
    INFO(s);
    const std::string name(s);
    const uint64_t read = t.packets - t.reader_unknown;
    if (name == "sock_queue" || name == "oncpu") {
      CHECK(t.stage_count[s] <= read);
      CHECK(t.stage_count[s] >= t.packets * 9 / 10 - t.reader_unknown - t.queue_unseen);
    } else if (name == "in_socket") {
      CHECK(t.stage_count[s] + t.queue_unseen == read);
    } else if (name == "netif_receive") {
      CHECK(t.stage_count[s] + t.queue_unseen == t.packets);
    } else if (name == "total") {
      CHECK(t.stage_count[s] == read);
    } else {
      CHECK(t.stage_count[s] == t.packets);
    }
  }
  CHECK(t.stage_count["sock_queue"] == t.stage_count["oncpu"]);
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
  // A read made while its packet's producer CPU is stalled mid-batch is
  // counted without its reader on 6.18 (docs/JOIN.md), never guessed.
  INFO("records without a reader " << t.reader_unknown);
  CHECK(t.reader_unknown <= 3);
  CHECK(t.stage_count["total"] + t.reader_unknown == 150);
}
