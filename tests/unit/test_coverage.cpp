// The coverage: the share of the matching packets whose stages are in the
// histograms, worked out from the kernel's counts and the interval's
// records, and written in the JSON line, the text view and the metrics.
#include <cstdint>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "netlatd/model/coverage.hpp"
#include "netlatd/model/losses.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/output/prometheus.hpp"

using namespace netlatd;
using nlohmann::json;

namespace {

constexpr size_t kIrq = static_cast<size_t>(Stage::Irq);

// A packet on loopback with every stamp but the IRQ's, read by a reader
// asleep in its call: it adds to every stage but irq. `reader`: false for a
// packet-only record (no reader named), which has the stages before the read only.
netlatd_packet lo_packet(uint64_t t0, bool reader = true) {
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = t0;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = t0 + 100;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = t0 + 1'000;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = t0 + 3'000;
  p.l4proto = 17;
  p.dport = 5000;
  if (!reader) {
    p.reader_unknown = NETLATD_READER_AMBIGUOUS;
    return p;
  }
  p.stamp_ns[NETLATD_STAMP_CALL_START] = t0 - 1;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = t0 + 10'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = t0 + 12'000;
  return p;
}

ReportHeader lo_header() {
  ReportHeader h;
  h.host = "testhost";
  h.iface = "lo";
  h.ports = {5000};
  h.stages[kIrq].applicable = false;
  h.stages[kIrq].why_not = "the interface has no IRQ lines (lo, veth and tun deliver in software)";
  return h;
}

KernelCounts kernel(uint64_t matched, uint64_t inflight_full = 0, uint64_t stack_dropped = 0) {
  KernelCounts k;
  k.counters[NETLATD_CNT_MATCHED] = matched;
  k.drops[NETLATD_DROP_INFLIGHT_FULL] = inflight_full;
  k.drops[NETLATD_DROP_STACK_DROPPED] = stack_dropped;
  return k;
}

}  // namespace

TEST_CASE("coverage: matching packets are those matched, tracked or not, less the stack's drops and --cgroup's",
          "[coverage]") {
  CHECK(matching_packets({.matched = 100}) == 100);
  // Matched at the filter but given no entry: matching packets, with no record.
  CHECK(matching_packets({.matched = 100, .inflight_full = 7, .tcp_segs_full = 3}) == 110);
  CHECK(matching_packets({.matched = 100, .stack_dropped = 5, .cgroup_outside = 20}) == 75);
  // A drop counted before its packet: 0, never a wrapped 1.8e19.
  CHECK(matching_packets({.matched = 1, .stack_dropped = 2}) == 0);
}

TEST_CASE("coverage: a share of no packets is absent, not 100 %; a share is at most whole", "[coverage]") {
  const Share none{0, 0};
  CHECK_FALSE(none.share());
  CHECK_FALSE(none.rounded_down(1000));
  CHECK_FALSE(none.low());
  CHECK(format_share(none) == "no packets");
  // Records of packets matched in the interval before: more than matched.
  const Share carried{12, 10};
  CHECK(*carried.share() == 1.0);
  CHECK(format_share(carried) == "100.0 %");
  CHECK_FALSE(carried.low());
  // Rounded down: 9996 of 10000 is not all of them.
  CHECK(format_share(Share{9'996, 10'000}) == "99.9 %");
  CHECK(*Share{9'996, 10'000}.rounded_down(10'000) == 9'996);
  CHECK(format_share(Share{1, 3}) == "33.3 %");
  CHECK(format_share(Share{0, 3}) == "0.0 %");
  // The text's threshold.
  CHECK(Share{94, 100}.low());
  CHECK_FALSE(Share{95, 100}.low());
  // Counts beyond what times 10000 fits in 64 bits.
  CHECK(*Share{UINT64_MAX / 2, UINT64_MAX}.rounded_down(10'000) == 4'999);
}

TEST_CASE("coverage: a drop counted an interval after its packet lowers no interval below 0, and the intervals "
          "add up to the total",
          "[coverage]") {
  Losses l(false, false);
  // Matched between the attach and the start: their records wait in the
  // ring for the first interval, so they count there.
  l.start(kernel(1'000));
  l.read(kernel(1'010), 0, 0);
  IntervalReport first;
  l.end_interval(first);
  CHECK(first.matching == 1'010);
  // Three of those dropped by the stack, counted now; one new packet.
  l.read(kernel(1'011, 0, 3), 0, 0);
  IntervalReport second;
  l.end_interval(second);
  CHECK(second.matching == 0);
  // Five more, and one the filter matched but could not track.
  l.read(kernel(1'016, 1, 3), 0, 0);
  IntervalReport third;
  l.end_interval(third);
  // 1,014 now against the 1,010 shown: the six new ones less the three
  // dropped, which the second interval could not take back.
  CHECK(third.matching == 4);
  CHECK(first.matching + second.matching + third.matching == 1'014);
  // The metrics' counter is the same count, never going down.
  MetricsSnapshot m;
  l.publish(m);
  CHECK(m.matching == 1'014);
}

TEST_CASE("coverage: the interval line's object, overall and per applicable stage", "[coverage][json]") {
  IntervalAggregator agg;
  for (uint64_t i = 0; i < 90; i++)
    agg.add(lo_packet(1'000'000 + i * 100'000));
  for (uint64_t i = 0; i < 6; i++)  // ambiguous reads' datagrams: no read stages
    agg.add(lo_packet(50'000'000 + i * 100'000, false));
  netlatd_packet unordered = lo_packet(90'000'000);
  unordered.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = 89'000'000;  // before its raise: in no stage
  agg.add(unordered);
  IntervalReport r;
  r.data = &agg;
  r.matching = 100;  // 3 more were matched and counted, not recorded
  const json j = json::parse(format_json_line(lo_header(), r));
  INFO(j.dump());
  REQUIRE(j.contains("coverage"));
  const json &c = j["coverage"];
  CHECK(c["matching"] == 100);
  CHECK(c["recorded"] == 96);  // 97 records, one in no stage
  CHECK(c["share"] == 0.96);
  CHECK_FALSE(c["stages"].contains("irq"));  // not applicable on lo: no share, not 0 %
  CHECK(c["stages"]["softirq"] == json{{"recorded", 96}, {"share", 0.96}});
  CHECK(c["stages"]["netif_receive"]["recorded"] == 96);
  CHECK(c["stages"]["sock_queue"] == json{{"recorded", 90}, {"share", 0.9}});
  CHECK(c["stages"]["total"] == json{{"recorded", 90}, {"share", 0.9}});
  // Each stage's numerator is the count of its histogram in the same line.
  for (const auto &[stage, share] : c["stages"].items())
    CHECK(share["recorded"] == j["stages"][stage]["count"]);
}

TEST_CASE("coverage: an interval with no matching packet says so, without a share", "[coverage][json][text]") {
  IntervalAggregator agg;
  IntervalReport r;
  r.data = &agg;
  const json c = json::parse(format_json_line(lo_header(), r))["coverage"];
  CHECK(c["matching"] == 0);
  CHECK(c["recorded"] == 0);
  CHECK_FALSE(c.contains("share"));
  CHECK_FALSE(c["stages"]["total"].contains("share"));
  const std::string text = format_text(lo_header(), r);
  INFO(text);
  CHECK(text.find("\ncoverage: no packets matched this interval\n") != std::string::npos);
  CHECK(text.find("100") == std::string::npos);
  CHECK(text.find("WARNING") == std::string::npos);

  // Records of packets matched in the interval before, none matched in this one.
  agg.add(lo_packet(1'000'000));
  CHECK(format_text(lo_header(), r).find("coverage: no packets matched this interval (1 records of packets "
                                         "matched before it)") != std::string::npos);
  const json carried = json::parse(format_json_line(lo_header(), r))["coverage"];
  CHECK(carried["recorded"] == 1);
  CHECK_FALSE(carried.contains("share"));
}

TEST_CASE("coverage: the text view shows the share under its header, and warns when it is low", "[coverage][text]") {
  IntervalAggregator agg;
  for (uint64_t i = 0; i < 99; i++)
    agg.add(lo_packet(1'000'000 + i * 100'000));
  IntervalReport r;
  r.data = &agg;
  r.matching = 100;
  std::string text = format_text(lo_header(), r);
  INFO(text);
  const size_t second_line = text.find('\n') + 1;
  CHECK(text.substr(second_line, text.find('\n', second_line) - second_line) ==
        "coverage 99.0 % of 100 matching packets (softirq 99.0 %, netif_receive 99.0 %, sock_queue 99.0 %, "
        "oncpu 99.0 %, in_socket 99.0 %, total 99.0 %)");

  r.matching = 1'000;  // 99 of 1,000: most were counted, not recorded
  text = format_text(lo_header(), r);
  CHECK(text.find("coverage 9.9 % LOW of 1000 matching packets (softirq 9.9 % LOW,") != std::string::npos);
  CHECK(text.find("total 9.9 % LOW)  WARNING: under 95 %: the histograms stand for part of the traffic only\n") !=
        std::string::npos);
}

TEST_CASE("coverage: /metrics has the numerator and denominator as counters", "[coverage][metrics]") {
  MetricsSnapshot m;
  for (size_t i = 0; i < kStageCount; i++)
    m.stages[i].applicable = i != kIrq;
  IntervalAggregator agg;
  for (uint64_t i = 0; i < 40; i++)
    agg.add(lo_packet(1'000'000 + i * 100'000, i % 10 != 0));
  for (const auto &[key, series] : agg.series())
    for (size_t i = 0; i < kStageCount; i++)
      m.series[key].latency[i].merge(series.stages[i]);
  m.packets_udp = 40;
  m.matching = 50;
  const std::string page = render_prometheus(m);
  INFO(page);
  CHECK(page.find("# TYPE netlatd_matching_packets_total counter\nnetlatd_matching_packets_total 50\n") !=
        std::string::npos);
  CHECK(page.find("# TYPE netlatd_recorded_packets_total counter\nnetlatd_recorded_packets_total 40\n") !=
        std::string::npos);
  CHECK(page.find("# TYPE netlatd_stage_recorded_packets_total counter\n") != std::string::npos);
  CHECK(page.find("netlatd_stage_recorded_packets_total{stage=\"softirq\"} 40\n") != std::string::npos);
  CHECK(page.find("netlatd_stage_recorded_packets_total{stage=\"total\"} 36\n") != std::string::npos);
  CHECK(page.find("netlatd_stage_recorded_packets_total{stage=\"irq\"}") == std::string::npos);
}
