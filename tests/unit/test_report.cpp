// The interval aggregate and its three renderings, parsed back and checked
// against numbers computed here from the records fed in.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/base/clock.hpp"
#include "records.hpp"

using namespace netlatd;
using namespace std::chrono;
using nlohmann::json;

namespace {

constexpr uint8_t kUdp = 17, kTcp = 6;

// Loopback-shaped packet read by a reader already waiting in its receive call
// (called before the packet came, on CPU again `queue` after it was queued):
// no IRQ stamp; stage durations chosen by the caller.
netlatd_packet lo_packet(uint64_t t0, uint64_t softirq, uint64_t netif, uint64_t queue,
                         uint64_t oncpu, uint8_t proto = kUdp) {
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_CALL_START] = t0 - 1;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = t0;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = t0 + 100;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = t0 + 100 + softirq;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = t0 + 100 + softirq + netif;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = t0 + 100 + softirq + netif + queue;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = t0 + 100 + softirq + netif + queue + oncpu;
  p.l4proto = proto;
  p.dport = 5000;
  return p;
}

using nltest::lo_header;

system_clock::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s} +
         milliseconds{ms};
}

uint64_t exact_percentile(std::vector<uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()) - 1e-9));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

bool within_1_6_percent(uint64_t got, uint64_t exact) {
  return std::abs(static_cast<double>(got) - static_cast<double>(exact)) <=
         0.016 * static_cast<double>(exact);
}

}  // namespace

TEST_CASE("rfc3339_utc has millisecond precision in UTC", "[report]") {
  REQUIRE(rfc3339_utc(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
  REQUIRE(rfc3339_utc(at(2026, 11, 22, 10, 0, 0, 123)) == "2026-11-22T10:00:00.123Z");
  // Truncated, not rounded: 999.9 ms is still in the same second.
  REQUIRE(rfc3339_utc(at(2024, 2, 29, 23, 59, 59, 999) + microseconds{900}) ==
          "2024-02-29T23:59:59.999Z");
  REQUIRE(rfc3339_utc(system_clock::time_point{} - milliseconds{1}) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("rfc3339_utc_ns has nanosecond precision", "[report]") {
  REQUIRE(rfc3339_utc_ns(0) == "1970-01-01T00:00:00.000000000Z");
  const auto t = at(2026, 11, 22, 10, 0, 0, 123);
  const int64_t ns = duration_cast<nanoseconds>(t.time_since_epoch()).count() + 456'789;
  REQUIRE(rfc3339_utc_ns(ns) == "2026-11-22T10:00:00.123456789Z");
  REQUIRE(rfc3339_utc_ns(-1) == "1969-12-31T23:59:59.999999999Z");
}

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

TEST_CASE("format_json_line: one parseable line with the aggregate's numbers", "[report][json]") {
  IntervalAggregator agg;
  std::vector<uint64_t> queue_delays;
  uint64_t tcp_payload = 0;
  for (uint64_t i = 0; i < 1'000; ++i) {
    const uint64_t queue = 1'000 + i * i * 7;  // 1 µs .. ~7 ms, skewed
    queue_delays.push_back(queue);
    netlatd_packet p = lo_packet(1'000'000'000 + i * 100'000'000, 2'000 + i, 3'000, queue, 4'000,
                                 i % 4 == 0 ? kTcp : kUdp);
    p.len = static_cast<uint16_t>(100 + i);
    if (p.l4proto == kTcp)
      tcp_payload += p.len;
    // Every tenth packet's socket enqueue was not seen: NetifReceive and
    // SockQueue get no sample from it, the other stages do.
    if (i % 10 == 9) {
      p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 0;
      queue_delays.pop_back();
    }
    agg.add(p);
  }
  netlatd_packet unordered = lo_packet(5, 1, 1, 1, 1);
  unordered.stamp_ns[NETLATD_STAMP_IRQ] = 999'999'999'999;
  agg.add(unordered);

  const ReportHeader h = lo_header();
  IntervalReport r;
  r.start = at(2026, 11, 22, 10, 0, 0, 0);
  r.end = at(2026, 11, 22, 10, 0, 1, 500);
  r.data = &agg;
  r.drops = {{"ringbuf_full", 0}, {"inflight_full", 3}, {"stack_dropped", 0}};
  r.queue_unseen = 4;
  r.sampled_out = 6;
  r.tcp_bytes_read = 300'000;
  r.tcp_bytes_skipped = 1'448;
  r.hook_misses = {{"tp_btf/tcp_probe", 2}, {"tp_btf/sched_switch", 0}};

  const std::string line = format_json_line(h, r);
  REQUIRE(line.find('\n') == std::string::npos);
  const json j = json::parse(line);

  REQUIRE(j["type"] == "interval");
  REQUIRE(j["schema"] == 2);
  REQUIRE(j["time"] == "2026-11-22T10:00:01.500Z");
  REQUIRE(j["start"] == "2026-11-22T10:00:00.000Z");
  REQUIRE(j["interval_s"].get<double>() == 1.5);
  REQUIRE_FALSE(j.contains("final"));
  REQUIRE(j["host"] == "testhost");
  REQUIRE(j["iface"] == "lo");
  REQUIRE(j["ifindex"] == 1);
  REQUIRE(j["ports"] == json::array({5000, 5001}));
  REQUIRE(j["kernel"] == "6.18.0-test");
  REQUIRE(j["version"] == "0.1.0");
  REQUIRE(j["packets"] == 1'001);
  REQUIRE(j["udp"] == 751);
  REQUIRE(j["tcp"] == 250);
  REQUIRE(j["unordered"] == 1);
  REQUIRE(j["queue_unseen"] == 4);
  // The header's --sample, and the packets it left out this interval.
  REQUIRE(j["sample"] == 1);
  REQUIRE(j["sampled_out"] == 6);
  // The TCP records' own payload beside what the reads returned and what
  // gaps skipped.
  REQUIRE(j["tcp_bytes"]["read"] == 300'000);
  REQUIRE(j["tcp_bytes"]["reported"] == tcp_payload);
  REQUIRE(j["tcp_bytes"]["skipped"] == 1'448);
  REQUIRE(j["hook_misses"] == json{{"tp_btf/tcp_probe", 2}, {"tp_btf/sched_switch", 0}});

  REQUIRE(j["drops"].size() == 3);
  REQUIRE(j["drops"]["ringbuf_full"] == 0);  // zero, but present
  REQUIRE(j["drops"]["stack_dropped"] == 0);
  REQUIRE(j["drops"]["inflight_full"] == 3);

  const json &stages = j["stages"];
  REQUIRE(stages.size() == kStageCount);
  for (Stage s : kAllStages)
    REQUIRE(stages.contains(std::string(stage_name(s))));

  SECTION("a non-applicable stage says why and has no statistics") {
    const json &irq = stages["irq"];
    REQUIRE(irq["applicable"] == false);
    REQUIRE(irq["why_not"] == "interface has no IRQ lines (lo, veth)");
    REQUIRE(irq["hook_start"] == "tp_btf/irq_handler_entry");
    for (const char *key : {"count", "min_ns", "p50_ns", "p99_ns", "max_ns", "mean_ns", "buckets"})
      REQUIRE_FALSE(irq.contains(key));
  }

  SECTION("an applicable stage holds the recorded distribution") {
    const json &q = stages["sock_queue"];
    REQUIRE(q["applicable"] == true);
    REQUIRE_FALSE(q.contains("why_not"));
    REQUIRE(q["hook_start"] == "tp_btf/sk_data_ready");
    REQUIRE(q["hook_end"] == "tp_btf/sched_switch");
    REQUIRE(q["count"] == queue_delays.size());
    REQUIRE(q["min_ns"] == *std::min_element(queue_delays.begin(), queue_delays.end()));
    REQUIRE(q["max_ns"] == *std::max_element(queue_delays.begin(), queue_delays.end()));
    const std::pair<const char *, double> percentiles[] = {
        {"p50_ns", 50}, {"p90_ns", 90}, {"p99_ns", 99}, {"p999_ns", 99.9}};
    for (const auto &[key, p] : percentiles) {
      INFO(key);
      REQUIRE(within_1_6_percent(q[key].get<uint64_t>(), exact_percentile(queue_delays, p)));
    }
    double sum = 0;
    for (uint64_t v : queue_delays)
      sum += static_cast<double>(v);
    REQUIRE(std::abs(q["mean_ns"].get<double>() - sum / static_cast<double>(queue_delays.size())) <
            0.1);

    uint64_t bucket_total = 0, previous_upper = 0;
    for (const json &b : q["buckets"]) {
      REQUIRE(b.size() == 3);
      const auto lower = b[0].get<uint64_t>(), upper = b[1].get<uint64_t>(),
                 count = b[2].get<uint64_t>();
      REQUIRE(lower < upper);
      REQUIRE(lower >= previous_upper);
      REQUIRE(count > 0);
      previous_upper = upper;
      bucket_total += count;
    }
    REQUIRE(bucket_total == queue_delays.size());
    REQUIRE(stages["total"]["count"] == 1'000);
    REQUIRE(stages["softirq"]["min_ns"] == 2'000);
    REQUIRE(stages["softirq"]["max_ns"] == 2'999);
  }

  SECTION("final is present only when true") {
    r.final = true;
    REQUIRE(json::parse(format_json_line(h, r))["final"] == true);
  }
}

TEST_CASE("format_json_line: applicable stage without samples has count 0 and no stats",
          "[report][json]") {
  IntervalAggregator agg;
  netlatd_packet p = lo_packet(1'000'000, 1'000, 1'000, 1'000, 1'000);
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
  agg.add(p);
  IntervalReport r;
  r.start = at(2026, 1, 1, 0, 0, 0, 0);
  r.end = r.start + seconds{10};
  r.data = &agg;
  const json j = json::parse(format_json_line(lo_header(), r));
  for (const char *name : {"sock_queue", "oncpu"}) {
    const json &s = j["stages"][name];
    INFO(name);
    REQUIRE(s["applicable"] == true);
    REQUIRE(s["count"] == 0);
    REQUIRE_FALSE(s.contains("p50_ns"));
    REQUIRE_FALSE(s.contains("min_ns"));
    REQUIRE_FALSE(s.contains("buckets"));
  }
  REQUIRE(j["stages"]["netif_receive"]["count"] == 1);
  REQUIRE(j["stages"]["netif_receive"]["p50_ns"] == 1'000);
  REQUIRE(j["drops"].empty());
  REQUIRE(j["interval_s"].get<double>() == 10.0);
}

TEST_CASE("format_outlier_json_line: one packet's timeline", "[report][json][outlier]") {
  netlatd_packet p{};
  const uint64_t base = 50'000'000'000;  // 50 s of monotonic time
  p.stamp_ns[NETLATD_STAMP_IRQ] = base;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = base + 1'500;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = base + 4'000;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = base + 9'000;
  p.stamp_ns[NETLATD_STAMP_WAKEUP] = base + 9'200;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = base + 2'009'000;
  p.stamp_ns[NETLATD_STAMP_COPY] = base + 2'010'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = base + 2'012'345;
  p.rx_cpu = 1;
  p.reader_cpu = 0;
  p.reader_tgid = 4242;
  p.reader_tid = 4243;
  std::memcpy(p.reader_comm, "udp-reader", 10);
  p.len = 1200;
  p.iface_id = 1;
  p.dport = 5001;
  p.l4proto = kTcp;
  p.sport = 40123;
  p.flags = NETLATD_PKT_IPV6 | NETLATD_PKT_TCP | NETLATD_PKT_WOKEN | NETLATD_PKT_SLEPT_IN_CALL;

  const ReportHeader h = lo_header();
  const auto wall = at(2026, 11, 22, 10, 0, 0, 0);
  const int64_t wall_ns = duration_cast<nanoseconds>(wall.time_since_epoch()).count();
  const int64_t offset = wall_ns - static_cast<int64_t>(base);  // irq stamp == `wall`

  const std::string line = format_outlier_json_line(h, p, offset);
  REQUIRE(line.find('\n') == std::string::npos);
  const json j = json::parse(line);
  REQUIRE(j["type"] == "outlier");
  REQUIRE(j["schema"] == 2);
  REQUIRE(j["time"] == "2026-11-22T10:00:00.002Z");  // recv_return, ms precision
  REQUIRE(j["host"] == "testhost");
  REQUIRE(j["iface"] == "lo");
  REQUIRE(j["ports"] == json::array({5000, 5001}));
  REQUIRE(j["dport"] == 5001);
  REQUIRE(j["proto"] == "tcp");
  REQUIRE(j["family"] == "ipv6");
  REQUIRE(j["len"] == 1200);
  REQUIRE(j["total_ns"] == 2'012'345);

  REQUIRE(j["stamps"]["irq"] == "2026-11-22T10:00:00.000000000Z");
  REQUIRE(j["stamps"]["recv_return"] == "2026-11-22T10:00:00.002012345Z");
  REQUIRE_FALSE(j["stamps"].contains("softirq_raise"));  // 0 = not seen
  REQUIRE_FALSE(j["stamps"].contains("call_start"));
  // Asleep in its call when the packet came: the read starts at its switch-in.
  REQUIRE(j["stamps"]["read_start"] == j["stamps"]["switch_in"]);
  REQUIRE(j["stamps"].size() == 9);
  REQUIRE(j["stamps_mono_ns"]["irq"] == base);
  REQUIRE(j["stamps_mono_ns"]["recv_return"] == base + 2'012'345);
  REQUIRE(j["stamps_mono_ns"].size() == 9);
  REQUIRE(j["sport"] == 40123);
  REQUIRE(j["slept_in_call"] == true);
  REQUIRE(j["offsets_ns"]["irq"] == 0);
  REQUIRE(j["offsets_ns"]["wakeup"] == 9'200);
  REQUIRE(j["offsets_ns"]["copy"] == 2'010'000);
  REQUIRE_FALSE(j["offsets_ns"].contains("softirq_raise"));

  REQUIRE(j["stages"]["irq"] == 1'500);
  REQUIRE(j["stages"]["softirq"] == 2'500);
  REQUIRE(j["stages"]["netif_receive"] == 5'000);
  REQUIRE(j["stages"]["sock_queue"] == 2'000'000);
  REQUIRE(j["stages"]["oncpu"] == 3'345);
  REQUIRE(j["stages"]["total"] == 2'012'345);

  REQUIRE(j["rx_cpu"] == 1);
  REQUIRE(j["reader_cpu"] == 0);
  REQUIRE(j["reader_pid"] == 4242);
  REQUIRE(j["reader_tid"] == 4243);
  REQUIRE(j["reader_comm"] == "udp-reader");
  REQUIRE(j["ksoftirqd"] == false);
  REQUIRE(j["woken"] == true);

  SECTION("udp over ipv4 in ksoftirqd, with a stage missing") {
    p.l4proto = kUdp;
    p.flags = NETLATD_PKT_KSOFTIRQD;
    p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 0;
    const json k = json::parse(format_outlier_json_line(h, p, offset));
    REQUIRE(k["proto"] == "udp");
    REQUIRE(k["family"] == "ipv4");
    REQUIRE(k["ksoftirqd"] == true);
    REQUIRE(k["woken"] == false);
    REQUIRE_FALSE(k["stages"].contains("netif_receive"));
    REQUIRE_FALSE(k["stages"].contains("sock_queue"));
    // Without the queueing and the sleep in the call, where the read
    // started is unknown: oncpu is left out, not guessed.
    REQUIRE_FALSE(k["stages"].contains("oncpu"));
    REQUIRE_FALSE(k["stamps"].contains("read_start"));
  }
  SECTION("a packet whose reader cannot be named carries its own stamps only") {
    for (int st : {NETLATD_STAMP_WAKEUP, NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START, NETLATD_STAMP_COPY,
                   NETLATD_STAMP_RECV_RETURN})
      p.stamp_ns[st] = 0;
    p.reader_unknown = NETLATD_READER_AMBIGUOUS;
    const json k = json::parse(format_outlier_json_line(h, p, offset));
    REQUIRE(k["reader_unknown"] == "ambiguous");
    for (const char *key : {"reader_pid", "reader_tid", "reader_comm", "reader_cpu", "woken"})
      REQUIRE_FALSE(k.contains(key));
    REQUIRE(k["stages"]["netif_receive"] == 5'000);
    for (const char *stage : {"sock_queue", "oncpu", "in_socket", "total"})
      REQUIRE_FALSE(k["stages"].contains(stage));
    REQUIRE_FALSE(k.contains("total_ns"));
  }
  SECTION("stamps near 2^63 (none a kernel writes) still give a line, without overflow") {
    // Plus the offset, they pass INT64_MAX: the asan tier's UBSan fails a
    // signed overflow there.
    for (unsigned i = 0; i < NETLATD_STAMP_COUNT; ++i)
      p.stamp_ns[i] = uint64_t{INT64_MAX} - 1000 + i;
    const json k = json::parse(format_outlier_json_line(h, p, offset));
    REQUIRE(k["time"].get<std::string>().size() == 24);
    REQUIRE(k["offsets_ns"]["recv_return"] == NETLATD_STAMP_RECV_RETURN);
    REQUIRE(k["stages"]["total"] == NETLATD_STAMP_RECV_RETURN);
  }
  SECTION("a full-length comm without NUL and non-UTF-8 bytes still gives valid JSON") {
    std::memset(p.reader_comm, 'x', sizeof p.reader_comm);
    p.reader_comm[3] = '\xff';
    const json k = json::parse(format_outlier_json_line(h, p, offset));
    REQUIRE(k["reader_comm"].get<std::string>().size() >= 15);
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

namespace {

// A scripted pair of clocks: REALTIME runs `offset` ahead of MONOTONIC, each
// read costs `step` ns, and the reads listed in `stalls` (by index) come
// after the thread lost that many ns (preempted between two reads).
struct ScriptedClocks {
  int64_t mono = 1'000'000'000, offset = 1'700'000'000'000'000'000, step = 50;
  std::vector<std::pair<int, int64_t>> stalls;
  int reads = 0;
  int64_t operator()(clockid_t id) {
    for (auto &[at, ns] : stalls)
      if (at == reads)
        mono += ns;
    reads++;
    mono += step;
    return id == CLOCK_REALTIME ? mono + offset : mono;
  }
};

}  // namespace

TEST_CASE("measure_realtime_offset: a sample preempted between its reads is not used", "[report][clock]") {
  ScriptedClocks c;
  // The first sample stalls 12.8 ms between its REALTIME and second
  // MONOTONIC read, the second between its first two reads: a plain
  // REALTIME - MONOTONIC would be off by 12.8 ms (what a starved VM showed).
  c.stalls = {{2, 12'800'000}, {4, 9'000'000}};
  ClockRead read = [&](clockid_t id) { return c(id); };
  const ClockOffset o = measure_realtime_offset(read, 4);
  CHECK(o.window_ns == 2 * c.step);
  CHECK(o.offset_ns == c.offset);  // midpoint of the bracket: exact here
  CHECK(c.reads == 9);  // stopped at the first tight sample (the third)
}

TEST_CASE("measure_realtime_offset: every sample preempted gives the tightest, with its window", "[report][clock]") {
  ScriptedClocks c;
  c.stalls = {{1, 5'000'000}, {4, 3'000'000}, {7, 4'000'000}};
  ClockRead read = [&](clockid_t id) { return c(id); };
  const ClockOffset o = measure_realtime_offset(read, 3);
  CHECK(o.window_ns == 3'000'000 + 2 * c.step);
  // Off by at most half the window from the true offset.
  CHECK(std::llabs(o.offset_ns - c.offset) <= o.window_ns / 2);
}

TEST_CASE("choose_realtime_offset keeps a known offset over a preempted measurement", "[report][clock]") {
  const ClockOffset good{1000, 300}, preempted{13'000'000, 12'800'000}, tight{2000, 200};
  CHECK(choose_realtime_offset({}, preempted).offset_ns == preempted.offset_ns);  // nothing better known
  CHECK(choose_realtime_offset(good, preempted).offset_ns == good.offset_ns);
  CHECK(choose_realtime_offset(good, tight).offset_ns == tight.offset_ns);  // the clock was stepped: follow it
  CHECK(choose_realtime_offset(preempted, {5000, 900'000}).offset_ns == 5000);  // wide, but better than before
}
