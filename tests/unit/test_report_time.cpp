// Time in the reports: RFC 3339 stamps (rfc3339_utc, rfc3339_utc_ns) and the
// offset from the monotonic clock to the wall clock (measure_realtime_offset,
// choose_realtime_offset) against scripted clocks.
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/output/format.hpp"
#include "netlatd/base/clock.hpp"
#include "report_helpers.hpp"

using namespace netlatd;
using namespace std::chrono;
using nltest::at;

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
