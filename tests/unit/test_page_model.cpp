// netlatd report: the numbers behind each chart from the golden input
// (tests/page/make_golden.py computes its histograms from samples; the
// expected figures here are those samples' own).
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <nlohmann/json.hpp>

#include "html.hpp"
#include "model.hpp"

using namespace netlatd::page;
using nlohmann::json;
using Catch::Matchers::WithinRel;

namespace {

const char *const kGolden = NETLATD_SOURCE_DIR "/tests/unit/fixtures/page/golden.jsonl";

json golden_model() {
  Builder b;
  std::ifstream in(kGolden);
  for (std::string line; std::getline(in, line);)
    b.add_line(line, "golden.jsonl");
  return b.model();
}

const json &stage(const json &m, const char *name) {
  for (const json &h : m["heatmaps"])
    if (h["stage"] == name)
      return h;
  FAIL("no heatmap for " << name);
  return m;
}

}  // namespace

TEST_CASE("page: what was read and skipped, by reason and first place", "[page]") {
  const json m = golden_model();
  const json &in = m["input"];
  CHECK(in["lines"] == 9);
  CHECK(in["skipped"] == 3);
  CHECK(in["intervals"] == 3);
  CHECK(in["outliers"] == 3);
  CHECK(in["outliers_ranked"] == 2);
  REQUIRE(in["skips"].size() == 3);
  CHECK(in["skips"][0]["reason"] == "not JSON (a truncated line?)");
  CHECK(in["skips"][0]["first"] == "golden.jsonl:6");
  CHECK(in["unknown"] == json::parse(R"([{"field":"interval.drops.new_reason","lines":1},
                                         {"field":"interval.future_field","lines":1}])"));
  const json &h = m["header"];
  CHECK(h["ports"] == json::array({5000}));
  CHECK(h["kernels"] == json::array({"6.18.0-1-amd64"}));
  CHECK(h["first_ms"] == 1795341600000);
  CHECK(h["last_ms"] == 1795341630000);
  CHECK(h["hooks"][3]["hooks"] == json::array({"tp_btf/sk_data_ready|tp_btf/tcp_probe \u2192 tp_btf/sched_switch"}));
  CHECK(h["hooks"][0]["applicable"] == false);
}

TEST_CASE("page: heatmap cells and percentile lines, one column an interval", "[page]") {
  const json m = golden_model();
  CHECK(m["columns"] == json::parse("[[1795341600000,1795341610000,1],[1795341610000,1795341620000,1],"
                                    "[1795341620000,1795341630000,1]]"));
  const json &total = stage(m, "total");
  CHECK(total["applicable"] == true);
  CHECK(total["count"] == 12);
  // Column 0: totals 20256, 20968, 22180, 25842 ns in rows [16384, 20480),
  // [20480, 24576) twice and [24576, 28672).
  CHECK(total["row_min"] == 39);
  CHECK(total["rows"][0] == json::array({16384, 20480}));
  CHECK(total["cells"][0] == json::array({0, 39, 1}));
  CHECK(total["cells"][1] == json::array({0, 40, 2}));
  CHECK(total["cells"][2] == json::array({0, 41, 1}));
  // One interval a column: each column's percentiles are its line's own.
  std::ifstream in(kGolden);
  std::vector<json> intervals;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("type", "") == "interval" && j.value("schema", 0) == 2)
      intervals.push_back(j);
  }
  REQUIRE(intervals.size() == 3);
  for (size_t c = 0; c < 3; ++c)
    for (const char *p : {"p50", "p99", "p999"}) {
      INFO("column " << c << " " << p);
      CHECK(total[p][c] == intervals[c]["stages"]["total"][std::string(p) + "_ns"]);
    }
  CHECK(total["p99"] == json::array({25842, 2309910, 19350}));
  // Over the whole span, the 12 samples merged: as netlatd would compute them.
  CHECK(total["overall"] == json::parse(R"({"p50":22143,"p99":2309910,"p999":2309910,"max":2309910})"));
  CHECK(stage(m, "irq")["applicable"] == false);
  CHECK(stage(m, "irq")["cells"].empty());
}

TEST_CASE("page: merged columns give the percentiles of all their samples", "[page]") {
  std::vector<IntervalLine> lines;
  std::ifstream in(kGolden);
  for (std::string line; std::getline(in, line);)
    if (auto p = parse_line(line); std::holds_alternative<IntervalLine>(p.line))
      lines.push_back(std::get<IntervalLine>(p.line));
  REQUIRE(lines.size() == 3);
  MergedStage ab;
  ab.add(lines[0].stages[kTotal]);
  ab.add(lines[1].stages[kTotal]);
  CHECK(ab.count() == 10);
  CHECK(ab.percentile(50) == 23167);  // make_golden.py's stats() of A + B
  CHECK(ab.percentile(90) == 64255);
  CHECK(ab.percentile(99) == 2309910);
  CHECK(ab.percentile(0) == 20256);
  CHECK_FALSE(MergedStage().percentile(50));
}

TEST_CASE("page: more intervals than columns are merged by time", "[page]") {
  std::vector<IntervalLine> lines(2 * kMaxColumns);
  for (size_t i = 0; i < lines.size(); ++i) {
    lines[i].start_ms = 10000 * static_cast<int64_t>(i);
    lines[i].end_ms = lines[i].start_ms + 10000;
  }
  std::vector<size_t> col_of;
  const std::vector<Column> cols = make_columns(lines, col_of);
  REQUIRE(cols.size() == kMaxColumns);
  for (size_t c = 0; c < cols.size(); ++c) {
    INFO("column " << c);
    CHECK(cols[c].t0_ms == 20000 * static_cast<int64_t>(c));
    CHECK(cols[c].t1_ms == cols[c].t0_ms + 20000);
    CHECK(cols[c].intervals == 2);
  }
  CHECK(col_of[0] == 0);
  CHECK(col_of[1] == 0);
  CHECK(col_of[479] == 239);
}

TEST_CASE("page: each stage's share of total per series, from the breakdown", "[page]") {
  const json m = golden_model();
  REQUIRE(m["shares"].size() == 2);
  const json &udp = m["shares"][0];
  CHECK(udp["series"] == "5000/udp");
  CHECK(udp["packets"] == 10);
  CHECK_THAT(udp["total_mean_ns"].get<double>(), WithinRel(250611.6, 1e-6));
  // Exact shares of the samples; the lines' means are rounded to 0.1 ns.
  const json &parts = udp["parts"];
  REQUIRE(parts.size() == 4);
  CHECK(parts[0]["stage"] == "softirq");
  CHECK_THAT(parts[0]["share"].get<double>(), WithinRel(0.006212002955968518, 1e-4));
  CHECK(parts[2]["stage"] == "sock_queue");
  CHECK_THAT(parts[2]["share"].get<double>(), WithinRel(0.9707351934228104, 1e-4));
  CHECK(m["shares"][1]["series"] == "5000/tcp");
  CHECK(m["shares"][1]["packets"] == 2);
}

TEST_CASE("page: losses by reason per column, unknown reasons kept", "[page]") {
  const json m = golden_model();
  auto reason = [&](const char *name) {
    for (const json &r : m["losses"]["reasons"])
      if (r["name"] == name)
        return r;
    FAIL("no reason " << name);
    return json();
  };
  CHECK(reason("stack_dropped")["per_column"] == json::array({1, 0, 0}));
  CHECK(reason("ringbuf_full")["per_column"] == json::array({0, 2, 0}));
  CHECK(reason("ringbuf_full")["total"] == 2);
  CHECK(reason("ambiguous_reads")["kind"] == "counter");
  CHECK(reason("early_reads")["kind"] == "counter");
  CHECK(reason("reader_unknown")["per_column"] == json::array({0, 1, 0}));
  CHECK(reason("new_reason")["kind"] == "unknown");
  CHECK(reason("new_reason")["per_column"] == json::array({0, 0, 3}));
}

TEST_CASE("page: the slowest packets' waterfalls, bars at their stamps' offsets", "[page]") {
  const json m = golden_model();
  REQUIRE(m["waterfalls"].size() == 2);  // the packet-only record has no total
  const json &w = m["waterfalls"][0];
  CHECK(w["total_ns"] == 2314900);
  CHECK(w["bars"] == json::parse(R"([{"stage":"total","start_ns":0,"dur_ns":2314900},
    {"stage":"irq","start_ns":0,"dur_ns":2100},{"stage":"softirq","start_ns":2100,"dur_ns":3200},
    {"stage":"netif_receive","start_ns":5300,"dur_ns":4500},{"stage":"sock_queue","start_ns":9800,"dur_ns":2300600},
    {"stage":"oncpu","start_ns":2310400,"dur_ns":4500}])"));
  CHECK(w["marks"] == json::parse(R"([{"stamp":"wakeup","at_ns":10100},{"stamp":"switch_in","at_ns":2310400},
    {"stamp":"call_start","at_ns":-1500000},{"stamp":"recv_return","at_ns":2314900}])"));
  CHECK(w["reader"] == json::parse(R"({"comm":"collector","pid":812,"tid":815,"cpu":0,"woken":true,
    "slept_in_call":true})"));
  CHECK(w["rx_cpu"] == 1);
  // Each bar ends where the next stage starts (the stages add up to total).
  for (size_t i = 1; i + 1 < w["bars"].size(); ++i)
    CHECK(w["bars"][i]["start_ns"].get<int64_t>() + w["bars"][i]["dur_ns"].get<int64_t>() ==
          w["bars"][i + 1]["start_ns"].get<int64_t>());
  CHECK(m["waterfalls"][1]["total_ns"] == 52000);
}

TEST_CASE("page: the page embeds its data without a way out of its script element", "[page]") {
  const json m = golden_model();
  const std::string data = embed_json(m);
  CHECK(data.find('<') == std::string::npos);
  CHECK(json::parse(data) == m);  // the reader named "</script><b>x" included
  const std::string page = render_page(m);
  size_t scripts = 0;
  for (size_t at = page.find("</script>"); at != std::string::npos; at = page.find("</script>", at + 1))
    ++scripts;
  CHECK(scripts == 2);
  // Nothing from elsewhere: no element that loads, and a policy that forbids it.
  for (const char *loads : {" src=", " href=", "url(", "https://", "@import"})
    CHECK(page.find(loads) == std::string::npos);
  CHECK(page.find("content=\"default-src 'none';") != std::string::npos);
}

TEST_CASE("page: nothing of netlatd's in the input leaves nothing to draw", "[page]") {
  Builder b;
  b.add_line("", "x");
  b.add_line("garbage", "x");
  b.add_line(R"({"type":"interval","schema":1})", "x");
  CHECK(b.usable() == 0);
  CHECK(b.lines() == 2);
  CHECK(b.skipped() == 2);
}

TEST_CASE("page: the coverage of all the lines, their counts summed; absent from lines without it", "[page]") {
  CHECK(golden_model()["header"]["coverage"].is_null());  // lines older than `coverage`
  std::ifstream in(kGolden);
  std::string first;
  std::getline(in, first);
  Builder b;
  const std::pair<int, int> counts[] = {{100, 100}, {0, 2}, {900, 400}};  // matching, recorded
  for (const auto &[matching, recorded] : counts) {
    json line = json::parse(first);
    line["coverage"] = {{"matching", matching}, {"recorded", recorded},
                        {"stages", {{"total", {{"recorded", recorded}}}}}};
    b.add_line(line.dump(), "covered.jsonl");
  }
  const json m = b.model();
  // 502 of 1000: not the mean of the lines' shares (1.0, none, 0.44).
  CHECK(m["header"]["coverage"] == json{{"matching", 1000}, {"recorded", 502}, {"lines", 3}});
  CHECK(m["input"]["unknown"] == json::array());

  json odd = json::parse(first);
  odd["coverage"] = {{"matching", 1}, {"recorded", 1}, {"ratio", 1}, {"stages", {{"teleport", {{"recorded", 1}}}}}};
  Builder c;
  c.add_line(odd.dump(), "odd.jsonl");
  CHECK(c.model()["input"]["unknown"] == json::parse(R"([{"field":"interval.coverage.ratio","lines":1},
                                                          {"field":"interval.coverage.stages.teleport","lines":1}])"));
}
