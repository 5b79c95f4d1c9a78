// The interval aggregate's JSON line (format_json_line) and one packet's
// outlier line (format_outlier_json_line), parsed back and checked against
// numbers computed here from the records fed in.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "records.hpp"
#include "report_helpers.hpp"

using namespace netlatd;
using namespace std::chrono;
using nlohmann::json;
using nltest::at;
using nltest::kTcp;
using nltest::kUdp;
using nltest::lo_header;
using nltest::lo_packet;

namespace {

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
  REQUIRE(j["on_cpu_before_call"] == false);
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
  SECTION("a call waiting on CPU since before it started, its switch-in not timed: read start at the queueing") {
    p.flags = NETLATD_PKT_ON_CPU_BEFORE_CALL;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] - 1'000;
    const json k = json::parse(format_outlier_json_line(h, p, offset));
    REQUIRE(k["on_cpu_before_call"] == true);
    REQUIRE_FALSE(k["stamps"].contains("switch_in"));
    REQUIRE(k["stamps"]["read_start"] == k["stamps"]["sock_queue"]);
    REQUIRE(k["stages"]["sock_queue"] == 0);
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
