#pragma once
// How an interval is written: JSON lines for log collectors (docs/OUTPUT.md
// is the schema), text for a person, and one outlier's timeline.
#include <chrono>
#include <cstdint>
#include <string>

#include "netlatd/model/interval.hpp"
#include "netlatd/model/stages.hpp"
#include "netlatd/net/cgroup.hpp"

namespace netlatd {

inline constexpr int kSchemaVersion = 2;

// RFC 3339 UTC with millisecond precision: "2026-11-22T10:00:00.123Z".
std::string rfc3339_utc(std::chrono::system_clock::time_point t);
// The same with nanosecond precision, from wall-clock ns since the Unix epoch:
// "2026-11-22T10:00:00.123456789Z".
std::string rfc3339_utc_ns(int64_t realtime_ns);
// A duration for a person, three significant digits: "850 ns", "12.3 µs", "4.56 ms", "1.20 s".
std::string format_duration(uint64_t ns);

// One JSON object, no newline. Keys in docs/OUTPUT.md.
// `names` names the reader cgroups of the breakdown; none: "cgroup-id:N".
std::string format_json_line(const ReportHeader &h, const IntervalReport &r, CgroupNames *names = nullptr);
// A person's view: per-stage ASCII histograms in the style of bcc's runqlat.
std::string format_text(const ReportHeader &h, const IntervalReport &r);

// One packet's whole timeline ("type":"outlier"). `mono_to_realtime_ns` is
// added to each CLOCK_MONOTONIC stamp to give wall-clock nanoseconds.
std::string format_outlier_json_line(const ReportHeader &h, const netlatd_packet &p,
                                     int64_t mono_to_realtime_ns);
// The same with the record's stages already worked out (d: stage_durations(p)).
std::string format_outlier_json_line(const ReportHeader &h, const netlatd_packet &p,
                                     int64_t mono_to_realtime_ns, const StageDurations &d);

}  // namespace netlatd
