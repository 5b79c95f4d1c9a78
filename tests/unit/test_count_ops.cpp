// --count-ops: the option, the programs' counts through the loss accounting
// (interval deltas, like the kernel's other counters) and their "ops" object
// in the JSON line; absent without the option.
#include <set>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "netlatd/model/losses.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/service/options.hpp"
#include "records.hpp"

using namespace netlatd;
using nlohmann::json;

namespace {

Options parse(std::vector<const char *> argv) {
  argv.insert(argv.begin(), "netlatd");
  return parse_command_line(static_cast<int>(argv.size()), argv.data()).options;
}

KernelCounts with_ops(uint64_t locks, uint64_t clocks) {
  KernelCounts k;
  k.ops.emplace();
  (*k.ops)[NETLATD_OP_LOCK_PAIRS] = locks;
  (*k.ops)[NETLATD_OP_CLOCK_READS] = clocks;
  return k;
}

}  // namespace

TEST_CASE("count-ops: each operation has its own name, shared with the JSON", "[count-ops]") {
  std::set<std::string> names;
  for (int i = 0; i < NETLATD_OP_COUNT; i++)
    names.insert(op_name(i));
  CHECK(names == std::set<std::string>{"lock_pairs", "ring_reserves", "map_lookups", "map_updates", "clock_reads"});
  CHECK(std::string(op_name(NETLATD_OP_COUNT)) == "unknown");
}

TEST_CASE("count-ops: the flag, off by default", "[count-ops][cli]") {
  CHECK_FALSE(parse({"--iface", "lo", "--port", "5000"}).count_ops);
  CHECK(parse({"--iface", "lo", "--port", "5000", "--count-ops"}).count_ops);
}

TEST_CASE("count-ops: each interval has the counts since the last, from the programs' load", "[count-ops]") {
  Losses losses(false, false);
  // Counted before the daemon's first reading (after READY): in the first
  // interval, as the records of that time are.
  losses.start(with_ops(4, 10));
  losses.read(with_ops(10, 40), 0, 0);
  IntervalReport r;
  losses.end_interval(r);
  CHECK(r.ops.size() == NETLATD_OP_COUNT);
  CHECK(r.ops.at("lock_pairs") == 10);
  CHECK(r.ops.at("clock_reads") == 40);
  CHECK(r.ops.at("map_lookups") == 0);
  losses.read(with_ops(11, 45), 0, 0);
  IntervalReport next;
  losses.end_interval(next);
  CHECK(next.ops.at("lock_pairs") == 1);
  CHECK(next.ops.at("clock_reads") == 5);
}

TEST_CASE("count-ops: without it, no counts and no \"ops\" in the line", "[count-ops][json]") {
  Losses losses(false, false);
  losses.start(KernelCounts{});
  losses.read(KernelCounts{}, 0, 0);
  IntervalReport r;
  losses.end_interval(r);
  CHECK(r.ops.empty());
  IntervalAggregator agg;
  r.data = &agg;
  const ReportHeader h = nltest::lo_header();
  CHECK_FALSE(json::parse(format_json_line(h, r)).contains("ops"));
  r.ops = {{"lock_pairs", 2}, {"clock_reads", 7}};
  const json j = json::parse(format_json_line(h, r));
  CHECK(j.at("ops") == json{{"lock_pairs", 2}, {"clock_reads", 7}});
}
