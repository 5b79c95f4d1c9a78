// The interval aggregate (IntervalAggregator, compare_aggregates) and its
// text rendering, checked against numbers computed here from the records fed
// in. The JSON renderings are test_report_json.cpp's; the time stamps and the
// clock offset test_report_time.cpp's.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "records.hpp"
#include "report_helpers.hpp"

using namespace netlatd;
using namespace std::chrono;
using nltest::at;
using nltest::kTcp;
using nltest::kUdp;
using nltest::lo_header;
using nltest::lo_packet;

TEST_CASE("format_duration picks a unit with three significant digits", "[report]") {
  REQUIRE(format_duration(0) == "0 ns");
  REQUIRE(format_duration(850) == "850 ns");
  REQUIRE(format_duration(1'000) == "1.00 µs");
  REQUIRE(format_duration(12'345) == "12.3 µs");
  REQUIRE(format_duration(456'000) == "456 µs");
  REQUIRE(format_duration(999'700) == "1.00 ms");  // not "1000 µs"
  REQUIRE(format_duration(4'560'000) == "4.56 ms");
  REQUIRE(format_duration(1'200'000'000) == "1.20 s");
  REQUIRE(format_duration(3'600'000'000'000) == "3600 s");
}

TEST_CASE("IntervalAggregator counts protocols and records known stages", "[report][aggregator]") {
  IntervalAggregator agg;
  agg.add(lo_packet(1'000'000, 2'000, 3'000, 10'000, 4'000, kUdp));
  agg.add(lo_packet(2'000'000, 2'500, 3'500, 20'000, 5'000, kTcp));
  netlatd_packet other = lo_packet(3'000'000, 1'000, 1'000, 1'000, 1'000, 1 /* ICMP */);
  agg.add(other);
  REQUIRE(agg.packets() == 3);
  REQUIRE(agg.packets_udp() == 1);
  REQUIRE(agg.packets_tcp() == 1);
  REQUIRE(agg.unordered() == 0);

  REQUIRE(agg.stage(Stage::Irq).count() == 0);  // no IRQ stamp on lo
  REQUIRE(agg.stage(Stage::Softirq).count() == 3);
  REQUIRE(agg.stage(Stage::Softirq).min() == 1'000);
  REQUIRE(agg.stage(Stage::Softirq).max() == 2'500);
  REQUIRE(agg.stage(Stage::SockQueue).sum() == 31'000);
  // Total runs from softirq_raise (first stamp present) to recv_return.
  REQUIRE(agg.stage(Stage::Total).max() == 100 + 2'500 + 3'500 + 20'000 + 5'000);

  SECTION("a record with unordered stamps is counted but not recorded") {
    netlatd_packet bad = lo_packet(4'000'000, 1'000, 1'000, 1'000, 1'000);
    bad.stamp_ns[NETLATD_STAMP_WAKEUP] = 1;  // long before the packet arrived
    agg.add(bad);
    REQUIRE(agg.packets() == 4);
    REQUIRE(agg.packets_udp() == 2);
    REQUIRE(agg.unordered() == 1);
    for (Stage s : kAllStages)
      REQUIRE(agg.stage(s).count() == (s == Stage::Irq ? 0u : 3u));
  }
  SECTION("a missing stamp leaves only its stages unrecorded") {
    netlatd_packet partial = lo_packet(4'000'000, 1'000, 1'000, 1'000, 1'000);
    partial.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    agg.add(partial);
    REQUIRE(agg.stage(Stage::SockQueue).count() == 3);
    REQUIRE(agg.stage(Stage::OnCpu).count() == 3);
    REQUIRE(agg.stage(Stage::NetifReceive).count() == 4);
    REQUIRE(agg.stage(Stage::Total).count() == 4);
  }
  SECTION("reset") {
    agg.reset();
    REQUIRE(agg.packets() == 0);
    REQUIRE(agg.packets_udp() == 0);
    REQUIRE(agg.packets_tcp() == 0);
    for (Stage s : kAllStages)
      REQUIRE(agg.stage(s).count() == 0);
  }
}

// --aggregate: the kernel side's series go into the same aggregate as
// records, and --aggregate-check compares two aggregates series by series.
TEST_CASE("IntervalAggregator takes the kernel's series; compare_aggregates finds any difference",
          "[report][aggregator][aggregate]") {
  IntervalAggregator records, kernel;
  std::vector<netlatd_packet> packets{lo_packet(1'000'000, 2'000, 3'000, 10'000, 4'000, kUdp),
                                      lo_packet(2'000'000, 2'500, 3'500, 20'000, 5'000, kTcp),
                                      lo_packet(3'000'000, 900, 700, 3'000, 4'100, kUdp)};
  packets[1].len = 1400;
  for (const netlatd_packet &p : packets)
    records.add(p);
  CHECK(compare_aggregates(records, records).empty());
  CHECK_FALSE(compare_aggregates(kernel, records).empty());  // the kernel added nothing

  // What the kernel side would have added: per series, each stage's values.
  auto kernel_series = [&](uint8_t proto) { return nltest::kernel_series(packets, proto); };
  kernel.add(kernel_series(kUdp));
  kernel.add(kernel_series(kTcp));
  CHECK(kernel.packets() == 3);
  CHECK(kernel.packets_udp() == 2);
  CHECK(kernel.packets_tcp() == 1);
  CHECK(kernel.tcp_bytes() == 1400);
  CHECK(kernel.stage(Stage::Total).count() == 3);
  CHECK(kernel.stage(Stage::Total).max() == records.stage(Stage::Total).max());
  CHECK(compare_aggregates(kernel, records).empty());

  SECTION("one value in another bucket") {
    packets[2] = lo_packet(3'000'000, 900, 700, 3'000, 4'200, kUdp);  // oncpu 4.1 -> 4.2 us
    IntervalAggregator moved;
    moved.add(kernel_series(kUdp));
    moved.add(kernel_series(kTcp));
    const std::string diff = compare_aggregates(moved, records);
    CHECK(diff.find("oncpu") != std::string::npos);
  }
  SECTION("a packet more in one series") {
    KernelSeries extra = kernel_series(kUdp);
    extra.data.packets = 1;
    kernel.add(extra);
    CHECK_FALSE(compare_aggregates(kernel, records).empty());
  }
}

TEST_CASE("format_text: header, per-stage bars, and why a stage is missing", "[report][text]") {
  IntervalAggregator agg;
  // sock_queue: 90 packets near 20 µs, 10 near 300 µs, so two bar rows with a 9:1 ratio.
  for (uint64_t i = 0; i < 100; ++i)
    agg.add(lo_packet(1'000'000 + i * 10'000'000, 2'000, 3'000, i < 90 ? 20'000 : 300'000, 4'000));
  ReportHeader h = lo_header();
  h.stages[static_cast<size_t>(Stage::OnCpu)].applicable = false;
  h.stages[static_cast<size_t>(Stage::OnCpu)].why_not = "no receive-return hook on this kernel";
  IntervalReport r;
  r.start = at(2026, 11, 22, 10, 0, 0, 0);
  r.end = r.start + seconds{1};
  r.data = &agg;
  r.drops = {{"ringbuf_full", 0}, {"sock_fifo_full", 2}};

  const std::string text = format_text(h, r);
  INFO(text);
  REQUIRE(text.find("2026-11-22T10:00:01.000Z") != std::string::npos);
  REQUIRE(text.find("iface lo") != std::string::npos);
  REQUIRE(text.find("ports 5000,5001") != std::string::npos);
  REQUIRE(text.find("packets 100") != std::string::npos);
  REQUIRE(text.find("sampled") == std::string::npos);  // every packet traced: nothing to say
  h.sample = 16;
  REQUIRE(format_text(h, r).find("packets 100 (udp 100, tcp 0)  sampled 1 in 16  interval") != std::string::npos);

  REQUIRE(text.find("irq: not applicable: interface has no IRQ lines (lo, veth)") !=
          std::string::npos);
  REQUIRE(text.find("oncpu: not applicable: no receive-return hook on this kernel") !=
          std::string::npos);
  REQUIRE(text.find(std::string(stage_description(Stage::SockQueue))) != std::string::npos);
  REQUIRE(text.find("usecs") != std::string::npos);
  // p50 is a bucket midpoint (20.1 µs for 20 µs); p99 and max clamp to the exact maximum.
  REQUIRE(text.find("count 100  p50 20.1 µs  p99 300 µs  max 300 µs") != std::string::npos);
  REQUIRE(text.find("drops: sock_fifo_full 2") != std::string::npos);
  REQUIRE(text.find("ringbuf_full") == std::string::npos);  // zero drops stay quiet here

  // The sock_queue block: 20 µs is in row 16 -> 31, 300 µs in row 256 -> 511.
  const size_t block = text.find("sock_queue:");
  REQUIRE(block != std::string::npos);
  const std::string rest = text.substr(block, text.find("\n\n", block) - block);
  auto row = [&](const std::string &label) {
    const size_t at_label = rest.find(label);
    REQUIRE(at_label != std::string::npos);
    const std::string l = rest.substr(at_label, rest.find('\n', at_label) - at_label);
    return l;
  };
  const std::string big = row("16 -> 31");
  const std::string small = row("256 -> 511");
  REQUIRE(big.find(": 90 ") != std::string::npos);
  REQUIRE(small.find(": 10 ") != std::string::npos);
  // The largest row is 40 stars wide; the other scaled to it (10 * 40 / 90 = 4).
  REQUIRE(std::count(big.begin(), big.end(), '*') == 40);
  REQUIRE(std::count(small.begin(), small.end(), '*') == 4);
  REQUIRE(big.find("|****") != std::string::npos);
  REQUIRE(big.back() == '|');
}

TEST_CASE("format_text: an applicable stage with no samples says so", "[report][text]") {
  IntervalAggregator agg;
  IntervalReport r;
  r.start = at(2026, 11, 22, 10, 0, 0, 0);
  r.end = r.start + seconds{1};
  r.data = &agg;
  r.final = true;
  const std::string text = format_text(lo_header(), r);
  INFO(text);
  REQUIRE(text.find("packets 0") != std::string::npos);
  REQUIRE(text.find("(final)") != std::string::npos);
  REQUIRE(text.find("total: ") != std::string::npos);
  REQUIRE(text.find("no samples this interval") != std::string::npos);
  REQUIRE(text.find('*') == std::string::npos);
  REQUIRE(text.find("drops: none") != std::string::npos);
}
