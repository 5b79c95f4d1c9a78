// The coverage on a real run: every interval line and /metrics say what
// share of the matching packets is in the histograms, and on a quiet
// loopback run with one reader that share is the run's own count of
// records against the datagrams sent.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "process.hpp"
#include "scrape.hpp"

using nlohmann::json;
using namespace nltest;

namespace {

// What a datagram on a quiet loopback run can be counted under instead of
// being recorded (docs/OUTPUT.md, Drop reasons: the ones counted in packets).
const char *const kPacketLosses[] = {"ringbuf_full",     "inflight_full", "sock_fifo_full", "unjoined_reused",
                                     "unjoined_expired", "unseen_read",   "order_given_up"};

struct RunSums {
  uint64_t lines = 0, idle_lines = 0, packets = 0, unordered = 0, lost = 0;
  uint64_t matching = 0, recorded = 0;
};

// Checks each interval line's `coverage` against the same line's counts,
// and sums the run.
RunSums check_interval_lines(const std::string &out) {
  RunSums sum;
  const std::set<std::string> applicable{"softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"};
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j["type"] != "interval")
      continue;
    INFO(line);
    sum.lines++;
    REQUIRE(j.contains("coverage"));
    const json &c = j["coverage"];
    const uint64_t matching = c["matching"], recorded = c["recorded"];
    CHECK(recorded == j["packets"].get<uint64_t>() - j["unordered"].get<uint64_t>());
    // No packets is no share, never 100 %; otherwise recorded / matching, rounded down.
    CHECK(c.contains("share") == (matching > 0));
    if (matching == 0)
      sum.idle_lines++;
    else
      CHECK(c["share"].get<double>() ==
            std::floor(std::min(1.0, static_cast<double>(recorded) / static_cast<double>(matching)) * 1e4) / 1e4);
    std::set<std::string> stages;
    for (const auto &[stage, share] : c["stages"].items()) {
      stages.insert(stage);
      CHECK(share["recorded"] == j["stages"][stage]["count"]);
      CHECK(share["recorded"].get<uint64_t>() <= recorded);
    }
    CHECK(stages == applicable);  // irq does not apply on lo: no share at all
    sum.packets += j["packets"].get<uint64_t>();
    sum.unordered += j["unordered"].get<uint64_t>();
    for (const char *reason : kPacketLosses)
      sum.lost += j["drops"][reason].get<uint64_t>();
    sum.matching += matching;
    sum.recorded += recorded;
  }
  return sum;
}

}  // namespace

TEST_CASE("coverage: interval lines and /metrics give the share of matching packets in the histograms, "
          "whole on a quiet run",
          "[service][coverage][metrics]") {
  SKIP_UNLESS_ROOT();
  const uint16_t port = free_port(), metrics_port = free_port(SOCK_STREAM);
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Daemon nl({NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(port), "--interval", "1", "--metrics-listen",
             "127.0.0.1:" + std::to_string(metrics_port)});
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  // 1 ms apart, so the one reader never falls behind: a quiet run.
  const uint64_t sent = 300;
  send_udp("", 4, "127.0.0.1", port, static_cast<int>(sent), 64, 1000);
  REQUIRE(reader.wait_for(sent, 5000));

  // The identity: every datagram sent is a record or counted, and each is a
  // matching packet (none was dropped by the stack).
  std::string page;
  auto value = [&](const std::string &series) { return static_cast<uint64_t>(std::max(0.0, sample(page, series))); };
  auto lost = [&] {
    uint64_t n = 0;
    for (const char *reason : kPacketLosses)
      n += value(std::string("netlatd_losses_total{reason=\"") + reason + "\"}");
    return n;
  };
  const bool settled = eventually(3000, [&] {
    page = scrape(metrics_port);
    return value("netlatd_packets_total{proto=\"udp\"}") + lost() == sent &&
           value("netlatd_matching_packets_total") == sent;
  });
  INFO(page);
  REQUIRE(settled);
  const uint64_t records = value("netlatd_packets_total{proto=\"udp\"}");
  const uint64_t recorded = value("netlatd_recorded_packets_total");
  CHECK(recorded == records - value("netlatd_records_unordered_total"));
  CHECK(recorded <= sent);
  CHECK(recorded * 100 >= sent * 99);
  const std::string series = ",dport=\"" + std::to_string(port) + "\",proto=\"udp\"}";
  for (const char *stage : {"softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"}) {
    INFO(stage);
    const std::string name = std::string("netlatd_stage_recorded_packets_total{stage=\"") + stage + "\"}";
    CHECK(value(name) == value(std::string("netlatd_stage_latency_seconds_count{stage=\"") + stage + "\"" + series));
    CHECK(value(name) <= recorded);
  }
  CHECK(sample(page, "netlatd_stage_recorded_packets_total{stage=\"irq\"}") == -1);

  // At least one interval with no packet after the traffic.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  const RunSums sum = check_interval_lines(nl->exit().out);
  CHECK(sum.lines >= 3);
  CHECK(sum.idle_lines >= 1);
  // The lines add up to the same run.
  CHECK(sum.matching == sent);
  CHECK(sum.packets + sum.lost == sent);
  CHECK(sum.recorded == sum.packets - sum.unordered);
  CHECK(sum.recorded <= sum.matching);
  CHECK(sum.recorded * 100 >= sum.matching * 99);
}
