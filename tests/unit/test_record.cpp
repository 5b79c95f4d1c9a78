// The ring's records decoded into the daemon's form (src/record.cpp): every
// stamp back where the kernel side took it, readers named by the record that
// went ahead of them, nothing guessed where the ring does not say.
#include <cstring>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/decode/record.hpp"

using namespace netlatd;

namespace {

constexpr uint64_t kBase = 5'000'000'000'000;  // a host up 5000 s

// A UDP datagram through a NIC read by a task that slept in its call: every
// stamp the kernel side writes.
netlatd_packet full_packet() {
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_IRQ] = kBase;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = kBase + 400;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = kBase + 2'000;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = kBase + 5'000;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = kBase + 9'000;
  p.stamp_ns[NETLATD_STAMP_WAKEUP] = kBase + 9'500;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = kBase + 30'000;
  p.stamp_ns[NETLATD_STAMP_CALL_START] = kBase - 2'000'000'000;  // blocked 2 s waiting
  p.stamp_ns[NETLATD_STAMP_COPY] = kBase + 33'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = kBase + 34'000;
  p.flags = NETLATD_PKT_WOKEN | NETLATD_PKT_SLEPT_IN_CALL | NETLATD_PKT_IPV6;
  p.l4proto = 17;
  p.len = 1'400;
  p.iface_id = 3;
  p.rx_cpu = 8191;
  p.reader_cpu = 17;
  p.dport = 5000;
  p.sport = 65535;
  p.reader_tgid = 700;
  p.reader_tid = 0x3fffff;  // the largest tid a 64-bit kernel gives
  std::memcpy(p.reader_comm, "a-15-byte-name!", 16);
  p.reader_cgroup = 0x123456789abcull;
  return p;
}

netlatd_packet decoded(RecordDecoder &d, const netlatd_wire_packet &w) {
  netlatd_packet out;
  REQUIRE(d.decode(&w, sizeof w, out) == RecordDecoder::Kind::Packet);
  return out;
}

void name(RecordDecoder &d, const netlatd_packet &p) {
  const netlatd_wire_reader r = encode_reader(p);
  netlatd_packet unused;
  REQUIRE(d.decode(&r, sizeof r, unused) == RecordDecoder::Kind::Reader);
}

bool same(const netlatd_packet &a, const netlatd_packet &b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("record: a packet record is one cache line and decodes back to the record it was made from") {
  STATIC_REQUIRE(sizeof(netlatd_wire_packet) == 64);
  const netlatd_packet p = full_packet();
  const auto w = encode_packet(p);
  REQUIRE(w);
  RecordDecoder d;
  name(d, p);
  REQUIRE(same(decoded(d, *w), p));

  SECTION("TCP, an interface numbered 64, a payload over 16 bits") {
    netlatd_packet tcp = p;
    tcp.flags |= NETLATD_PKT_TCP;
    tcp.l4proto = 6;
    tcp.iface_id = NETLATD_MAX_IFACES;
    tcp.len = 524'288;
    const auto wt = encode_packet(tcp);
    REQUIRE(wt);
    REQUIRE(same(decoded(d, *wt), tcp));
  }
}

TEST_CASE("record: stamps are distances from their base; a stamp not seen stays not seen") {
  netlatd_packet p = full_packet();
  netlatd_wire_packet w = *encode_packet(p);
  CHECK(w.receive_ns == kBase + 5'000);
  CHECK(w.irq_before == 5'000);
  CHECK(w.queue_after == 4'000);
  CHECK(w.recv_return_ns == kBase + 34'000);
  CHECK(w.reader_before[NETLATD_WIRE_SWITCH_IN] == 4'001);
  CHECK(w.reader_before[NETLATD_WIRE_CALL_START] == 2'000'034'001u);

  RecordDecoder d;
  name(d, p);
  SECTION("missing packet stamps (lo: no IRQ; the queueing hook did not run)") {
    w.irq_before = 0;
    w.queue_after = 0;
    const netlatd_packet out = decoded(d, w);
    CHECK(out.stamp_ns[NETLATD_STAMP_IRQ] == 0);
    CHECK(out.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] == 0);
    CHECK(out.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] == kBase + 400);
  }
  SECTION("missing reader stamps") {
    for (__u32 &b : w.reader_before)
      b = 0;
    const netlatd_packet out = decoded(d, w);
    for (netlatd_stamp s : {NETLATD_STAMP_WAKEUP, NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START,
                            NETLATD_STAMP_COPY})
      CHECK(out.stamp_ns[s] == 0);
    CHECK(out.stamp_ns[NETLATD_STAMP_RECV_RETURN] == kBase + 34'000);
  }
  SECTION("a switch-in not timed, before the call: said by the switch-in's slot, no stamp made up") {
    p.flags = NETLATD_PKT_ON_CPU_BEFORE_CALL;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
    const netlatd_wire_packet wf = *encode_packet(p);
    CHECK(wf.reader_before[NETLATD_WIRE_SWITCH_IN] == NETLATD_WIRE_BEFORE_CALL);
    CHECK(((wf.tid_flags >> NETLATD_WIRE_TID_BITS) & NETLATD_WIRE_AMBIGUOUS) == 0);
    const netlatd_packet out = decoded(d, wf);
    CHECK(out.stamp_ns[NETLATD_STAMP_SWITCH_IN] == 0);
    CHECK(out.flags == NETLATD_PKT_ON_CPU_BEFORE_CALL);
    REQUIRE(same(out, p));
  }
  SECTION("a reader stamp at the very instant of the return is seen, not lost") {
    p.stamp_ns[NETLATD_STAMP_COPY] = p.stamp_ns[NETLATD_STAMP_RECV_RETURN];
    REQUIRE(same(decoded(d, *encode_packet(p)), p));
  }
  SECTION("a TCP segment whose earlier stamps may be another copy's keeps its queueing stamp only") {
    netlatd_packet tcp = p;
    tcp.flags |= NETLATD_PKT_TCP;
    tcp.l4proto = 6;
    for (netlatd_stamp s : {NETLATD_STAMP_IRQ, NETLATD_STAMP_SOFTIRQ_RAISE, NETLATD_STAMP_SOFTIRQ_ENTRY,
                            NETLATD_STAMP_RECEIVE_SKB})
      tcp.stamp_ns[s] = 0;
    const auto wt = encode_packet(tcp);
    REQUIRE(wt);
    CHECK((wt->tid_flags >> NETLATD_WIRE_TID_BITS) & NETLATD_WIRE_RX_UNKNOWN);
    REQUIRE(same(decoded(d, *wt), tcp));
  }
}

TEST_CASE("record: a reader stamp more than 4.29 s before the return cannot be written, never wraps") {
  netlatd_packet p = full_packet();
  const uint64_t ret = p.stamp_ns[NETLATD_STAMP_RECV_RETURN];
  // The last distance that fits: 2^32 - 2 ns before the return.
  p.stamp_ns[NETLATD_STAMP_CALL_START] = ret - (NETLATD_WIRE_BEFORE_MAX - 2);
  const auto fits = encode_packet(p);
  REQUIRE(fits);
  RecordDecoder d;
  name(d, p);
  CHECK(decoded(d, *fits).stamp_ns[NETLATD_STAMP_CALL_START] == ret - (NETLATD_WIRE_BEFORE_MAX - 2));
  // One more, and 5 s: the kernel side leaves it out (NETLATD_CNT_READER_STAMP_FAR).
  p.stamp_ns[NETLATD_STAMP_CALL_START] = ret - (NETLATD_WIRE_BEFORE_MAX - 1);
  CHECK_FALSE(encode_packet(p));
  p.stamp_ns[NETLATD_STAMP_CALL_START] = ret - 5'000'000'000ull;
  CHECK_FALSE(encode_packet(p));
  // Whatever the field holds, the stamp decodes before the return.
  netlatd_wire_packet w = *fits;
  w.reader_before[NETLATD_WIRE_CALL_START] = UINT32_MAX;
  CHECK(decoded(d, w).stamp_ns[NETLATD_STAMP_CALL_START] == ret - (UINT32_MAX - 1ull));
  // As the kernel side writes one: the stamp absent, the record marked, and
  // counted once per record.
  CHECK(d.far() == 0);
  w.reader_before[NETLATD_WIRE_CALL_START] = 0;
  w.tid_flags |= NETLATD_WIRE_FAR << NETLATD_WIRE_TID_BITS;
  const netlatd_packet out = decoded(d, w);
  CHECK(out.stamp_ns[NETLATD_STAMP_CALL_START] == 0);
  CHECK(out.flags == p.flags);
  CHECK(d.far() == 1);
}

TEST_CASE("record: the reader is the one named last for its tid when the record was written") {
  netlatd_packet p = full_packet();
  const netlatd_wire_packet w = *encode_packet(p);
  RecordDecoder d;
  netlatd_packet out;
  SECTION("a tid never named (the kernel side names each reader ahead of its records: one forgotten): left out, "
          "counted as forgotten") {
    CHECK(d.decode(&w, sizeof w, out) == RecordDecoder::Kind::Unnamed);
    CHECK(d.forgotten() == 1);
    CHECK(d.unnamed() == 0);
  }
  SECTION("tid 0, a reader the kernel side could not name (ring full): left out, counted") {
    name(d, p);
    netlatd_packet zero = p;
    zero.reader_tid = 0;
    name(d, zero);
    netlatd_wire_packet w0 = w;
    w0.tid_flags &= ~NETLATD_WIRE_TID_MASK;
    CHECK(d.decode(&w0, sizeof w0, out) == RecordDecoder::Kind::Unnamed);
    CHECK(d.unnamed() == 1);
    CHECK(d.forgotten() == 0);
  }
  SECTION("renamed (prctl, exec): later records carry the new name, earlier ones the old") {
    name(d, p);
    const netlatd_packet before = decoded(d, w);
    netlatd_packet renamed = p;
    std::memcpy(renamed.reader_comm, "worker\0\0\0\0\0\0\0\0\0", 16);
    renamed.reader_cgroup = 99;
    name(d, renamed);
    CHECK(same(before, p));
    CHECK(same(decoded(d, w), renamed));
  }
  SECTION("a tid taken by another task: that task's name from its first record on") {
    name(d, p);
    netlatd_packet other = p;
    other.reader_tgid = 9;
    std::memcpy(other.reader_comm, "other\0\0\0\0\0\0\0\0\0\0", 16);
    name(d, other);
    CHECK(d.readers() == 1);
    CHECK(same(decoded(d, w), other));
  }
  SECTION("a packet-only record names no one, ambiguous or not") {
    netlatd_packet alone = p;
    for (netlatd_stamp s : {NETLATD_STAMP_WAKEUP, NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START,
                            NETLATD_STAMP_COPY, NETLATD_STAMP_RECV_RETURN})
      alone.stamp_ns[s] = 0;
    alone.reader_tgid = alone.reader_tid = alone.reader_cpu = 0;
    alone.reader_cgroup = 0;
    std::memset(alone.reader_comm, 0, sizeof alone.reader_comm);
    alone.flags = NETLATD_PKT_IPV6;
    alone.reader_unknown = NETLATD_READER_AMBIGUOUS;
    const auto wa = encode_packet(alone);
    REQUIRE(wa);
    REQUIRE(same(decoded(d, *wa), alone));
    alone.reader_unknown = NETLATD_READER_KNOWN;
    REQUIRE(same(decoded(d, *encode_packet(alone)), alone));
  }
}

// A server's threads come and go for months: readers that named no record
// for a while are forgotten, so the table holds the recent ones only. A
// forgotten reader's record is counted unnamed, never named from memory.
TEST_CASE("record: readers idle since a time are forgotten; the recent kept; a forgotten one's record unnamed") {
  RecordDecoder d;
  netlatd_packet old_reader = full_packet();  // returns at kBase + 34 us
  netlatd_packet busy = full_packet();
  busy.reader_tid = 42;
  for (netlatd_stamp s : {NETLATD_STAMP_IRQ, NETLATD_STAMP_SOFTIRQ_RAISE, NETLATD_STAMP_SOFTIRQ_ENTRY,
                          NETLATD_STAMP_RECEIVE_SKB, NETLATD_STAMP_SOCK_QUEUE, NETLATD_STAMP_WAKEUP,
                          NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START, NETLATD_STAMP_COPY,
                          NETLATD_STAMP_RECV_RETURN})
    busy.stamp_ns[s] += 90'000'000'000;  // 90 s later
  name(d, old_reader);
  decoded(d, *encode_packet(old_reader));
  name(d, busy);
  decoded(d, *encode_packet(busy));
  REQUIRE(d.readers() == 2);
  CHECK(d.latest_ns() == busy.stamp_ns[NETLATD_STAMP_RECV_RETURN]);
  // Nothing named before the first's return: nothing forgotten.
  CHECK(d.prune(kBase) == 0);
  // A minute before the latest: the first goes, the busy one stays.
  CHECK(d.prune(d.latest_ns() - 60'000'000'000) == 1);
  CHECK(d.readers() == 1);
  CHECK(same(decoded(d, *encode_packet(busy)), busy));
  netlatd_packet out;
  const netlatd_wire_packet w = *encode_packet(old_reader);
  CHECK(d.decode(&w, sizeof w, out) == RecordDecoder::Kind::Unnamed);
  CHECK(d.forgotten() == 1);
  CHECK(d.unnamed() == 0);
  // Named again (the kernel side was told to): decoded as before.
  name(d, old_reader);
  CHECK(same(decoded(d, w), old_reader));
}

TEST_CASE("record: what the kernel side cannot write is refused, and sizes it never writes are left out") {
  RecordDecoder d;
  netlatd_packet out;
  const char bytes[144] = {};
  CHECK(d.decode(bytes, 63, out) == RecordDecoder::Kind::Malformed);
  CHECK(d.decode(bytes, sizeof bytes, out) == RecordDecoder::Kind::Malformed);
  netlatd_packet p = full_packet();
  SECTION("a stamp of the reader after its return") {
    p.stamp_ns[NETLATD_STAMP_COPY] = p.stamp_ns[NETLATD_STAMP_RECV_RETURN] + 1;
  }
  SECTION("a stage before netif_receive_skb over 4.29 s") {
    p.stamp_ns[NETLATD_STAMP_IRQ] = p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] - (1ull << 32);
  }
  SECTION("syscall_exit, which no hook writes") { p.stamp_ns[NETLATD_STAMP_SYSCALL_EXIT] = kBase + 40'000; }
  SECTION("an interface number over 64") { p.iface_id = NETLATD_MAX_IFACES + 1; }
  SECTION("a CPU over 8191") { p.reader_cpu = 8192; }
  SECTION("a protocol other than UDP and TCP") { p.l4proto = 1; }
  SECTION("on CPU before the call, with a switch-in stamp too") { p.flags |= NETLATD_PKT_ON_CPU_BEFORE_CALL; }
  SECTION("on CPU before the call, with no call start") {
    p.flags |= NETLATD_PKT_ON_CPU_BEFORE_CALL;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = 0;
  }
  SECTION("a flag no record has") { p.flags |= 1u << 7; }
  CHECK_FALSE(encode_packet(p));
}
