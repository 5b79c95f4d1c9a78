// The breakdown (--by): which series a record goes to, how reader cgroups
// are bounded (top N per interval for JSON, first N for Prometheus), their
// names, and the JSON `breakdown` the interval line carries.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <nlohmann/json.hpp>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/output/labels.hpp"
#include "records.hpp"

using namespace netlatd;
using nlohmann::json;

namespace {

constexpr uint8_t kUdp = 17, kTcp = 6;

netlatd_packet packet(uint16_t dport, uint8_t proto, bool ipv6, uint64_t cgroup, uint64_t total = 10'000) {
  return nltest::path_packet(dport, proto, ipv6, cgroup, total);
}

SeriesKey key(uint16_t dport, uint8_t proto, uint8_t family = 0, uint64_t cgroup = 0) {
  return SeriesKey{dport, proto, family, cgroup};
}

ReportHeader header() {
  ReportHeader h;
  h.host = "testhost";
  h.iface = "lo";
  h.ports = {5000, 5001};
  for (auto &s : h.stages)
    s.start_hook = s.end_hook = "tp_btf/x";
  h.stages[static_cast<size_t>(Stage::Irq)].applicable = false;
  return h;
}

json interval_json(const IntervalAggregator &agg, CgroupNames *names = nullptr) {
  IntervalReport r;
  r.data = &agg;
  return json::parse(format_json_line(header(), r, names));
}

}  // namespace

TEST_CASE("parse_breakdown: the keys in any order, none, and clear errors", "[breakdown]") {
  CHECK(parse_breakdown("dport,proto") == BreakdownSpec{});
  CHECK(parse_breakdown("proto,dport") == BreakdownSpec{});
  CHECK(parse_breakdown("dport,proto,family,cgroup") == BreakdownSpec{true, true, true, true});
  CHECK(parse_breakdown("cgroup") == BreakdownSpec{false, false, false, true});
  CHECK(parse_breakdown("none") == BreakdownSpec{false, false, false, false});
  CHECK(breakdown_keys(parse_breakdown("family,cgroup,proto,dport")) ==
        std::vector<std::string_view>{"dport", "proto", "family", "cgroup"});
  CHECK(breakdown_keys(parse_breakdown("none")).empty());
  CHECK_THROWS_WITH(parse_breakdown("dport,port"),
                    "unknown key 'port' (known: dport, proto, family, cgroup, iface; or none)");
  CHECK_THROWS_WITH(parse_breakdown("dport,"), "ends with a comma");
  CHECK_THROWS_AS(parse_breakdown(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_breakdown("dport,,proto"), std::invalid_argument);
}

TEST_CASE("series_key: only the keys split by; no reader, no cgroup", "[breakdown]") {
  const netlatd_packet p = packet(5000, kTcp, true, 77);
  CHECK(series_key(BreakdownSpec{}, p) == key(5000, kTcp));
  CHECK(series_key(parse_breakdown("none"), p) == SeriesKey{});
  CHECK(series_key(parse_breakdown("family"), p) == key(0, 0, 6));
  CHECK(series_key(parse_breakdown("dport,cgroup"), p) == key(5000, 0, 0, 77));
  netlatd_packet unread = p;
  unread.reader_unknown = NETLATD_READER_AMBIGUOUS;  // a packet-only record: whose cgroup is not known
  CHECK(series_key(parse_breakdown("cgroup"), unread).cgroup == kNoCgroup);
}

TEST_CASE("IntervalAggregator: one series per key, totals unchanged, idle series dropped", "[breakdown]") {
  IntervalAggregator agg(parse_breakdown("dport,proto,family"));
  agg.add(packet(5000, kUdp, false, 0, 10'000));
  agg.add(packet(5000, kUdp, false, 0, 20'000));
  agg.add(packet(5000, kUdp, true, 0, 30'000));
  agg.add(packet(5001, kTcp, false, 0, 40'000));
  REQUIRE(agg.series().size() == 3);
  const auto &v4 = agg.series().at(key(5000, kUdp, 4));
  CHECK(v4.packets == 2);
  CHECK(v4.stages[static_cast<size_t>(Stage::Total)].count() == 2);
  CHECK(v4.stages[static_cast<size_t>(Stage::Total)].max() == 20'000);
  CHECK(agg.series().at(key(5000, kUdp, 6)).packets == 1);
  CHECK(agg.series().at(key(5001, kTcp, 4)).stages[static_cast<size_t>(Stage::Total)].min() == 40'000);
  // The totals are over every series.
  CHECK(agg.stage(Stage::Total).count() == 4);

  agg.reset();  // every series had packets: all kept, emptied
  CHECK(agg.series().size() == 3);
  CHECK(agg.series().at(key(5000, kUdp, 4)).packets == 0);
  agg.add(packet(5001, kTcp, false, 0));
  agg.reset();  // the two idle for a whole interval go
  REQUIRE(agg.series().size() == 1);
  CHECK(agg.series().count(key(5001, kTcp, 4)) == 1);
}

TEST_CASE("fold_cgroups_top: the N busiest cgroups per port and protocol, the rest as other", "[breakdown]") {
  SeriesMap series;
  auto add = [&](uint16_t dport, uint64_t cgroup, uint64_t packets) {
    auto &s = series[key(dport, kUdp, 0, cgroup)];
    s.packets = packets;
    s.stages[static_cast<size_t>(Stage::Total)].record(1000 * cgroup, packets);
  };
  add(5000, 11, 50);
  add(5000, 12, 5);
  add(5000, 13, 30);
  add(5000, 14, 30);  // ties: the lower id wins
  add(5000, kNoCgroup, 9);  // no reader named: never folded
  add(5001, 12, 1);  // another port: its own top N
  const SeriesMap folded = fold_cgroups_top(series, 2);
  CHECK(folded.count(key(5000, kUdp, 0, 11)) == 1);
  CHECK(folded.count(key(5000, kUdp, 0, 13)) == 1);
  CHECK(folded.count(key(5000, kUdp, 0, 14)) == 0);
  CHECK(folded.count(key(5000, kUdp, 0, 12)) == 0);
  const auto &other = folded.at(key(5000, kUdp, 0, kOtherCgroup));
  CHECK(other.packets == 35);
  CHECK(other.stages[static_cast<size_t>(Stage::Total)].count() == 35);
  CHECK(other.stages[static_cast<size_t>(Stage::Total)].min() == 12'000);
  CHECK(folded.at(key(5000, kUdp, 0, kNoCgroup)).packets == 9);
  CHECK(folded.at(key(5001, kUdp, 0, 12)).packets == 1);
  CHECK(folded.size() == 5);
  // Nothing to fold: unchanged.
  CHECK(fold_cgroups_top(series, 8).size() == series.size());
}

TEST_CASE("StickyCgroups: the first N keep their series for good, later ones are other", "[breakdown]") {
  StickyCgroups sticky(2);
  CHECK(sticky.map(100) == 100);
  CHECK(sticky.map(kNoCgroup) == kNoCgroup);  // does not take a place
  CHECK(sticky.map(200) == 200);
  CHECK(sticky.map(300) == kOtherCgroup);
  CHECK(sticky.map(100) == 100);
  CHECK(sticky.map(200) == 200);
  CHECK(sticky.map(300) == kOtherCgroup);
}

TEST_CASE("CgroupNames and series_labels", "[breakdown]") {
  int lookups = 0;
  CgroupNames names([&](uint64_t id) -> std::optional<std::string> {
    ++lookups;
    if (id == 42)
      return "/system.slice/echo.service";
    return std::nullopt;
  });
  CHECK(names.name(42) == "/system.slice/echo.service");
  CHECK(names.name(42) == "/system.slice/echo.service");
  CHECK(lookups == 1);  // looked up once
  CHECK(names.name(7) == "cgroup-id:7");
  CHECK(names.name(kNoCgroup) == "unknown");
  CHECK(names.name(kOtherCgroup) == "other");

  using Labels = std::vector<std::pair<std::string, std::string>>;
  CHECK(series_labels(parse_breakdown("dport,proto,family,cgroup"), key(5000, kTcp, 6, 42), names) ==
        Labels{{"dport", "5000"}, {"proto", "tcp"}, {"family", "ipv6"}, {"cgroup", "/system.slice/echo.service"}});
  CHECK(series_labels(BreakdownSpec{}, key(53, kUdp), names) == Labels{{"dport", "53"}, {"proto", "udp"}});
  CHECK(series_labels(parse_breakdown("none"), SeriesKey{}, names).empty());
}

TEST_CASE("CgroupNames finds a real cgroup by its id", "[breakdown]") {
  // This process's own cgroup: /proc/self/cgroup names it, its directory's
  // inode number is its id.
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0)
      path = line.substr(3);
  struct stat st{};
  if (path.empty() || ::stat(("/sys/fs/cgroup" + path).c_str(), &st) != 0)
    SKIP("no cgroup2 hierarchy at /sys/fs/cgroup for this process");
  CgroupNames names;
  CHECK(names.name(st.st_ino) == path);
}

TEST_CASE("the interval line: `by` and one `breakdown` row per series with packets", "[breakdown][report]") {
  IntervalAggregator agg(parse_breakdown("dport,proto,family"));
  agg.add(packet(5001, kTcp, false, 0, 40'000));
  agg.add(packet(5000, kUdp, true, 0, 30'000));
  agg.add(packet(5000, kUdp, true, 0, 10'000));
  const json j = interval_json(agg);
  CHECK(j["schema"] == 2);
  CHECK(j["by"] == json::array({"dport", "proto", "family"}));
  const json &rows = j["breakdown"];
  REQUIRE(rows.size() == 2);
  // In key order: port, then protocol (TCP 6 before UDP 17), then family.
  CHECK(rows[0]["dport"] == 5000);
  CHECK(rows[0]["proto"] == "udp");
  CHECK(rows[0]["family"] == "ipv6");
  CHECK(rows[0]["packets"] == 2);
  const json &total = rows[0]["stages"]["total"];
  CHECK(total["count"] == 2);
  CHECK(total["min_ns"] == 10'000);
  CHECK(total["max_ns"] == 30'000);
  CHECK(total["p99_ns"] == 30'000);
  CHECK(total["buckets"].size() == 2);
  // Only applicable stages, with statistics only (the hooks are the top-level stage's).
  CHECK_FALSE(rows[0]["stages"].contains("irq"));
  CHECK_FALSE(total.contains("hook_start"));
  CHECK(rows[1]["dport"] == 5001);
  CHECK(rows[1]["proto"] == "tcp");
  CHECK(rows[1]["stages"]["total"]["p50_ns"] == 40'000);
  // The rows add up to the interval's totals.
  CHECK(rows[0]["packets"].get<int>() + rows[1]["packets"].get<int>() == j["packets"].get<int>());

  agg.reset();
  agg.add(packet(5001, kTcp, false, 0));
  const json next = interval_json(agg);
  REQUIRE(next["breakdown"].size() == 1);  // a series with no packet this interval has no row
  CHECK(next["breakdown"][0]["dport"] == 5001);
}

TEST_CASE("the interval line with --by cgroup: top 8 by packets, the rest as other", "[breakdown][report]") {
  IntervalAggregator agg(parse_breakdown("dport,cgroup"));
  for (uint64_t cg = 1; cg <= 10; ++cg)
    for (uint64_t n = 0; n < cg; ++n)
      agg.add(packet(5000, kUdp, false, 100 + cg));
  netlatd_packet unread = packet(5000, kUdp, false, 0);
  unread.reader_unknown = NETLATD_READER_AMBIGUOUS;
  agg.add(unread);
  CgroupNames names([](uint64_t id) { return std::optional<std::string>("/app-" + std::to_string(id)); });
  const json rows = interval_json(agg, &names)["breakdown"];
  std::map<std::string, int> packets;
  for (const json &row : rows) {
    CHECK(row["dport"] == 5000);
    CHECK_FALSE(row.contains("proto"));
    packets[row["cgroup"].get<std::string>()] = row["packets"].get<int>();
  }
  CHECK(packets.size() == kCgroupTopN + 2);
  CHECK(packets.at("/app-110") == 10);
  CHECK(packets.at("/app-103") == 3);
  CHECK(packets.count("/app-102") == 0);
  CHECK(packets.at("other") == 1 + 2);  // the two least busy
  CHECK(packets.at("unknown") == 1);     // the packet-only record
}
