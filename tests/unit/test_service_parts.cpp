// The daemon's parts that Service wires together, each without a kernel:
// the outlier limiter, the aggregate check, interval reporting, metrics
// publication and interface following.
#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <nlohmann/json.hpp>

#include "http_get.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/model/aggregate_check.hpp"
#include "netlatd/output/outliers.hpp"
#include "netlatd/output/publisher.hpp"
#include "netlatd/service/followed_interfaces.hpp"
#include "netlatd/service/interval_reporter.hpp"
#include "records.hpp"

using namespace netlatd;
using Catch::Matchers::ContainsSubstring;
using nlohmann::json;

namespace {

constexpr uint8_t kUdp = 17, kTcp = 6;
constexpr int64_t kSec = 1'000'000'000;

netlatd_packet packet(uint8_t proto, uint64_t total) { return nltest::path_packet(5000, proto, false, 0, total); }

StageDurations with_total(std::optional<uint64_t> total) {
  StageDurations d;
  d.of[static_cast<size_t>(Stage::Total)] = total;
  return d;
}

using nltest::lo_header;
using nltest::kernel_series;

}  // namespace

TEST_CASE("OutlierLimiter: which records are outliers", "[outliers]") {
  SECTION("without --outliers-over none is") {
    OutlierLimiter none(std::nullopt, 10);
    CHECK_FALSE(none.is_outlier(with_total(1'000'000'000)));
  }
  SECTION("over the threshold only, and a record without a total never") {
    OutlierLimiter over(5'000, 10);
    CHECK(over.is_outlier(with_total(5'001)));
    CHECK_FALSE(over.is_outlier(with_total(5'000)));
    CHECK_FALSE(over.is_outlier(with_total(std::nullopt)));
  }
  SECTION("--outliers-over 0: every record, even one without a total") {
    OutlierLimiter all(0, 10);
    CHECK(all.is_outlier(with_total(1)));
    CHECK(all.is_outlier(with_total(std::nullopt)));
  }
}

TEST_CASE("OutlierLimiter: at most N lines a second, the rest counted", "[outliers]") {
  OutlierLimiter limiter(0, 2);
  const int64_t t = 100 * kSec;
  CHECK(limiter.admit(t));
  CHECK(limiter.admit(t + 1));
  CHECK_FALSE(limiter.admit(t + 2));
  CHECK_FALSE(limiter.admit(t + kSec - 1));
  CHECK(limiter.rate_limited() == 2);
  // A second on: a full bucket again.
  CHECK(limiter.admit(t + kSec));
  CHECK(limiter.admit(t + kSec + 1));
  CHECK_FALSE(limiter.admit(t + kSec + 2));
  CHECK(limiter.rate_limited() == 3);

  SECTION("a reload's limits start with a full bucket and keep the count") {
    limiter.reconfigure(5'000, 1);
    CHECK_FALSE(limiter.is_outlier(with_total(4'000)));
    CHECK(limiter.admit(t + kSec + 3));
    CHECK_FALSE(limiter.admit(t + kSec + 4));
    CHECK(limiter.rate_limited() == 4);
  }
}

TEST_CASE("AggregateCheck: equal sides pass, a difference fails unless records were lost", "[aggregate]") {
  const std::vector<netlatd_packet> records{packet(kUdp, 10'000), packet(kTcp, 20'000), packet(kUdp, 30'000)};
  AggregateCheck check;
  check.set_breakdown(BreakdownSpec{});
  for (const netlatd_packet &p : records)
    check.add(p, stage_durations(p));
  check.add(kernel_series(records, kUdp));

  SECTION("the kernel side added every record") {
    check.add(kernel_series(records, kTcp));
    CHECK(check.decide(0).verdict == AggregateCheck::Verdict::Equal);
    CHECK(check.log_verdict(0) == 0);
  }
  SECTION("the kernel side is missing the TCP record") {
    const AggregateCheck::Result r = check.decide(0);
    CHECK(r.verdict == AggregateCheck::Verdict::Failed);
    CHECK_FALSE(r.difference.empty());
    CHECK(check.log_verdict(0) == static_cast<int>(ExitCode::Software));
  }
  SECTION("records that did not fit the ring leave it undecided, not failed") {
    CHECK(check.decide(3).verdict == AggregateCheck::Verdict::Undecided);
    CHECK(check.log_verdict(3) == 0);
  }
}

TEST_CASE("IntervalReporter: each interval's line, then an empty one; totals for the status", "[interval]") {
  IntervalReporter reporter(10, BreakdownSpec{});
  CHECK(reporter.length_ns() == 10 * kSec);
  Losses losses(false, false);
  losses.start(KernelCounts{});
  CgroupNames names;
  const ReportHeader h = lo_header();
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  reporter.start(t0);
  for (uint64_t total : {10'000, 20'000, 30'000})
    reporter.aggregate().add(packet(kUdp, total));

  const json first = json::parse(reporter.finish(h, losses, OutputFormat::Json, names, false, t0 + std::chrono::seconds(10)));
  CHECK(first["packets"] == 3);
  CHECK(first["interval_s"] == 10.0);
  CHECK_FALSE(first.contains("final"));
  CHECK(reporter.packets() == 3);
  CHECK_THAT(reporter.status(h, 1, false, 7),
             ContainsSubstring("tracing lo (ifindex 1) ports 5000,5001: 3 packets measured, 0.3/s") &&
                 ContainsSubstring("7 output lines dropped"));

  // The next interval starts where the last ended, with nothing in it.
  const json last = json::parse(reporter.finish(h, losses, OutputFormat::Json, names, true, t0 + std::chrono::seconds(12)));
  CHECK(last["packets"] == 0);
  CHECK(last["start"] == first["time"]);
  CHECK(last["interval_s"] == 2.0);
  CHECK(last["final"] == true);
  CHECK(reporter.packets() == 3);
  CHECK_THAT(reporter.status(h, 0, false, 0),
             ContainsSubstring("interface lo is gone, waiting for it to come back; 3 packets measured so far"));

  SECTION("text for a person") {
    reporter.aggregate().add(packet(kUdp, 10'000));
    const std::string text = reporter.finish(h, losses, OutputFormat::Text, names, false, t0 + std::chrono::seconds(20));
    CHECK_FALSE(text.empty());
    CHECK(text.front() != '{');
  }
}

TEST_CASE("IntervalReporter: a reload's length ends the running interval at its start plus it, or now",
          "[interval]") {
  IntervalReporter reporter(10, BreakdownSpec{});
  // The running interval started at 90 s and ends at 100 s.
  CHECK(reporter.relength(2, 100 * kSec, 91 * kSec) == 92 * kSec);
  CHECK(reporter.length_ns() == 2 * kSec);
  CHECK(reporter.relength(0.5, 92 * kSec, 95 * kSec) == 95 * kSec);  // already past: now
  CHECK(reporter.length_ns() == kSec / 2);
}

TEST_CASE("MetricsPublisher: the delta is merged once into what the endpoint serves", "[metrics]") {
  MetricsPublisher metrics("0.1.0", "6.18.0-test", 4, BreakdownSpec{});
  metrics.set_header(lo_header());
  Losses losses(false, false);
  losses.start(KernelCounts{});
  CgroupNames names;
  metrics.delta().add(packet(kUdp, 10'000));
  metrics.delta().add(packet(kUdp, 20'000));
  metrics.delta().add(packet(kTcp, 30'000));
  metrics.publish(losses, names, {});
  std::string text = metrics.render();
  CHECK_THAT(text, ContainsSubstring("netlatd_packets_total{proto=\"udp\"} 2\n"));
  CHECK_THAT(text, ContainsSubstring("netlatd_packets_total{proto=\"tcp\"} 1\n"));
  CHECK_THAT(text, ContainsSubstring("iface=\"lo\""));
  CHECK(metrics.delta().packets() == 0);

  // Published again with nothing new: the counters stay.
  metrics.publish(losses, names, {});
  CHECK_THAT(metrics.render(), ContainsSubstring("netlatd_packets_total{proto=\"udp\"} 2\n"));

  SECTION("served over HTTP as rendered") {
    CHECK_FALSE(metrics.serving());
    metrics.serve("");
    CHECK_FALSE(metrics.serving());  // no --metrics-listen, no socket from systemd
    metrics.serve("127.0.0.1:0");
    REQUIRE(metrics.serving());
    const auto response = nltest::http_request("127.0.0.1", metrics.port());
    REQUIRE(response);
    CHECK(response->status == 200);
    CHECK(response->body == metrics.render());
    metrics.stop_serving();
    CHECK_FALSE(metrics.serving());
  }
  SECTION("a malformed address is a usage error") {
    try {
      metrics.serve("not an address:x");
      FAIL("no error");
    } catch (const Error &e) {
      CHECK(e.code() == ExitCode::Usage);
      CHECK_THAT(e.what(), ContainsSubstring("--metrics-listen"));
    }
  }
}

TEST_CASE("FollowedInterfaces: the header follows the look-ups, the kernel filter each new target", "[follow]") {
  // Started with lo at a stale ifindex; looked up again, it is at 1 (in any
  // network namespace).
  TracedInterface lo;
  lo.name = "lo";
  lo.id = 1;
  lo.info = InterfaceInfo{"lo", 99, {}, {}, ""};
  // Each point's first candidate, as on a kernel that has them all.
  HookPlan plan;
  for (const HookPoint &point : hook_points())
    plan.choices.push_back({&point, point.candidates.front()});
  FollowedInterfaces interfaces(InterfaceFollower({lo}, {{"lo", 1}}, -1), plan);
  ReportHeader h;
  std::vector<TraceTarget> retargeted;

  interfaces.update(h, {"lo"});
  CHECK(h.iface == "lo");
  CHECK(h.ifindex == 99);
  CHECK(h.iface_names.at(1) == "lo");
  REQUIRE(interfaces.target().devices.size() == 1);
  CHECK(interfaces.target().devices[0].ifindex == 99);

  interfaces.on_retarget([&](const TraceTarget &t) { retargeted.push_back(t); });
  interfaces.update(h, {"lo"});
  CHECK(retargeted.empty());  // the same target: the kernel filter is left alone

  interfaces.refresh(h, {"lo"}, {});
  CHECK(h.ifindex == 1);
  REQUIRE(retargeted.size() == 1);
  REQUIRE(retargeted[0].devices.size() == 1);
  CHECK(retargeted[0].devices[0].ifindex == 1);
  CHECK(retargeted[0].devices[0].iface_id == 1);
  CHECK(interfaces.present() == 1);
}
