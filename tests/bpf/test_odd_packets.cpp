// Odd packets and odd reads (issue 14, item 4): each datagram is either
// counted once with the stamps of the call that returned it, or left out
// and counted; never a crash, never a record that names the wrong read.
// Datagrams of distinct lengths, each checked against what the receiving
// application's calls returned (tests/support/record_check.*).
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "reader_run.hpp"

using namespace nltest;

namespace {

struct OddCase {
  std::string name;
  int family = 4;
  std::string call = "recvfrom";
  std::vector<std::string> reader_extra;
  int mtu = 9000;
  long base_len = 200;
  int bursts = 16, burst_size = 32;
  uint16_t port = 0;
};

ReaderRun run_odd(const OddCase &c) {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  net.set_mtu(c.mtu);
  const int n = c.bursts * c.burst_size;
  ReaderRunSpec spec = udp_spec(net, c.port, c.family, static_cast<size_t>(n));
  spec.reader_args = {"--bind", spec.to, "--call", c.call, "--expect", std::to_string(n)};
  spec.reader_args.insert(spec.reader_args.end(), c.reader_extra.begin(), c.reader_extra.end());
  spec.sender_args = {"--to", spec.to, "--bursts", std::to_string(c.bursts), "--burst-size",
                      std::to_string(c.burst_size), "--gap-us", "4000", "--lengths", "distinct", "--base-len",
                      std::to_string(c.base_len)};
  ReaderRun run = run_readers(net, spec);
  report(c.name, run);
  check_no_wrong_records(run);
  return run;
}

}  // namespace

// 1,300 to 1,811 bytes over a 1,500-byte MTU: the longer ones arrive in two
// fragments, reassembled before the socket; the shorter ones in one frame.
// A fragment is never taken for the datagram: a first fragment's length is
// not the datagram's, and the reassembled datagram never passes
// netif_receive_skb. So records exist only for datagrams that fit a frame
// (up to 1,472 bytes of IPv4 payload, 1,452 of IPv6), each right; the
// reads of the others are counted among those no record names.
void check_fragments(const ReaderRun &run, long base_len, long largest_whole) {
  const auto whole = static_cast<size_t>(largest_whole - base_len + 1);
  CHECK(run.records.size() <= whole);
  CHECK(run.verdict.right >= whole * 9 / 10);
  for (const Record &r : run.records) {
    INFO("record of " << r.len << " bytes");
    CHECK(r.len <= static_cast<uint32_t>(largest_whole));
  }
  CHECK(run.totals.ambiguous_reads + run.totals.untracked_reads >= run.log.reads.size() - whole);
}

TEST_CASE("odd packets: IPv4 datagrams fragmented over a 1500-byte MTU veth", "[bpf][odd]") {
  check_fragments(run_odd({"fragmented ipv4", 4, "recvfrom", {}, 1500, 1300, 16, 32, 5441}), 1300, 1472);
}

TEST_CASE("odd packets: IPv6 datagrams fragmented over a 1500-byte MTU veth", "[bpf][odd]") {
  check_fragments(run_odd({"fragmented ipv6", 6, "recvmsg", {}, 1500, 1300, 16, 32, 5442}), 1300, 1452);
}

// A peek returns the datagram and leaves it queued: the record belongs to
// the call that takes it.
TEST_CASE("odd packets: every read preceded by a MSG_PEEK of the same datagram", "[bpf][odd]") {
  for (const char *call : {"recvfrom", "recvmsg"}) {
    DYNAMIC_SECTION(call) { run_odd({std::string("peek, ") + call, 4, call, {"--peek"}, 9000, 200, 16, 32, 5443}); }
  }
}

// MSG_TRUNC into a 64-byte buffer: the call returns the datagram's whole
// length (what the record's len must be) while copying 64 bytes.
TEST_CASE("odd packets: MSG_TRUNC reads into a buffer shorter than the datagram", "[bpf][odd]") {
  for (const char *call : {"recv", "recvmsg"}) {
    DYNAMIC_SECTION(call) {
      run_odd({std::string("MSG_TRUNC, ") + call, 6, call, {"--trunc-to", "64"}, 9000, 200, 16, 32, 5444});
    }
  }
}
