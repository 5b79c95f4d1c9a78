#pragma once
// The Prometheus text exposition format 0.0.4 of a MetricsSnapshot: the
// daemon's cumulative counters and per-stage histograms (--metrics-listen).
// The JSON lines stay the primary output; this is for dashboards and alerts.
#include <cstdint>
#include <string>
#include <vector>

#include "netlatd/model/snapshot.hpp"

namespace netlatd {

// The `le` bounds of netlatd_stage_latency_seconds, in nanoseconds; +Inf
// follows. Each is an edge of the JSON's log-linear buckets: 2^k * (1 + i/n)
// for n = per_power_of_two, from 64 ns up to the first bound of at least
// 10 s (10.7 s). So every Prometheus bucket is exactly a union of JSON
// buckets, and `le` counts the values below its bound in whole nanoseconds.
// Throws std::invalid_argument unless per_power_of_two is 1, 2, 4 or 8.
std::vector<uint64_t> prometheus_bounds_ns(unsigned per_power_of_two);
// A bound in seconds as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it,
// which is what the official client libraries emit: identical label values
// let a query aggregate netlatd's buckets with other exporters' without
// relabelling. 64 -> "6.4e-08", 1'310'720 -> "0.00131072".
std::string prometheus_le_label(uint64_t bound_ns);

// Text exposition format 0.0.4, families in a fixed order, ending with a newline.
std::string render_prometheus(const MetricsSnapshot &snapshot);

}  // namespace netlatd
