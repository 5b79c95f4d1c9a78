// The daemon's stage math is the one in include/netlatd/stage_math.h, which the
// kernel side's --aggregate compiles too: stage_durations, stamps_ordered,
// read_start and Histogram::bucket_index give what the header gives, on
// records built to hit each of its branches. No kernel.
#include <cstdint>
#include <optional>
#include <random>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/histogram.hpp"
#include "netlatd/model/stages.hpp"
#include "netlatd/stage_math.h"

using namespace netlatd;

namespace {

// The header's stamps of a record, built here by hand from the record (the
// mapping of enum netlatd_stamp to enum netlatd_path_stamp).
struct Path {
  __u64 t[NETLATD_PATH_STAMPS]{};
};

Path path_of(const netlatd_packet &p) {
  Path s;
  s.t[NETLATD_PATH_IRQ] = p.stamp_ns[NETLATD_STAMP_IRQ];
  s.t[NETLATD_PATH_RAISE] = p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE];
  s.t[NETLATD_PATH_ENTRY] = p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY];
  s.t[NETLATD_PATH_RECEIVE] = p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB];
  s.t[NETLATD_PATH_QUEUED] = p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE];
  s.t[NETLATD_PATH_WAKEUP] = p.stamp_ns[NETLATD_STAMP_WAKEUP];
  s.t[NETLATD_PATH_COPY] = p.stamp_ns[NETLATD_STAMP_COPY];
  s.t[NETLATD_PATH_RETURN] = p.stamp_ns[NETLATD_STAMP_RECV_RETURN];
  s.t[NETLATD_PATH_SWITCH_IN] = p.stamp_ns[NETLATD_STAMP_SWITCH_IN];
  s.t[NETLATD_PATH_CALL_START] = p.stamp_ns[NETLATD_STAMP_CALL_START];
  s.t[NETLATD_PATH_READ_START] = netlatd_read_start(s.t[NETLATD_PATH_QUEUED], s.t[NETLATD_PATH_WAKEUP],
                                                    s.t[NETLATD_PATH_SWITCH_IN], s.t[NETLATD_PATH_CALL_START], p.flags);
  return s;
}

std::optional<uint64_t> as_optional(__u64 span) {
  return span == NETLATD_SPAN_NONE ? std::nullopt : std::optional<uint64_t>(span);
}

// Each stamp missing (0) or at one of a few instants around the others, so
// that orders, equal stamps and every way read start can go all come up.
netlatd_packet random_packet(std::mt19937_64 &rng) {
  static constexpr netlatd_stamp kStamps[] = {
      NETLATD_STAMP_IRQ,       NETLATD_STAMP_SOFTIRQ_RAISE, NETLATD_STAMP_SOFTIRQ_ENTRY, NETLATD_STAMP_RECEIVE_SKB,
      NETLATD_STAMP_SOCK_QUEUE, NETLATD_STAMP_WAKEUP,       NETLATD_STAMP_SWITCH_IN,    NETLATD_STAMP_CALL_START,
      NETLATD_STAMP_COPY,      NETLATD_STAMP_RECV_RETURN};
  netlatd_packet p{};
  for (netlatd_stamp s : kStamps) {
    const uint64_t pick = rng() % 8;
    p.stamp_ns[s] = pick == 0 ? 0 : 1'000'000 + pick * 1'000 + (rng() % 3) * 400;
  }
  p.flags = static_cast<__u16>(((rng() & 1) ? NETLATD_PKT_SLEPT_IN_CALL : 0) |
                               ((rng() & 1) ? NETLATD_PKT_ON_CPU_BEFORE_CALL : 0));
  return p;
}

}  // namespace

TEST_CASE("the daemon's stages, order check and read start are the stage math header's", "[stages][stage_math]") {
  std::mt19937_64 rng(31);
  for (int n = 0; n < 200'000; ++n) {
    const netlatd_packet p = random_packet(rng);
    const Path s = path_of(p);
    const StageDurations d = stage_durations(p);
#define CHECK_STAGE(stage, from, to) REQUIRE(d.of[stage] == as_optional(netlatd_span(s.t[from], s.t[to])));
    NETLATD_STAGE_BOUNDS(CHECK_STAGE)
#undef CHECK_STAGE
    REQUIRE(d.of[NETLATD_STAGE_TOTAL] ==
            as_optional(netlatd_span(netlatd_total_start(s.t), s.t[NETLATD_PATH_RETURN])));
    REQUIRE(d.ordered == (netlatd_path_ordered(s.t) != 0));
    REQUIRE(stamps_ordered(p) == d.ordered);
    const __u64 rs = s.t[NETLATD_PATH_READ_START];
    REQUIRE(read_start(p) == (rs ? std::optional<uint64_t>(rs) : std::nullopt));
  }
}

TEST_CASE("the stage math: which stamps bound each stage", "[stages][stage_math]") {
  // The stage numbers are those of enum class Stage, in its order.
  int stages = 0;
#define COUNT_STAGE(stage, from, to) REQUIRE((stage) == stages++);
  NETLATD_STAGE_BOUNDS(COUNT_STAGE)
#undef COUNT_STAGE
  REQUIRE(stages == NETLATD_STAGE_TOTAL);
  REQUIRE(static_cast<size_t>(NETLATD_STAGE_TOTAL) + 1 == kStageCount);
  REQUIRE(NETLATD_AGG_STAGES == kStageCount);

  // A whole path: each stage from its two stamps; total from the IRQ.
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_IRQ] = 1'000;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = 1'100;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = 1'300;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = 1'700;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 2'500;
  p.stamp_ns[NETLATD_STAMP_CALL_START] = 3'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = 7'000;
  const StageDurations d = stage_durations(p);
  REQUIRE(d[Stage::Irq] == 300u);
  REQUIRE(d[Stage::Softirq] == 400u);
  REQUIRE(d[Stage::NetifReceive] == 800u);
  REQUIRE(d[Stage::SockQueue] == 500u);
  REQUIRE(d[Stage::OnCpu] == 4'000u);
  REQUIRE(d[Stage::InSocket] == 4'500u);
  REQUIRE(d[Stage::Total] == 6'000u);
  REQUIRE(d.ordered);

  // The path is nine stamps: syscall_exit, which no hook writes, is not on it
  // (the kernel side checks the same nine).
  REQUIRE(NETLATD_PATH_LEN == 9);
  p.stamp_ns[NETLATD_STAMP_SYSCALL_EXIT] = 5;
  REQUIRE(stamps_ordered(p));
}

TEST_CASE("Histogram::bucket_index is the stage math header's, and the two ways to the top bit agree",
          "[histogram][stage_math]") {
  for (unsigned bit = 0; bit < 64; ++bit) {
    const uint64_t v = uint64_t{1} << bit;
    for (const uint64_t x : {v, v + 1, v + (v >> 1), (v << 1) - 1}) {
      REQUIRE(netlatd_msb_by_halving(x) == netlatd_msb(x));
      REQUIRE(Histogram::bucket_index(x) == netlatd_bucket_index(x));
    }
  }
  std::mt19937_64 rng(7);
  for (int n = 0; n < 100'000; ++n) {
    const uint64_t x = rng() >> (rng() % 64);
    if (x)
      REQUIRE(netlatd_msb_by_halving(x) == netlatd_msb(x));
    REQUIRE(Histogram::bucket_index(x) == netlatd_bucket_index(x));
    const Histogram::Bucket b = Histogram::bucket_bounds(netlatd_bucket_index(x));
    REQUIRE(b.lower <= x);
    REQUIRE((x < b.upper || b.upper == UINT64_MAX));
  }
  // The kernel side's blocks hold every bucket of a value below its limit.
  REQUIRE(netlatd_bucket_index(NETLATD_AGG_MAX_NS - 1) == NETLATD_AGG_BUCKETS - 1);
  REQUIRE(Histogram::kSubBucketBits == NETLATD_SUB_BUCKET_BITS);
}

TEST_CASE("the series index and its parts are inverses", "[stage_math]") {
  const __u32 bys[] = {0,
                       NETLATD_AGG_BY_DPORT,
                       NETLATD_AGG_BY_PROTO,
                       NETLATD_AGG_BY_FAMILY,
                       NETLATD_AGG_BY_DPORT | NETLATD_AGG_BY_PROTO,
                       NETLATD_AGG_BY_DPORT | NETLATD_AGG_BY_FAMILY,
                       NETLATD_AGG_BY_PROTO | NETLATD_AGG_BY_FAMILY,
                       NETLATD_AGG_BY_DPORT | NETLATD_AGG_BY_PROTO | NETLATD_AGG_BY_FAMILY};
  for (const __u32 by : bys) {
    const __u32 nports = (by & NETLATD_AGG_BY_DPORT) ? NETLATD_MAX_PORTS : 1;
    const __u32 nseries =
        nports * ((by & NETLATD_AGG_BY_PROTO) ? 2 : 1) * ((by & NETLATD_AGG_BY_FAMILY) ? 2 : 1);
    REQUIRE(nseries <= NETLATD_AGG_MAX_SERIES);
    for (__u32 port = 0; port < nports; ++port)
      for (const __u32 flags : {0u, unsigned{NETLATD_PKT_TCP}, unsigned{NETLATD_PKT_IPV6},
                                unsigned{NETLATD_PKT_TCP | NETLATD_PKT_IPV6}}) {
        const int idx = netlatd_series_index(by, static_cast<int>(port), flags, nseries);
        REQUIRE(idx >= 0);
        REQUIRE(static_cast<__u32>(idx) < nseries);
        __u32 back_port = 99;
        int tcp = -1, ipv6 = -1;
        netlatd_series_parts(by, static_cast<__u32>(idx), &back_port, &tcp, &ipv6);
        REQUIRE(back_port == ((by & NETLATD_AGG_BY_DPORT) ? port : 0u));
        REQUIRE(tcp == ((by & NETLATD_AGG_BY_PROTO) && (flags & NETLATD_PKT_TCP) ? 1 : 0));
        REQUIRE(ipv6 == ((by & NETLATD_AGG_BY_FAMILY) && (flags & NETLATD_PKT_IPV6) ? 1 : 0));
      }
    // A port not watched has no series where the series are by port.
    REQUIRE((netlatd_series_index(by, -1, 0, nseries) < 0) == ((by & NETLATD_AGG_BY_DPORT) != 0));
    // Nor does an index past the series there are.
    REQUIRE(netlatd_series_index(by, 0, NETLATD_PKT_TCP | NETLATD_PKT_IPV6, 0) == -1);
  }
}
