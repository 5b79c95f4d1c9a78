// One interval written out as a JSON line (docs/OUTPUT.md is the schema), one
// outlier's timeline, and the times they carry. The text view for a person is
// format_text.cpp.
#include "netlatd/output/format.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "format_parts.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/output/coverage.hpp"
#include "netlatd/output/labels.hpp"

namespace netlatd {


namespace {

using Json = nlohmann::ordered_json;


// Kernel-supplied strings (comm) and user-supplied ones (iface) may hold
// bytes that are not UTF-8; nlohmann throws on those unless told to replace.
std::string dump(const Json &j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

int64_t floor_div(int64_t a, int64_t b, int64_t *rem) {
  int64_t q = a / b;
  int64_t r = a % b;
  if (r < 0) {
    q -= 1;
    r += b;
  }
  *rem = r;
  return q;
}

std::string rfc3339_seconds(int64_t secs) {
  const auto tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

// Dividing by a power of ten (not multiplying by its inverse) gives the double
// nearest the decimal, so the JSON shows 15132.8 and not 15132.800000000001.
double round_decimals(double v, double per_unit) { return std::round(v * per_unit) / per_unit; }

void append_stage_statistics(Json &j, const Histogram &h) {
  j["count"] = h.count();
  if (h.count() == 0)
    return;
  j["min_ns"] = h.min();
  j["p50_ns"] = h.percentile(50);
  j["p90_ns"] = h.percentile(90);
  j["p99_ns"] = h.percentile(99);
  j["p999_ns"] = h.percentile(99.9);
  j["max_ns"] = h.max();
  j["mean_ns"] = round_decimals(h.mean(), 10);
  Json buckets = Json::array();
  for (const Histogram::Bucket &b : h.nonempty_buckets())
    buckets.push_back(Json::array({b.lower, b.upper, b.count}));
  j["buckets"] = std::move(buckets);
}

Json stage_json(const ReportHeader::StageHooks &hooks, const Histogram &h) {
  Json j;
  j["hook_start"] = hooks.start_hook;
  j["hook_end"] = hooks.end_hook;
  j["applicable"] = hooks.applicable;
  if (!hooks.applicable) {
    // No statistics at all: a zero here would read as "measured, and fast".
    j["why_not"] = hooks.why_not;
    return j;
  }
  append_stage_statistics(j, h);
  return j;
}

// The breakdown: one object per series with packets this interval, in key
// order, cgroups beyond the top N folded into "other".
Json breakdown_json(const ReportHeader &h, const IntervalAggregator &agg, CgroupNames *cgroup_names) {
  const BreakdownSpec &by = agg.breakdown();
  CgroupNames fallback_names([](uint64_t) { return std::nullopt; });
  CgroupNames &names = cgroup_names ? *cgroup_names : fallback_names;
  const SeriesMap folded = by.cgroup ? fold_cgroups_top(agg.series()) : SeriesMap{};
  Json rows = Json::array();
  for (const auto &[key, series] : by.cgroup ? folded : agg.series()) {
    if (series.packets == 0)
      continue;
    Json row;
    for (const auto &[name, value] : series_labels(by, key, names, &h.iface_names)) {
      if (name == "dport")
        row[name] = key.dport;
      else
        row[name] = value;
    }
    row["packets"] = series.packets;
    Json stages = Json::object();
    for (Stage s : kAllStages) {
      if (!h.stages[static_cast<size_t>(s)].applicable)
        continue;
      Json stage = Json::object();
      append_stage_statistics(stage, series.stages[static_cast<size_t>(s)]);
      stages[std::string(stage_name(s))] = std::move(stage);
    }
    row["stages"] = std::move(stages);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

// ---------------------------------------------------------------- time

std::string rfc3339_utc(std::chrono::system_clock::time_point t) {
  const int64_t ms =
      std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  int64_t frac = 0;
  const int64_t secs = floor_div(ms, 1000, &frac);
  char buf[16];
  std::snprintf(buf, sizeof buf, ".%03" PRId64 "Z", frac);
  return rfc3339_seconds(secs) + buf;
}

std::string rfc3339_utc_ns(int64_t realtime_ns) {
  int64_t frac = 0;
  const int64_t secs = floor_div(realtime_ns, 1'000'000'000, &frac);
  char buf[16];
  std::snprintf(buf, sizeof buf, ".%09" PRId64 "Z", frac);
  return rfc3339_seconds(secs) + buf;
}

// ---------------------------------------------------------------- JSON

std::string format_json_line(const ReportHeader &h, const IntervalReport &r, CgroupNames *names) {
  const IntervalAggregator &agg = aggregate_of(r);
  Json j;
  j["type"] = "interval";
  j["schema"] = kSchemaVersion;
  j["time"] = rfc3339_utc(r.end);
  j["start"] = rfc3339_utc(r.start);
  j["interval_s"] = round_decimals(std::chrono::duration<double>(r.end - r.start).count(), 1e6);
  if (r.final)
    j["final"] = true;
  j["host"] = h.host;
  j["iface"] = h.iface;
  j["ifindex"] = h.ifindex;
  j["ports"] = h.ports;
  j["sample"] = h.sample;
  j["kernel"] = h.kernel;
  j["version"] = h.version;
  j["packets"] = agg.packets();
  j["udp"] = agg.packets_udp();
  j["tcp"] = agg.packets_tcp();
  j["coverage"] = coverage_json(coverage_of(h, r));
  Json stages = Json::object();
  for (Stage s : kAllStages)
    stages[std::string(stage_name(s))] =
        stage_json(h.stages[static_cast<size_t>(s)], agg.stage(s));
  j["stages"] = std::move(stages);
  j["by"] = breakdown_keys(agg.breakdown());
  j["breakdown"] = breakdown_json(h, agg, names);
  Json drops = Json::object();
  for (const auto &[name, n] : r.drops)
    drops[name] = n;
  j["drops"] = std::move(drops);
  j["unordered"] = agg.unordered();
  j["ambiguous_reads"] = r.ambiguous_reads;
  j["untracked_reads"] = r.untracked_reads;
  j["early_reads"] = r.early_reads;
  j["queue_unseen"] = r.queue_unseen;
  j["sampled_out"] = r.sampled_out;
  j["reader_stamps_far"] = r.reader_stamps_far;
  j["tcp_bytes"] = {{"read", r.tcp_bytes_read}, {"reported", agg.tcp_bytes()}, {"skipped", r.tcp_bytes_skipped}};
  Json misses = Json::object();
  for (const auto &[hook, n] : r.hook_misses)
    misses[hook] = n;
  j["hook_misses"] = std::move(misses);
  if (!r.ops.empty())
    j["ops"] = r.ops;  // --count-ops
  j["reader_unknown"] = agg.reader_unknown();
  if (!r.cgroup_filtered.empty()) {
    Json filtered = Json::object();
    for (const auto &[why, n] : r.cgroup_filtered)
      filtered[why] = n;
    j["cgroup_filtered"] = std::move(filtered);
  }
  if (r.napi)
    j["napi"] = {{"polls", r.napi->polls}, {"packets", r.napi->packets}, {"budget_exhausted", r.napi->budget_exhausted}};
  return dump(j);
}

std::string format_outlier_json_line(const ReportHeader &h, const netlatd_packet &p,
                                     int64_t mono_to_realtime_ns) {
  return format_outlier_json_line(h, p, mono_to_realtime_ns, stage_durations(p));
}

namespace {

// Modular, as the kernel's u64 stamps are: a stamp no kernel writes (over
// 2^63 ns minus the offset) shows as a far-off time, never signed overflow.
int64_t wall_ns(uint64_t mono, int64_t mono_to_realtime_ns) {
  return static_cast<int64_t>(mono + static_cast<uint64_t>(mono_to_realtime_ns));
}

// recv_return is always set on an emitted record; the fallbacks only keep a
// malformed record from printing 1970.
std::chrono::system_clock::time_point outlier_time(const netlatd_packet &p, int64_t mono_to_realtime_ns) {
  uint64_t last = 0;
  for (unsigned i = 0; i < NETLATD_STAMP_COUNT; ++i)
    last = std::max<uint64_t>(last, p.stamp_ns[i]);
  const uint64_t when = p.stamp_ns[NETLATD_STAMP_RECV_RETURN] ? p.stamp_ns[NETLATD_STAMP_RECV_RETURN]
                                                                : last;
  return when ? std::chrono::system_clock::time_point(std::chrono::duration_cast<
                    std::chrono::system_clock::duration>(
                    std::chrono::nanoseconds(wall_ns(when, mono_to_realtime_ns))))
              : std::chrono::system_clock::now();
}

// Every stamp the packet got, and the derived start of the `oncpu` stage.
void add_outlier_stamps(Json &j, const netlatd_packet &p, int64_t mono_to_realtime_ns) {
  // Offsets are from the packet's first stamp on its path (the reader's call
  // may have started earlier: a negative offset then).
  uint64_t first = 0;
  for (unsigned i = 0; i <= NETLATD_STAMP_SOCK_QUEUE && first == 0; ++i)
    first = p.stamp_ns[i];
  std::vector<std::pair<std::string, uint64_t>> instants;
  for (unsigned i = 0; i < NETLATD_STAMP_COUNT; ++i)
    if (p.stamp_ns[i])
      instants.emplace_back(stamp_name(static_cast<netlatd_stamp>(i)), p.stamp_ns[i]);
  if (auto rs = read_start(p))
    instants.emplace_back("read_start", *rs);
  Json stamps = Json::object();
  Json mono = Json::object();
  Json offsets = Json::object();
  for (const auto &[name, t] : instants) {
    stamps[name] = rfc3339_utc_ns(wall_ns(t, mono_to_realtime_ns));
    mono[name] = t;
    // Signed: a reader's call may start before the packet's first stamp.
    offsets[name] = static_cast<int64_t>(t - first);
  }
  j["stamps"] = std::move(stamps);
  j["stamps_mono_ns"] = std::move(mono);
  j["offsets_ns"] = std::move(offsets);
}

void add_outlier_reader(Json &j, const netlatd_packet &p) {
  if (p.reader_unknown != NETLATD_READER_KNOWN) {
    j["reader_unknown"] = p.reader_unknown == NETLATD_READER_AMBIGUOUS ? "ambiguous" : "unknown";
    return;
  }
  j["reader_cpu"] = p.reader_cpu;
  j["reader_pid"] = p.reader_tgid;
  j["reader_tid"] = p.reader_tid;
  j["reader_comm"] = std::string(p.reader_comm, strnlen(p.reader_comm, sizeof p.reader_comm));
  j["woken"] = (p.flags & NETLATD_PKT_WOKEN) != 0;
  j["slept_in_call"] = (p.flags & NETLATD_PKT_SLEPT_IN_CALL) != 0;
  j["on_cpu_before_call"] = (p.flags & NETLATD_PKT_ON_CPU_BEFORE_CALL) != 0;
}

}  // namespace

std::string format_outlier_json_line(const ReportHeader &h, const netlatd_packet &p,
                                     int64_t mono_to_realtime_ns, const StageDurations &d) {
  Json j;
  j["type"] = "outlier";
  j["schema"] = kSchemaVersion;
  j["time"] = rfc3339_utc(outlier_time(p, mono_to_realtime_ns));
  j["host"] = h.host;
  // The interface the packet counts for, where several are traced.
  const auto named = h.iface_names.find(p.iface_id);
  j["iface"] = named != h.iface_names.end() ? named->second : h.iface;
  j["ports"] = h.ports;
  j["dport"] = p.dport;
  if (p.l4proto == kIpprotoTcp)
    j["proto"] = "tcp";
  else if (p.l4proto == kIpprotoUdp)
    j["proto"] = "udp";
  else
    j["proto"] = std::to_string(p.l4proto);
  j["family"] = (p.flags & NETLATD_PKT_IPV6) ? "ipv6" : "ipv4";
  j["len"] = p.len;
  if (auto total = d[Stage::Total])
    j["total_ns"] = *total;

  j["sport"] = p.sport;
  add_outlier_stamps(j, p, mono_to_realtime_ns);

  Json stages = Json::object();
  for (Stage s : kAllStages)
    if (auto ns = d[s])
      stages[std::string(stage_name(s))] = *ns;
  j["stages"] = std::move(stages);

  j["rx_cpu"] = p.rx_cpu;
  j["ksoftirqd"] = (p.flags & NETLATD_PKT_KSOFTIRQD) != 0;
  add_outlier_reader(j, p);
  return dump(j);
}

}  // namespace netlatd
