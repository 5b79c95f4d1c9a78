// Prometheus exposition: the `le` bounds and their labels, and
// render_prometheus's text (buckets, families, labels, escaping). The
// /metrics endpoint that serves it is test_metrics_server.cpp's.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "metrics_helpers.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/model/snapshot.hpp"

using netlatd::MetricsSnapshot;
using netlatd::Stage;
using nltest::example_snapshot;
using nltest::latency_of;

namespace {

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

constexpr const char *kUdp5000 = R"(dport="5000",proto="udp")";

// The `_bucket` samples of one stage of one series, in output order: (le label, value).
std::vector<std::pair<std::string, uint64_t>> buckets_of(const std::string &text, const std::string &stage,
                                                         const std::string &series = kUdp5000) {
  std::vector<std::pair<std::string, uint64_t>> out;
  const std::string prefix = "netlatd_stage_latency_seconds_bucket{stage=\"" + stage + "\"," + series + ",le=\"";
  for (const auto &line : lines_of(text)) {
    if (line.rfind(prefix, 0) != 0)
      continue;
    const auto close = line.find("\"} ", prefix.size());
    out.emplace_back(line.substr(prefix.size(), close - prefix.size()), std::stoull(line.substr(close + 3)));
  }
  return out;
}

std::string sample_value(const std::string &text, const std::string &series) {
  for (const auto &line : lines_of(text))
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
      return line.substr(series.size() + 1);
  return "<absent>";
}

}  // namespace

TEST_CASE("prometheus_bounds_ns: 64 ns to 10.7 s, edges of the JSON buckets, at the asked resolution", "[metrics]") {
  for (unsigned per : {1u, 2u, 4u, 8u}) {
    INFO("per power of two " << per);
    const auto bounds = netlatd::prometheus_bounds_ns(per);
    REQUIRE(bounds.size() >= 2);
    CHECK(bounds.front() == 64);  // below 100 ns: sub-microsecond stages are resolved
    CHECK(bounds.back() >= 10'000'000'000ull);
    CHECK(bounds[bounds.size() - 2] < 10'000'000'000ull);  // no bound past the first at 10 s
    // The powers of two from 2^6 to 2^32 whole, then 2^33 (8.6 s) on to the
    // first bound of at least 10 s.
    const std::map<unsigned, size_t> expected{{1, 29}, {2, 56}, {4, 110}, {8, 219}};
    CHECK(bounds.size() == expected.at(per));
    for (size_t i = 1; i < bounds.size(); ++i) {
      INFO("bound " << bounds[i]);
      CHECK(bounds[i] > bounds[i - 1]);
      // The resolution asked for: no step wider than one n-th of a power of two.
      CHECK(static_cast<double>(bounds[i]) / static_cast<double>(bounds[i - 1]) <= 1.0 + 1.0 / per + 1e-12);
    }
    // Every bound is the lower edge of a fine (JSON) bucket: a Prometheus
    // bucket is exactly a union of JSON buckets.
    for (uint64_t b : bounds)
      CHECK(netlatd::Histogram::bucket_bounds(netlatd::Histogram::bucket_index(b)).lower == b);
  }
  CHECK(netlatd::prometheus_bounds_ns(4).size() == 110);
  for (unsigned bad : {0u, 3u, 16u})
    CHECK_THROWS_AS(netlatd::prometheus_bounds_ns(bad), std::invalid_argument);
}

TEST_CASE("prometheus_le_label: seconds as the Go client libraries write them", "[metrics]") {
  using netlatd::prometheus_le_label;
  CHECK(prometheus_le_label(64) == "6.4e-08");
  CHECK(prometheus_le_label(80) == "8e-08");
  CHECK(prometheus_le_label(1'000) == "1e-06");
  CHECK(prometheus_le_label(2'500) == "2.5e-06");
  CHECK(prometheus_le_label(98'304) == "9.8304e-05");
  CHECK(prometheus_le_label(100'000) == "0.0001");
  CHECK(prometheus_le_label(131'072) == "0.000131072");
  CHECK(prometheus_le_label(1'310'720) == "0.00131072");
  CHECK(prometheus_le_label(1'000'000'000) == "1");
  CHECK(prometheus_le_label(10'737'418'240) == "10.73741824");
}

TEST_CASE("render_prometheus: histogram buckets are cumulative and end at _count", "[metrics]") {
  const std::string text = netlatd::render_prometheus(example_snapshot());
  const auto b = buckets_of(text, "total");
  REQUIRE(b.size() == netlatd::prometheus_bounds_ns(4).size() + 1);
  CHECK(b.front().first == "6.4e-08");
  CHECK(b.back().first == "+Inf");
  for (size_t i = 1; i < b.size(); ++i)
    CHECK(b[i].second >= b[i - 1].second);

  const std::map<std::string, uint64_t> by_le(b.begin(), b.end());
  CHECK(by_le.at("6.4e-08") == 0);
  CHECK(by_le.at("8e-08") == 0);
  CHECK(by_le.at("9.6e-08") == 1);  // 90 ns: its own bucket, not lumped under 1 µs
  CHECK(by_le.at("1.28e-06") == 1);
  CHECK(by_le.at("1.536e-06") == 2);  // 1.5 µs
  CHECK(by_le.at("0.00262144") == 2);
  CHECK(by_le.at("0.003145728") == 3);
  CHECK(by_le.at("10.73741824") == 3);
  CHECK(by_le.at("+Inf") == 4);
  CHECK(sample_value(text, std::string("netlatd_stage_latency_seconds_count{stage=\"total\",") + kUdp5000 + "}") ==
        "4");
  CHECK(std::stod(sample_value(text, std::string("netlatd_stage_latency_seconds_sum{stage=\"total\",") + kUdp5000 +
                                         "}")) == (90.0 + 1'500.0 + 3'000'000.0 + 20'000'000'000.0) / 1e9);

  // An applicable stage with no packets still has its series, all zero.
  const auto empty = buckets_of(text, "oncpu");
  REQUIRE(empty.size() == b.size());
  CHECK(empty.back().second == 0);

  // Each series of the breakdown is its own histogram.
  const auto tcp = buckets_of(text, "total", R"(dport="5001",proto="tcp")");
  REQUIRE(tcp.size() == b.size());
  CHECK(tcp.back().second == 1);
  CHECK(std::map<std::string, uint64_t>(tcp.begin(), tcp.end()).at("7.68e-07") == 1);  // 700 ns

  // The resolution is the snapshot's: 8 per power of two, 219 bounds.
  MetricsSnapshot fine = example_snapshot();
  fine.buckets_per_power_of_two = 8;
  CHECK(buckets_of(netlatd::render_prometheus(fine), "total").size() == 220);
}

TEST_CASE("render_prometheus: `le` counts exactly the values below its bound", "[metrics]") {
  // The bounds are edges of the fine buckets, so nothing is blurred: the
  // count under `le` is the number of values (whole nanoseconds) below it.
  for (unsigned per : {1u, 4u, 8u}) {
    MetricsSnapshot s = example_snapshot();
    s.buckets_per_power_of_two = per;
    const auto bounds = netlatd::prometheus_bounds_ns(per);
    auto &h = latency_of(s, 5000, 17, Stage::SockQueue);
    std::mt19937_64 rng(42);
    std::vector<uint64_t> values;
    for (int i = 0; i < 20'000; ++i) {
      // Log-uniform from 1 ns to ~40 s, so every bound gets neighbours.
      const double exp10 = std::uniform_real_distribution<double>(0.0, 10.6)(rng);
      values.push_back(static_cast<uint64_t>(std::pow(10.0, exp10)));
    }
    for (uint64_t bound : bounds)
      for (uint64_t v : {bound - 1, bound, bound + 1})
        values.push_back(v);
    for (uint64_t v : values)
      h.record(v);

    const auto b = buckets_of(netlatd::render_prometheus(s), "sock_queue");
    REQUIRE(b.size() == bounds.size() + 1);
    for (size_t i = 0; i < bounds.size(); ++i) {
      uint64_t below = 0;
      for (uint64_t v : values)
        below += v < bounds[i];
      INFO("le=" << b[i].first);
      CHECK(b[i].second == below);
    }
    CHECK(b.back().second == values.size());
  }
}

TEST_CASE("render_prometheus: families, labels, applicability", "[metrics]") {
  const std::string text = netlatd::render_prometheus(example_snapshot());
  CHECK(text.back() == '\n');

  // Only applicable stages have latency series; all stages have an applicable flag.
  CHECK(buckets_of(text, "irq").empty());
  CHECK(sample_value(text, "netlatd_stage_applicable{stage=\"irq\"}") == "0");
  CHECK(sample_value(text, "netlatd_stage_applicable{stage=\"softirq\"}") == "1");
  CHECK(sample_value(text, "netlatd_stage_hook_info{stage=\"total\",start_hook=\"tp_btf/start\",end_hook=\"tp_btf/end\"}") == "1");

  CHECK(sample_value(text, "netlatd_packets_total{proto=\"udp\"}") == "4");
  CHECK(sample_value(text, "netlatd_packets_total{proto=\"tcp\"}") == "1");
  // The kernel's drops are not netlatd's losses: two families.
  CHECK(sample_value(text, "netlatd_kernel_drops_total") == "7");
  CHECK(sample_value(text, "netlatd_losses_total{reason=\"ringbuf_full\"}") == "2");
  CHECK(sample_value(text, "netlatd_losses_total{reason=\"output_dropped\"}") == "0");
  CHECK(text.find("stack_dropped") == std::string::npos);
  CHECK(text.find("netlatd_drops_total") == std::string::npos);
  CHECK(sample_value(text, "netlatd_reads_unnamed_total{why=\"ambiguous\"}") == "3");
  CHECK(sample_value(text, "netlatd_queue_stamp_missing_total") == "5");
  CHECK(sample_value(text, "netlatd_sample_one_in") == "16");
  CHECK(sample_value(text, "netlatd_sampled_out_total") == "150");
  CHECK(sample_value(text, "netlatd_records_unordered_total") == "8");
  CHECK(sample_value(text, "netlatd_records_reader_unknown_total") == "9");
  // NAPI figures only where the hook gives them.
  CHECK(text.find("netlatd_napi_total") == std::string::npos);
  netlatd::MetricsSnapshot with_napi = example_snapshot();
  with_napi.napi = {{"polls", 10}, {"packets", 40}, {"budget_exhausted", 1}};
  const std::string napi_text = netlatd::render_prometheus(with_napi);
  CHECK(sample_value(napi_text, "netlatd_napi_total{kind=\"packets\"}") == "40");
  CHECK(sample_value(napi_text, "netlatd_napi_total{kind=\"budget_exhausted\"}") == "1");
  CHECK(sample_value(text, "netlatd_tcp_bytes_total{kind=\"read\"}") == "1000");
  CHECK(sample_value(text, "netlatd_tcp_bytes_total{kind=\"skipped\"}") == "64");
  CHECK(sample_value(text, "netlatd_hook_misses_total{hook=\"tp_btf/tcp_probe\"}") == "6");
  CHECK(sample_value(text, "netlatd_hook_misses_total{hook=\"tp_btf/netif_receive_skb\"}") == "0");
  CHECK(sample_value(text,
                     "netlatd_build_info{version=\"0.1.0\",kernel=\"6.18.0-test\",iface=\"lo\",ports=\"5000,5001\"}") ==
        "1");

  // Every sample line is well-formed and belongs to a family declared above it
  // with both HELP and TYPE.
  const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? \S+$)");
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  for (const auto &line : lines_of(text)) {
    INFO(line);
    if (line.rfind("# HELP ", 0) == 0) {
      helps.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      CHECK(helps.count(name) == 1);
      CHECK(types.count(name) == 0);  // declared once
      types[name] = line.substr(line.find(' ', 7) + 1);
      continue;
    }
    std::smatch m;
    REQUIRE(std::regex_match(line, m, sample_re));
    std::string family = m[1].str();
    for (const char *suffix : {"_bucket", "_sum", "_count"})
      if (!types.count(family) && family.size() > std::strlen(suffix) &&
          family.compare(family.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        family.resize(family.size() - std::strlen(suffix));
    CHECK(types.count(family) == 1);
  }
  CHECK(types.at("netlatd_stage_latency_seconds") == "histogram");
  CHECK(types.at("netlatd_packets_total") == "counter");
  CHECK(types.at("netlatd_kernel_drops_total") == "counter");
  CHECK(types.at("netlatd_losses_total") == "counter");
  CHECK(types.at("netlatd_build_info") == "gauge");
  CHECK(types.at("netlatd_stage_applicable") == "gauge");
}

TEST_CASE("render_prometheus: label values are escaped", "[metrics]") {
  MetricsSnapshot s = example_snapshot();
  s.iface = "we\"ird\\name\nx";
  s.losses = {{"a\"b", 1}};
  const std::string text = netlatd::render_prometheus(s);
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring(R"(iface="we\"ird\\name\nx")"));
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring(R"(netlatd_losses_total{reason="a\"b"} 1)"));
  // The raw newline must not survive: it would split the sample.
  for (const auto &line : lines_of(text))
    CHECK(line != "x\",ports=\"5000,5001\"} 1");
}
