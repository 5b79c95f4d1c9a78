// The text view of an interval, for a person: per-stage ASCII histograms in
// the style of bcc's runqlat, and durations with three significant digits.
#include "netlatd/output/format.hpp"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "format_parts.hpp"
#include "netlatd/output/coverage.hpp"
#include "netlatd/output/labels.hpp"

namespace netlatd {

namespace {

// Display rows for the text view: the fine buckets grouped into powers of two
// of a unit chosen so the rows stay few (bcc's runqlat uses one fixed unit).
struct DisplayUnit {
  const char *label;
  uint64_t ns;
};

DisplayUnit display_unit_for(uint64_t max_ns) {
  if (max_ns < 10'000)
    return {"nsecs", 1};
  if (max_ns < 10'000'000)
    return {"usecs", 1'000};
  return {"msecs", 1'000'000};
}

unsigned display_row(uint64_t value_in_units) {
  return value_in_units < 2 ? 0u : static_cast<unsigned>(std::bit_width(value_in_units)) - 1u;
}

void append_histogram_rows(std::string &out, const Histogram &h) {
  const DisplayUnit unit = display_unit_for(h.max());
  std::vector<uint64_t> rows(65, 0);
  unsigned first = 64, last = 0;
  // A fine bucket goes to the row of its lower bound; a bucket is at most
  // 1.6 % wide, so at most that much of a row boundary is blurred.
  for (const Histogram::Bucket &b : h.nonempty_buckets()) {
    const unsigned row = display_row(b.lower / unit.ns);
    rows[row] += b.count;
    first = std::min(first, row);
    last = std::max(last, row);
  }
  if (first > last)
    return;
  const uint64_t peak = *std::max_element(rows.begin(), rows.end());
  constexpr int kBarWidth = 40;

  char line[256];
  // Columns line up with the rows below, as in bcc's runqlat.
  std::snprintf(line, sizeof line, "%10s%-14s: count     distribution\n", unit.label, "");
  out += line;
  for (unsigned r = first; r <= last; ++r) {
    const uint64_t lo = r == 0 ? 0 : uint64_t{1} << r;
    const uint64_t hi = r >= 63 ? UINT64_MAX : (uint64_t{1} << (r + 1)) - 1;
    const auto stars = static_cast<int>(rows[r] * kBarWidth / peak);
    std::snprintf(line, sizeof line, "%10" PRIu64 " -> %-10" PRIu64 ": %-9" PRIu64 " |%s%*s|\n", lo,
                  hi, rows[r], std::string(static_cast<size_t>(stars), '*').c_str(),
                  kBarWidth - stars, "");
    out += line;
  }
}

}  // namespace

std::string format_duration(uint64_t ns) {
  if (ns < 1000)
    return std::to_string(ns) + " ns";
  static constexpr struct {
    const char *name;
    double ns;
  } units[] = {{"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  char buf[32];
  for (size_t i = 0; i < std::size(units); ++i) {
    const double v = static_cast<double>(ns) / units[i].ns;
    const int decimals = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    // 999.7 µs prints as "1000"; show it as 1.00 ms instead.
    if (std::strtod(buf, nullptr) < 1000.0 || i + 1 == std::size(units))
      return std::string(buf) + " " + units[i].name;
  }
  return std::to_string(ns) + " ns";
}

std::string format_text(const ReportHeader &h, const IntervalReport &r) {
  const IntervalAggregator &agg = aggregate_of(r);
  std::string out;
  char line[512];
  const double secs = std::chrono::duration<double>(r.end - r.start).count();
  std::snprintf(line, sizeof line,
                "%s  iface %s  ports %s  packets %" PRIu64 " (udp %" PRIu64 ", tcp %" PRIu64
                ")%s  interval %.3f s%s\n",
                rfc3339_utc(r.end).c_str(), h.iface.c_str(), join_ports(h.ports).c_str(),
                agg.packets(), agg.packets_udp(), agg.packets_tcp(),
                h.sample > 1 ? fmt::format("  sampled 1 in {}", h.sample).c_str() : "", secs,
                r.final ? "  (final)" : "");
  out += line;
  out += coverage_text(coverage_of(h, r)) + "\n";

  for (Stage s : kAllStages) {
    const auto &hooks = h.stages[static_cast<size_t>(s)];
    const Histogram &hist = agg.stage(s);
    const std::string name(stage_name(s));
    out += '\n';
    if (!hooks.applicable) {
      out += name + ": not applicable: " +
             (hooks.why_not.empty() ? std::string("no hook for this interface") : hooks.why_not) +
             "\n";
      continue;
    }
    out += name + ": " + std::string(stage_description(s)) + "\n";
    if (hist.count() == 0) {
      out += "  no samples this interval\n";
      continue;
    }
    std::snprintf(line, sizeof line, "  count %" PRIu64 "  p50 %s  p99 %s  max %s\n",
                  hist.count(), format_duration(hist.percentile(50)).c_str(),
                  format_duration(hist.percentile(99)).c_str(),
                  format_duration(hist.max()).c_str());
    out += line;
    append_histogram_rows(out, hist);
  }

  std::string lost;
  for (const auto &[name, n] : r.drops)
    if (n)
      lost += (lost.empty() ? "" : ", ") + name + " " + std::to_string(n);
  out += "\ndrops: " + (lost.empty() ? std::string("none") : lost);
  if (agg.unordered())
    out += "  unordered records: " + std::to_string(agg.unordered());
  if (r.ambiguous_reads || r.early_reads || agg.reader_unknown())
    out += "\nreads not tied to their datagram: " + std::to_string(r.ambiguous_reads) + " ambiguous, " +
           std::to_string(r.early_reads) + " before their data-ready call (their datagrams' records carry the " +
           "packet's stamps only: " + std::to_string(agg.reader_unknown()) + ")";
  out += '\n';
  return out;
}

}  // namespace netlatd
