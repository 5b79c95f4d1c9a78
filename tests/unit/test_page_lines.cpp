// netlatd report: the line parser and the heatmap's rows, against netlatd's
// own buckets and docs/OUTPUT.md's lines.
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "charts.hpp"
#include "lines.hpp"
#include "netlatd/model/histogram.hpp"

using namespace netlatd::page;

namespace {

std::vector<std::string> golden_lines() {
  std::ifstream in(NETLATD_SOURCE_DIR "/tests/unit/fixtures/page/golden.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  REQUIRE(out.size() == 9);
  return out;
}

}  // namespace

TEST_CASE("page: heatmap rows are 4 a power of two from 64 ns, edges of netlatd's buckets", "[page]") {
  CHECK(row_of(0) == 0);
  CHECK(row_of(1) == 1);
  CHECK(row_of(63) == 6);
  CHECK(row_of(64) == 7);
  CHECK(row_bounds(7).lower == 64);
  CHECK(row_bounds(7).upper == 80);
  CHECK(row_bounds(10).lower == 112);
  CHECK(row_bounds(10).upper == 128);
  CHECK(row_of(1488) == 24);  // docs' softirq bucket [1488, 1504)
  CHECK(row_bounds(24).lower == 1280);
  CHECK(row_bounds(24).upper == 1536);
  CHECK(row_bounds(39).lower == 16384);
  CHECK(row_bounds(39).upper == 20480);
  for (size_t r = 0; r < 200; ++r) {
    INFO("row " << r);
    CHECK(row_bounds(r).upper == row_bounds(r + 1).lower);
    CHECK(row_of(row_bounds(r).lower) == r);
    CHECK(row_of(row_bounds(r).upper - 1) == r);
  }
  // Every bucket the daemon writes lies in exactly one row.
  for (unsigned i = 0; i < netlatd::Histogram::kBucketCount - 64; ++i) {
    const auto b = netlatd::Histogram::bucket_bounds(i);
    INFO("bucket [" << b.lower << ", " << b.upper << ")");
    CHECK(row_of(b.lower) == row_of(b.upper - 1));
  }
}

TEST_CASE("page: RFC 3339 UTC times to ms, anything else refused", "[page]") {
  CHECK(parse_time_ms("2026-11-22T10:00:10.000Z") == 1795341610000);
  CHECK(parse_time_ms("2026-11-22T10:00:10Z") == 1795341610000);
  CHECK(parse_time_ms("2026-11-22T10:00:07.123456789Z") == 1795341607123);
  CHECK(parse_time_ms("1970-01-01T00:00:00.5Z") == 500);
  for (const char *bad : {"2026-11-22T10:00:10.000", "2026-11-22 10:00:10Z", "2026-13-22T10:00:10Z",
                          "2026-11-22T10:00:10.Z", "2026-11-22T10:00:10.000+01:00", "", "2026-11-2"})
    CHECK_FALSE(parse_time_ms(bad));
}

TEST_CASE("page: an interval line of the golden input, as the schema says", "[page]") {
  const Parsed p = parse_line(golden_lines()[0]);
  REQUIRE(std::holds_alternative<IntervalLine>(p.line));
  const IntervalLine &l = std::get<IntervalLine>(p.line);
  CHECK(p.unknown_fields.empty());
  CHECK(l.start_ms == 1795341600000);
  CHECK(l.end_ms == 1795341610000);
  CHECK(l.iface == "lo");
  CHECK(l.ports == std::vector<uint64_t>{5000});
  CHECK(l.packets == 4);
  CHECK_FALSE(l.stages[0].applicable);
  CHECK(l.stages[0].why_not.find("no IRQ lines") != std::string::npos);
  const StageStats &total = l.stages[kTotal];
  CHECK(total.hook_start == "tp_btf/softirq_raise");
  CHECK(total.count == 4);
  CHECK(total.min_ns == 20256);
  CHECK(total.max_ns == 25842);
  REQUIRE(total.buckets.size() == 4);
  CHECK(total.buckets[0].lower == 20224);
  CHECK(total.buckets[0].upper == 20480);
  REQUIRE(l.breakdown.size() == 1);
  CHECK(l.breakdown[0].label == "5000/udp");
  bool stack = false;
  for (const auto &[name, n] : l.losses)
    stack = stack || (name == "stack_dropped" && n == 1);
  CHECK(stack);
}

TEST_CASE("page: unknown fields are named, the line still read", "[page]") {
  const std::vector<std::string> g = golden_lines();
  const Parsed b = parse_line(g[2]);
  REQUIRE(std::holds_alternative<IntervalLine>(b.line));
  CHECK(b.unknown_fields == std::vector<std::string>{"interval.future_field"});
  const Parsed c = parse_line(g[8]);
  REQUIRE(std::holds_alternative<IntervalLine>(c.line));
  CHECK(std::get<IntervalLine>(c.line).final);
  CHECK(c.unknown_fields == std::vector<std::string>{"interval.drops.new_reason"});
  const Parsed o = parse_line(R"({"type":"outlier","schema":2,"time":"2026-11-22T10:00:07.125Z","dport":5000,)"
                              R"("proto":"udp","offsets_ns":{"irq":0,"teleport":5},"stages":{},"hue":1})");
  REQUIRE(std::holds_alternative<OutlierLine>(o.line));
  CHECK(o.unknown_fields == std::vector<std::string>{"outlier.hue", "outlier.offsets_ns.teleport"});
}

TEST_CASE("page: outlier lines, with and without a reader", "[page]") {
  const std::vector<std::string> g = golden_lines();
  const Parsed p = parse_line(g[1]);
  REQUIRE(std::holds_alternative<OutlierLine>(p.line));
  const OutlierLine &o = std::get<OutlierLine>(p.line);
  CHECK(p.unknown_fields.empty());
  CHECK(o.total_ns == 2314900);
  CHECK(o.reader_comm == "collector");
  CHECK(o.reader_pid == 812);
  CHECK(o.reader_tid == 815);
  CHECK(o.reader_cpu == 0);
  CHECK(o.rx_cpu == 1);
  CHECK(o.woken);
  const Parsed q = parse_line(g[3]);
  REQUIRE(std::holds_alternative<OutlierLine>(q.line));
  CHECK_FALSE(std::get<OutlierLine>(q.line).total_ns);
  CHECK(std::get<OutlierLine>(q.line).reader_unknown == "ambiguous");
}

TEST_CASE("page: lines that are not netlatd's are skipped with a reason", "[page]") {
  const std::vector<std::string> g = golden_lines();
  auto reason = [](const std::string &line) {
    const Parsed p = parse_line(line);
    REQUIRE(std::holds_alternative<Skip>(p.line));
    return std::get<Skip>(p.line).reason;
  };
  CHECK(reason(g[5]) == "not JSON (a truncated line?)");
  CHECK(reason(g[6]) == "not a netlatd line (no \"type\")");
  CHECK(reason(g[7]) == "schema 3, not 2");
  CHECK(reason(R"({"type":"hello","schema":2})") == "type \"hello\" not known");
  CHECK(reason("[1,2,3]") == "not a netlatd line (no \"type\")");
  CHECK(reason(R"({"type":"interval","schema":2,"time":"x","start":"y"})") ==
        "interval.time is not an RFC 3339 UTC time");
  std::string wrong = g[0];
  wrong.replace(wrong.find("\"packets\":4"), 11, "\"packets\":-4");
  CHECK(reason(wrong) == "interval.packets is not an unsigned integer");
  std::string unordered = g[0];
  unordered.replace(unordered.find("[[20224,20480,1]"), 16, "[[21000,20480,1]");
  CHECK(reason(unordered) == "interval.stages.total.buckets has buckets out of order");
}
