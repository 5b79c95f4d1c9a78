// The Prometheus text exposition format of a MetricsSnapshot.
#include "netlatd/output/prometheus.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "netlatd/model/coverage.hpp"
#include "netlatd/output/labels.hpp"

namespace netlatd {

namespace {

std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

// Label values escape backslash, double quote and newline (format 0.0.4).
void append_label_value(std::string &out, std::string_view v) {
  for (char c : v) {
    switch (c) {
    case '\\': out += "\\\\"; break;
    case '"': out += "\\\""; break;
    case '\n': out += "\\n"; break;
    default: out.push_back(c);
    }
  }
}

void append_header(std::string &out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

using LabelList = std::vector<std::pair<std::string_view, std::string_view>>;

void append_sample(std::string &out, std::string_view name, const LabelList &labels, std::string_view value) {
  out.append(name);
  if (!labels.empty()) {
    out.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i)
        out.push_back(',');
      out.append(labels[i].first).append("=\"");
      append_label_value(out, labels[i].second);
      out.push_back('"');
    }
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(value);
  out.push_back('\n');
}

// One stage of one series: the bounds are edges of the fine buckets, so each
// fine bucket falls wholly under one `le`: the first bound its upper edge
// does not exceed.
void append_histogram(std::string &out, LabelList labels, const Histogram &h, const std::vector<uint64_t> &bounds,
                      const std::vector<std::string> &bound_labels) {
  std::vector<uint64_t> per_bound(bounds.size() + 1, 0);  // not yet cumulative; the last is +Inf
  size_t i = 0;
  for (const auto &b : h.nonempty_buckets()) {
    while (i < bounds.size() && b.upper > bounds[i])
      ++i;
    per_bound[i] += b.count;
  }
  constexpr std::string_view name = "netlatd_stage_latency_seconds";
  labels.emplace_back("le", "");
  uint64_t cumulative = 0;
  for (size_t k = 0; k < bounds.size(); ++k) {
    cumulative += per_bound[k];
    labels.back().second = bound_labels[k];
    append_sample(out, "netlatd_stage_latency_seconds_bucket", labels, std::to_string(cumulative));
  }
  // +Inf is the total by definition, so it equals _count even if a bucket's
  // bounds were ever inconsistent with count().
  labels.back().second = "+Inf";
  append_sample(out, "netlatd_stage_latency_seconds_bucket", labels, std::to_string(h.count()));
  labels.pop_back();
  append_sample(out, std::string(name) + "_sum", labels, format_double(static_cast<double>(h.sum()) / 1e9));
  append_sample(out, std::string(name) + "_count", labels, std::to_string(h.count()));
}

// Counters, not a ratio: rate() of each over the same range, divided, is the
// share over that range, which a gauge of the share since start is not.
void append_coverage(std::string &out, const MetricsSnapshot &s) {
  const Coverage c = coverage_of(s);
  append_header(out, "netlatd_matching_packets_total", "counter",
                "Matching packets: matched by the filter at netif_receive_skb, less those the kernel dropped and "
                "those --cgroup leaves out. The denominator of the coverage.");
  append_sample(out, "netlatd_matching_packets_total", {}, std::to_string(c.overall.matching));
  append_header(out, "netlatd_recorded_packets_total", "counter",
                "Records added to the histograms (in at least one stage). Over netlatd_matching_packets_total: the "
                "share of the traffic the histograms stand for.");
  append_sample(out, "netlatd_recorded_packets_total", {}, std::to_string(c.overall.recorded));
  append_header(out, "netlatd_stage_recorded_packets_total", "counter",
                "Packets in each applicable stage's histogram. Over netlatd_matching_packets_total: that stage's "
                "coverage.");
  for (Stage st : kAllStages)
    if (const auto &share = c.stages[static_cast<size_t>(st)])
      append_sample(out, "netlatd_stage_recorded_packets_total", {{"stage", stage_name(st)}},
                    std::to_string(share->recorded));
}

}  // namespace

namespace {

// What runs: the build, and each stage's hooks.
void append_info(std::string &out, const MetricsSnapshot &s) {
  append_header(out, "netlatd_build_info", "gauge",
                "netlatd version, running kernel, watched interface and ports; always 1.");
  const std::string ports = join_ports(s.ports);
  append_sample(out, "netlatd_build_info",
                {{"version", s.version}, {"kernel", s.kernel}, {"iface", s.iface}, {"ports", ports}}, "1");

  append_header(out, "netlatd_stage_applicable", "gauge",
                "1 when the stage is measured on this interface and kernel, 0 when it does not apply.");
  for (Stage st : kAllStages) {
    const auto &m = s.stages[static_cast<size_t>(st)];
    append_sample(out, "netlatd_stage_applicable", {{"stage", stage_name(st)}}, m.applicable ? "1" : "0");
  }

  append_header(out, "netlatd_stage_hook_info", "gauge",
                "The kernel hooks a stage starts and ends at, chosen at start-up; always 1.");
  for (Stage st : kAllStages) {
    const auto &m = s.stages[static_cast<size_t>(st)];
    if (!m.applicable)
      continue;
    append_sample(out, "netlatd_stage_hook_info",
                  {{"stage", stage_name(st)}, {"start_hook", m.start_hook}, {"end_hook", m.end_hook}}, "1");
  }
}

void append_latency(std::string &out, const MetricsSnapshot &s) {
  append_header(out, "netlatd_stage_latency_seconds", "histogram",
                "Time packets spent in each receive-path stage, since the daemon started.");
  const std::vector<uint64_t> bounds = prometheus_bounds_ns(s.buckets_per_power_of_two);
  std::vector<std::string> bound_labels;
  for (uint64_t b : bounds)
    bound_labels.push_back(prometheus_le_label(b));
  for (Stage st : kAllStages) {
    if (!s.stages[static_cast<size_t>(st)].applicable)
      continue;
    for (const auto &[key, series] : s.series) {
      LabelList labels{{"stage", stage_name(st)}};
      for (const auto &[k, v] : series.labels)
        labels.emplace_back(k, v);
      append_histogram(out, std::move(labels), series.latency[static_cast<size_t>(st)], bounds, bound_labels);
    }
  }
}

// The packets measured and the ones that were not.
void append_packet_counts(std::string &out, const MetricsSnapshot &s) {
  append_header(out, "netlatd_packets_total", "counter",
                "Packets whose receive path was measured, by transport protocol.");
  append_sample(out, "netlatd_packets_total", {{"proto", "udp"}}, std::to_string(s.packets_udp));
  append_sample(out, "netlatd_packets_total", {{"proto", "tcp"}}, std::to_string(s.packets_tcp));

  append_coverage(out, s);

  append_header(out, "netlatd_kernel_drops_total", "counter",
                "Packets of watched ports the kernel dropped before they reached the socket, or when a read found them "
                "bad (not netlatd's loss).");
  append_sample(out, "netlatd_kernel_drops_total", {}, std::to_string(s.kernel_drops));

  append_header(out, "netlatd_losses_total", "counter",
                "Packets, records or lines netlatd itself could not measure or write, by reason (see netlatd(8)).");
  for (const auto &[reason, n] : s.losses)
    append_sample(out, "netlatd_losses_total", {{"reason", reason}}, std::to_string(n));

  append_header(out, "netlatd_reads_unnamed_total", "counter",
                "UDP reads whose datagram no record names, by why: ambiguous (several could be it), untracked, "
                "early (taken before its data-ready call: its record has no reader).");
  for (const auto &[why, n] : s.reads_unnamed)
    append_sample(out, "netlatd_reads_unnamed_total", {{"why", why}}, std::to_string(n));

  if (!s.cgroup_filtered.empty()) {
    append_header(out, "netlatd_cgroup_filtered_total", "counter",
                  "Records --cgroup left out, by why: outside (read by a task in none of the cgroups), no_reader "
                  "(which task read it is not known).");
    for (const auto &[why, n] : s.cgroup_filtered)
      append_sample(out, "netlatd_cgroup_filtered_total", {{"why", why}}, std::to_string(n));
  }

  append_header(out, "netlatd_sample_one_in", "gauge",
                "--sample: one in this many matching packets is traced (1: every one). Counts are not scaled.");
  append_sample(out, "netlatd_sample_one_in", {}, std::to_string(s.sample));
  append_header(out, "netlatd_sampled_out_total", "counter",
                "Matching packets --sample left out at the filter: no stamps, no record, no other count.");
  append_sample(out, "netlatd_sampled_out_total", {}, std::to_string(s.sampled_out));
}

// What the records carried, or lacked.
void append_record_counts(std::string &out, const MetricsSnapshot &s) {
  append_header(out, "netlatd_queue_stamp_missing_total", "counter",
                "Records written without their socket-queue stamp: the queueing hook did not run for them.");
  append_sample(out, "netlatd_queue_stamp_missing_total", {}, std::to_string(s.queue_unseen));

  append_header(out, "netlatd_reader_stamps_far_total", "counter",
                "Reader stamps left out of their record: more than 4.29 s before the receive call returned.");
  append_sample(out, "netlatd_reader_stamps_far_total", {}, std::to_string(s.reader_stamps_far));

  append_header(out, "netlatd_records_unordered_total", "counter",
                "Records whose stamps were out of path order: counted in packets, added to no stage.");
  append_sample(out, "netlatd_records_unordered_total", {}, std::to_string(s.unordered));

  append_header(out, "netlatd_records_reader_unknown_total", "counter",
                "Records whose reader is not known (ambiguous: several reads could have taken the packet; or "
                "unknown). They add only to the stages before the read.");
  append_sample(out, "netlatd_records_reader_unknown_total", {}, std::to_string(s.reader_unknown));

  if (!s.napi.empty()) {
    append_header(out, "netlatd_napi_total", "counter",
                  "NAPI polls of the traced devices (kind polls), the packets they processed (packets), and the "
                  "polls that used their whole budget (budget_exhausted).");
    for (const auto &[kind, n] : s.napi)
      append_sample(out, "netlatd_napi_total", {{"kind", kind}}, std::to_string(n));
  }

  append_header(out, "netlatd_tcp_bytes_total", "counter",
                "TCP payload bytes on watched sockets: read by receive calls, reported in records, skipped in gaps.");
  for (const auto &[kind, n] : s.tcp_bytes)
    append_sample(out, "netlatd_tcp_bytes_total", {{"kind", kind}}, std::to_string(n));

  append_header(out, "netlatd_hook_misses_total", "counter",
                "Times a hook's BPF program did not run because it was already running on that CPU.");
  for (const auto &[hook, n] : s.hook_misses)
    append_sample(out, "netlatd_hook_misses_total", {{"hook", hook}}, std::to_string(n));
}

}  // namespace

std::string render_prometheus(const MetricsSnapshot &s) {
  std::string out;
  out.reserve(8192);
  append_info(out, s);
  append_latency(out, s);
  append_packet_counts(out, s);
  append_record_counts(out, s);
  return out;
}

std::vector<uint64_t> prometheus_bounds_ns(unsigned per_power_of_two) {
  if (per_power_of_two != 1 && per_power_of_two != 2 && per_power_of_two != 4 && per_power_of_two != 8)
    throw std::invalid_argument("buckets per power of two must be 1, 2, 4 or 8, not " +
                                std::to_string(per_power_of_two));
  constexpr uint64_t kFirst = 64, kAtLeast = 10'000'000'000;
  std::vector<uint64_t> bounds;
  for (uint64_t power = kFirst; bounds.empty() || bounds.back() < kAtLeast; power *= 2)
    for (unsigned i = 0; i < per_power_of_two && (bounds.empty() || bounds.back() < kAtLeast); ++i)
      bounds.push_back(power + power / per_power_of_two * i);
  return bounds;
}

std::string prometheus_le_label(uint64_t bound_ns) {
  const double seconds = static_cast<double>(bound_ns) / 1e9;
  char buf[64];
  // Shortest round-trip digits; Go switches to an exponent below 1e-4 (and
  // from 1e21, far above any bound here).
  const auto fmt = seconds < 1e-4 ? std::chars_format::scientific : std::chars_format::fixed;
  const auto res = std::to_chars(buf, buf + sizeof(buf), seconds, fmt);
  return std::string(buf, res.ptr);
}

}  // namespace netlatd
