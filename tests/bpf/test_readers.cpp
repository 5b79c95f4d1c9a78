// Records that are right or counted, never wrong (issue 11): several threads
// reading one UDP socket in bursts, and sockets opened and closed by the
// thousand. The real daemon writes a record of every packet; nlreaders logs
// what each of its receive calls returned, and when; every record must name
// the thread whose call returned its datagram, or say it cannot.
#include <algorithm>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "reader_run.hpp"

using namespace nltest;

namespace {

struct MultiReaderCase {
  int threads;
  int family;
  std::string call;
  bool equal_lengths;
  int bursts, burst_size;
  uint16_t port;
};

std::string name_of(const MultiReaderCase &c) {
  return std::to_string(c.threads) + " threads, ipv" + std::to_string(c.family) + ", " + c.call + ", " +
         (c.equal_lengths ? "equal" : "distinct") + " lengths";
}

// Bursts from both CPUs at once (veth receives on the sender's CPU), no gap
// inside a burst, and a pause after it long enough for the readers to drain
// the socket. Distinct lengths: datagram i is 16 + i bytes long; jumbo
// frames keep the longest (4,111 bytes) in one piece. A run has 4,096
// datagrams: today's wrong records come after a race that shifts the rest,
// and a short run can miss it.
void run_multi_reader(const MultiReaderCase &c, const std::vector<std::string> &netlatd_args = {}) {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  net.set_mtu(9000);
  const int bursts = scaled(c.bursts);  // fewer in the vm tier's TCG guests
  const int n = bursts * c.burst_size;
  ReaderRunSpec spec = udp_spec(net, c.port, c.family, static_cast<size_t>(n));
  spec.reader_args = {"--bind", spec.to, "--threads", std::to_string(c.threads), "--call", c.call,
                      "--vlen", "8", "--expect", std::to_string(n)};
  spec.sender_args = {"--to", spec.to, "--threads", "2", "--bursts", std::to_string(bursts),
                      "--burst-size", std::to_string(c.burst_size), "--gap-us", "4000",
                      "--lengths", c.equal_lengths ? "equal" : "distinct", "--len", "200"};
  spec.netlatd_args = netlatd_args;
  ReaderRun run = run_readers(net, spec);
  report(name_of(c), run);
  // Equal lengths: only the source port tells one datagram's record from
  // another's.
  if (c.equal_lengths && !run.verdict.sport_seen)
    SKIP("netlatd's records have no `sport` (schema 2): equal-length datagrams cannot be told apart");
  check_no_wrong_records(run);
  if (std::find(netlatd_args.begin(), netlatd_args.end(), "--aggregate-check") != netlatd_args.end()) {
    INFO(run.totals.err);
    CHECK(run.totals.err.find("aggregate check: the kernel side's histograms equal") != std::string::npos);
  }
  // A blocking reader's oncpu: from its switch-in inside the call (it
  // slept there) or the call's start; never from before the call.
  check_oncpu_known(run);
}

}  // namespace

TEST_CASE("readers: 4 threads on one UDP socket, IPv4, recvfrom, distinct lengths", "[bpf][readers]") {
  run_multi_reader({4, 4, "recvfrom", false, 128, 32, 5401});
}

TEST_CASE("readers: 4 threads on one UDP socket, IPv6, recv, distinct lengths", "[bpf][readers]") {
  run_multi_reader({4, 6, "recv", false, 128, 32, 5402});
}

TEST_CASE("readers: 8 threads on one UDP socket, IPv4, recvmsg, distinct lengths", "[bpf][readers]") {
  run_multi_reader({8, 4, "recvmsg", false, 64, 64, 5403});
}

TEST_CASE("readers: 8 threads on one UDP socket, IPv6, recvmmsg, distinct lengths", "[bpf][readers]") {
  run_multi_reader({8, 6, "recvmmsg", false, 64, 64, 5404});
}

TEST_CASE("readers: 16 threads on one UDP socket, IPv4, recvmmsg, distinct lengths", "[bpf][readers]") {
  run_multi_reader({16, 4, "recvmmsg", false, 16, 256, 5405});
}

TEST_CASE("readers: 16 threads on one UDP socket, IPv6, recvfrom, distinct lengths", "[bpf][readers]") {
  run_multi_reader({16, 6, "recvfrom", false, 16, 256, 5406});
}

TEST_CASE("readers: 4 threads on one UDP socket, IPv6, recvmsg, equal lengths", "[bpf][readers]") {
  run_multi_reader({4, 6, "recvmsg", true, 128, 32, 5407});
}

TEST_CASE("readers: 8 threads on one UDP socket, IPv4, recv, equal lengths", "[bpf][readers]") {
  run_multi_reader({8, 4, "recv", true, 64, 64, 5408});
}

TEST_CASE("readers: 16 threads on one UDP socket, IPv4, recvmmsg, equal lengths", "[bpf][readers]") {
  run_multi_reader({16, 4, "recvmmsg", true, 16, 256, 5409});
}

// --aggregate-check: every record added to the kernel's histograms as well
// as written; the same verdict on every record, and at exit the daemon finds
// the kernel's histograms equal to those records, bucket by bucket (it exits
// 70 when they differ, which stop_netlatd fails on).
TEST_CASE("readers: 8 threads, bursts from both CPUs, histograms kept in the kernel equal the records",
          "[bpf][readers][aggregate]") {
  MultiReaderCase c{8, 4, "recvmsg", false, 64, 64, 5410};
  run_multi_reader(c, {"--aggregate-check"});
}

// A new socket at the address of one just closed, 2,000 times: each round's
// socket reads two datagrams and is closed with a third maybe still queued.
// No record may carry another socket's datagram or reader. The third is
// freed later by an RCU callback, in a softirq that may run on the next
// socket's read: it is not that read's drop. When it was taken for one (the
// read-drop settle then found no slot of it and gave the new socket's slots
// up), runs counted order_lost 2-3, stack_dropped 600-850 and left a third
// of the reads ambiguous.
TEST_CASE("readers: 2000 UDP sockets opened and closed at one address", "[bpf][readers][churn]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const int n_rounds = scaled(2000);
  const std::string rounds = std::to_string(n_rounds);
  ReaderRunSpec spec;
  spec.port = 5411;
  spec.to = net.rx_addr;
  spec.reader_mode = "udp-churn";
  spec.reader_args = {"--bind", net.rx_addr, "--peer", net.tx_addr, "--peer-port", "5412", "--rounds", rounds,
                      "--per-round", "2"};
  spec.sender_mode = "udp-churn";
  spec.sender_args = {"--to", net.rx_addr, "--listen-port", "5412", "--rounds", rounds, "--per-round", "3"};
  spec.expect_reads = static_cast<size_t>(2 * n_rounds);
  ReaderRun run = run_readers(net, spec);
  report("UDP socket churn", run);
  check_no_wrong_records(run);
  const auto lost = run.totals.drops.count("order_lost") ? run.totals.drops.at("order_lost") : 0;
  CHECK(lost == 0);
  // Most named: the rest are counted (a stash entry reused before its
  // datagram was joined, a producer mid-batch), 0.1-0.3 % here.
  CHECK(run.verdict.right >= run.log.reads.size() * 95 / 100);
}

// Short-lived connections: accepted sockets come and go, and the kernel
// hands a new one the memory of one just freed.
TEST_CASE("readers: 2000 TCP connections with one request each", "[bpf][readers][churn]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  ReaderRunSpec spec = one_request_per_connection(net, 5413, scaled(2000));
  ReaderRun run = run_readers(net, spec);
  report("TCP connection churn", run);
  check_no_wrong_records(run);
}

// A listener with TCP_DEFER_ACCEPT (nginx's `deferred`, haproxy's
// `defer-accept`) ignores the handshake's last ACK: the request's first
// segment creates the connection, and the kernel queues its data while it
// finishes the handshake, where tcp_probe does not run. The same happens
// without the option when that segment overtakes the ACK from another CPU.
// Each request is then the connection's only data, read with nothing stamped
// at tcp_probe: every read must still be named.
TEST_CASE("readers: one TCP connection per request to a TCP_DEFER_ACCEPT listener", "[bpf][readers][churn]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const int requests = scaled(300);
  ReaderRunSpec spec = one_request_per_connection(net, 5414, requests, {"--defer-accept"});
  ReaderRun run = run_readers(net, spec);
  report("TCP_DEFER_ACCEPT listener", run);
  check_no_wrong_records(run);
  // One reader per connection and one segment per request: nothing is
  // ambiguous, so every read has its record.
  CHECK(run.verdict.right == static_cast<size_t>(requests));
  // None of them has a queue stamp, and each is counted so.
  CHECK(run.totals.queue_unseen == static_cast<uint64_t>(requests));
}
