// Odd packets and odd reads (issue 14, item 4): each datagram is either
// counted once with the stamps of the call that returned it, or left out
// and counted; never a crash, never a record that names the wrong read.
// Datagrams of distinct lengths, each checked against what the receiving
// application's calls returned (tests/support/record_check.*).
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include <catch2/catch_test_macros.hpp>

#include "odd_packets.hpp"

using namespace nltest;

// 1,300 to 1,811 bytes over a 1,500-byte MTU: the longer ones arrive in two
// fragments, reassembled before the socket; the shorter ones in one frame.
// A fragment is never taken for the datagram: a first fragment's length is
// not the datagram's, and the reassembled datagram never passes
// netif_receive_skb. So records exist only for datagrams that fit a frame
// (up to 1,472 bytes of IPv4 payload, 1,452 of IPv6), none wrong; the
// reads of the others are counted among those no record names.
//
// Under load the reader falls behind and finds whole datagrams queued among
// reassembled ones that have no slot: such a read cannot be tied by order,
// and its datagram's record goes out packet-only (counted ambiguous), as the
// join must. So nearly every whole datagram has its record, and most, not
// nearly all, name their read (a clean-clone CI run: 152 of 153 records,
// 136 named, 16 ambiguous; a quiet host names all 153).
void check_fragments(const ReaderRun &run, long base_len, long largest_whole) {
  const auto whole = static_cast<size_t>(largest_whole - base_len + 1);
  CHECK(run.records.size() <= whole);
  CHECK(run.records.size() >= whole * 9 / 10);
  CHECK(run.verdict.right >= whole * 2 / 3);
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
// the call that takes it. Most reads are named, as for the other odd reads:
// counting every one (unseen_read) is right-or-counted, and useless (a DNS
// server peeks before each read). On the fentry kernels of the vm tier's
// join suite every datagram was counted unseen_read, 0 records of 512, and
// the test passed.
TEST_CASE("odd packets: every read preceded by a MSG_PEEK of the same datagram", "[bpf][odd]") {
  for (const char *call : {"recvfrom", "recvmsg"}) {
    DYNAMIC_SECTION(call) {
      ReaderRun run = run_odd({std::string("peek, ") + call, 4, call, {"--peek"}, 9000, 200, 16, 32, 5443});
      // Peeks breaking the join would name none. By queue order some runs
      // leave a stretch of reads ambiguous (counted): 351 of 512 named once
      // in 16 runs on a quiet host, all 512 in the rest; why is not known
      // yet. The floor is one half.
      CHECK(run.verdict.right * 2 >= run.log.reads.size());
    }
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

// IP options (NOP, record-route, timestamp: a 48-byte IPv4 header) are
// walked past: every datagram is named as if it had none.
TEST_CASE("odd packets: IPv4 datagrams with IP options", "[bpf][odd]") {
  OddCase c{"IPv4 options", 4, "recvfrom", {}, 9000, 200, 16, 32, 5445};
  OddExtras x;
  x.sender_extra = {"--ip-options"};
  ReaderRun run = run_odd(c, x);
  check_lengths_read(run);
  CHECK(run.verdict.right >= run.log.reads.size() * 9 / 10);
}

// Hop-by-hop and destination options headers between the IPv6 header and
// UDP's are stepped over: every datagram is named as if it had none.
TEST_CASE("odd packets: IPv6 datagrams with extension headers", "[bpf][odd]") {
  OddCase c{"IPv6 extension headers", 6, "recvmsg", {}, 9000, 200, 16, 32, 5446};
  OddExtras x;
  x.sender_extra = {"--ip-options"};
  ReaderRun run = run_odd(c, x);
  check_lengths_read(run);
  CHECK(run.verdict.right >= run.log.reads.size() * 9 / 10);
}

// A zero-length datagram before every 8th: recvfrom returns 0 with the
// sender's address; its record, if any, says 0 bytes and names that call.
TEST_CASE("odd packets: zero-length UDP datagrams", "[bpf][odd]") {
  OddCase c{"zero-length", 4, "recvfrom", {}, 9000, 200, 16, 32, 5447};
  OddExtras x;
  x.sender_extra = {"--empty-every", "8"};
  x.extra_reads = 16 * 32 / 8;
  ReaderRun run = run_odd(c, x);
  check_lengths_read(run);
  size_t empty_right = 0;
  for (const Record &r : run.records)
    empty_right += r.len == 0 && r.reader_tid.has_value();
  std::fprintf(stderr, "  zero-length: %zu read, %zu records of 0 bytes naming a reader\n", x.extra_reads,
               empty_right);
  CHECK(run.verdict.right >= run.log.reads.size() * 9 / 10);
}

// A VLAN (id 100) over the veth on both sides, the datagrams sent over it,
// netlatd tracing the lower veth. The tag either travels beside the frame
// (veth's VLAN offload, the default) or in it (offload off on the sender):
// each datagram is recorded once, or left out and its read counted.
TEST_CASE("odd packets: VLAN-tagged frames, the lower veth traced", "[bpf][odd]") {
  if (!have_ethtool())
    SKIP("ethtool is not installed (scripts/install-deps.sh)");
  for (bool in_frame : {false, true}) {
    DYNAMIC_SECTION((in_frame ? "tag in the frame" : "tag offloaded")) {
      OddCase c{std::string("VLAN, ") + (in_frame ? "tag in the frame" : "tag offloaded"), 4, "recvfrom", {}, 9000,
                200, 16, 32, static_cast<uint16_t>(in_frame ? 5450 : 5449)};
      OddExtras x;
      x.setup = [&](VethNamespaces &net, ReaderRunSpec &spec) {
        if (in_frame)
          REQUIRE(sh("ip netns exec " + net.tx_ns + " ethtool -K " + net.tx_if + " txvlan off >/dev/null") == 0);
        if (sh("ip -n " + net.rx_ns + " link add link " + net.rx_if + " name " + net.rx_if +
               ".100 type vlan id 100 2>/dev/null") != 0)
          SKIP("the kernel has no 802.1Q VLAN devices (CONFIG_VLAN_8021Q)");
        sh("ip -n " + net.rx_ns + " link del " + net.rx_if + ".100");
        const std::string rx_vlan = "10.214." + net.rx_addr.substr(7), tx_vlan = "10.214." + net.tx_addr.substr(7);
        for (const auto &[ns, dev, addr] : {std::tuple{net.rx_ns, net.rx_if, rx_vlan}, std::tuple{net.tx_ns, net.tx_if, tx_vlan}})
          REQUIRE(sh("set -e; ip -n " + ns + " link add link " + dev + " name " + dev + ".100 type vlan id 100; ip -n " +
                     ns + " addr add " + addr + "/30 dev " + dev + ".100; ip -n " + ns + " link set " + dev +
                     ".100 up") == 0);
        spec.to = rx_vlan;
      };
      ReaderRun run = run_odd(c, x);
      check_lengths_read(run);
      CHECK(run.verdict.right >= run.log.reads.size() * 9 / 10);
    }
  }
}

namespace {

// A TCP stream's records against its reads. A record is of the skb's
// payload as it reached netif_receive_skb (GRO may have merged several
// segments), and is reported by the read that took its last byte. Per
// connection (the record's source port), with records in the order of
// their return stamps: where every byte read is in a record, the running
// sum of the records' lengths is each one's last byte, and it must lie in
// the byte range of the call that holds its return stamp, a call on that
// connection of the thread it names. Where some bytes are in no record
// (counted: a gap), only the call is checked.
struct StreamVerdict {
  size_t records = 0, right = 0, wrong = 0, unknown = 0, exact_connections = 0, gapped_connections = 0;
  uint32_t largest = 0;
  std::vector<std::string> wrong_examples;
};

StreamVerdict check_stream(const ReaderRun &run) {
  StreamVerdict v;
  std::map<uint16_t, std::vector<const ReadEntry *>> reads;
  for (const ReadEntry &r : run.log.reads)
    reads[r.peer_port].push_back(&r);
  std::map<uint16_t, std::vector<const Record *>> records;
  for (const Record &r : run.records) {
    v.records++;
    v.largest = std::max(v.largest, r.len);
    if (!r.reader_tid || !r.mono.count("recv_return") || !r.sport) {
      v.unknown++;
      continue;
    }
    records[*r.sport].push_back(&r);
  }
  auto fail = [&](const std::string &why) {
    v.wrong++;
    if (v.wrong_examples.size() < 6)
      v.wrong_examples.push_back(why);
  };
  for (auto &[sport, recs] : records) {
    std::sort(recs.begin(), recs.end(),
              [](const Record *a, const Record *b) { return a->mono.at("recv_return") < b->mono.at("recv_return"); });
    auto &calls = reads[sport];
    std::sort(calls.begin(), calls.end(), [](const ReadEntry *a, const ReadEntry *b) { return a->before < b->before; });
    uint64_t read_bytes = 0, recorded = 0;
    for (const ReadEntry *c : calls)
      read_bytes += c->len;
    for (const Record *r : recs)
      recorded += r->len;
    const bool exact = recorded == read_bytes;
    (exact ? v.exact_connections : v.gapped_connections)++;
    uint64_t end = 0;
    for (const Record *r : recs) {
      end += r->len;
      const int64_t t = r->mono.at("recv_return");
      uint64_t range_end = 0;
      const ReadEntry *call = nullptr;
      for (const ReadEntry *c : calls) {
        range_end += c->len;
        if (c->tid == *r->reader_tid && c->before <= t && t <= c->after) {
          call = c;
          break;
        }
      }
      if (!call) {
        fail("sport " + std::to_string(sport) + " record len " + std::to_string(r->len) +
             ": no read of its connection by its thread holds its return stamp");
        continue;
      }
      if (exact && (end > range_end || end <= range_end - call->len)) {
        fail("sport " + std::to_string(sport) + " record len " + std::to_string(r->len) + " ends at byte " +
             std::to_string(end) + ", its call read (" + std::to_string(range_end - call->len) + ", " +
             std::to_string(range_end) + "]");
        continue;
      }
      v.right++;
    }
  }
  return v;
}

}  // namespace

// GRO on the receiving veth (on 6.x it gives veth a NAPI instance), TSO and
// GSO off on the sender, a 1500-byte MTU: each request of 20 to 24 KB leaves
// as 14 to 17 segments and GRO merges them into fewer, longer skbs before
// netif_receive_skb. One connection per request.
TEST_CASE("odd packets: GRO-merged TCP segments", "[bpf][odd]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  if (!have_ethtool())
    SKIP("ethtool is not installed (scripts/install-deps.sh)");
  VethNamespaces net;
  net.set_mtu(1500);
  if (sh("ip netns exec " + net.rx_ns + " ethtool -K " + net.rx_if + " gro on >/dev/null 2>&1") != 0 ||
      sh("ip netns exec " + net.rx_ns + " ethtool -k " + net.rx_if + " | grep -q '^generic-receive-offload: on'") != 0)
    SKIP("cannot turn GRO on for a veth here");
  REQUIRE(sh("ip netns exec " + net.tx_ns + " ethtool -K " + net.tx_if + " tso off gso off >/dev/null") == 0);
  const int requests = 40;
  ReaderRunSpec spec = one_request_per_connection(net, 5451, requests);
  spec.sender_args.insert(spec.sender_args.end(), {"--base-len", "20000", "--len-span", "4000"});
  spec.reads_known = false;
  ReaderRun run = run_readers(net, spec);
  StreamVerdict v = check_stream(run);
  uint64_t bytes = 0;
  for (const ReadEntry &r : run.log.reads)
    bytes += r.len;
  std::fprintf(stderr,
               "readers [GRO-merged TCP]: %zu reads of %llu bytes, %zu records: %zu right, %zu wrong, %zu with no "
               "reader named; connections exact %zu, with counted gaps %zu; largest record %u bytes (%u segments "
               "of 1448); tcp_bytes read %llu reported %llu skipped %llu; %.1f s\n",
               run.log.reads.size(), static_cast<unsigned long long>(bytes), v.records, v.right, v.wrong, v.unknown,
               v.exact_connections, v.gapped_connections, v.largest, (v.largest + 1447) / 1448,
               static_cast<unsigned long long>(run.totals.tcp_read),
               static_cast<unsigned long long>(run.totals.tcp_reported),
               static_cast<unsigned long long>(run.totals.tcp_skipped), run.seconds);
  for (const std::string &e : v.wrong_examples)
    std::fprintf(stderr, "  wrong: %s\n", e.c_str());
  CHECK(v.wrong == 0);
  CHECK(v.unknown == 0);
  // GRO did merge: a record longer than one segment, with the sender's
  // segmentation offloads off, is of an skb GRO built.
  CHECK(v.largest > 1448);
  CHECK(run.totals.tcp_read == bytes);
  CHECK(run.totals.tcp_reported + run.totals.tcp_skipped == bytes);
  CHECK(v.right * 10 >= v.records * 9);
  CHECK(v.exact_connections * 10 >= static_cast<size_t>(requests) * 9);
}

// Crafted frames with an 802.1Q tag of VID 0 (priority-tagged, AF_PACKET in
// the sender's namespace): the receiver takes them on the veth itself, with
// no VLAN device, after stripping the tag. Each recorded once, right, or
// left out and its read counted.
TEST_CASE("odd packets: priority-tagged (VLAN 0) frames", "[bpf][odd]") {
  const int n = 256;
  OddCase c{"VLAN 0 tag in the frame", 4, "recvfrom", {}, 9000, 200, n, 1, 5452};
  OddExtras x;
  x.setup = [&](VethNamespaces &net, ReaderRunSpec &spec) {
    const std::string mac = mac_of(net.rx_ns, net.rx_if);
    REQUIRE(mac.size() == 17);
    spec.sender_mode = "udp-raw";
    spec.sender_args = {"--to", spec.to, "--from", net.tx_addr, "--dev", net.tx_if, "--mac", mac, "--bursts",
                        std::to_string(n), "--base-len", "200", "--gap-us", "300", "--vlan", "0"};
  };
  ReaderRun run = run_odd(c, x);
  check_lengths_read(run);
  CHECK(run.verdict.right >= run.log.reads.size() * 9 / 10);
}
