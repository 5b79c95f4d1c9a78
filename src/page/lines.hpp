#pragma once
// netlatd report: one JSON line of netlatd's output (docs/OUTPUT.md, schema 2)
// read into what the page draws. A line that is not netlatd's (truncated, of
// another program, another schema, a field of the wrong type) is a Skip with
// its reason, never an exception out of parse_line().
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace netlatd::page {

inline constexpr int kSchema = 2;
inline constexpr size_t kStageCount = 7;
// In the order of docs/OUTPUT.md; the first five add up to `total`.
inline constexpr std::array<std::string_view, kStageCount> kStages = {
    "irq", "softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"};
inline constexpr size_t kTotal = 6;
inline constexpr size_t kConsecutive = 5;

struct Bucket {
  uint64_t lower = 0;  // inclusive, ns
  uint64_t upper = 0;  // exclusive, ns
  uint64_t count = 0;
};

// A stage object, or a breakdown row's stage (no hooks there).
struct StageStats {
  bool present = false;  // the line has this stage at all
  bool applicable = false;
  std::string why_not, hook_start, hook_end;
  uint64_t count = 0, min_ns = 0, max_ns = 0, p50_ns = 0, p99_ns = 0, p999_ns = 0;
  double mean_ns = 0;
  std::vector<Bucket> buckets;
};

struct SeriesRow {
  std::string label;  // "5000/udp", with the other keys of `by` as the line has them
  uint64_t packets = 0;
  std::array<StageStats, kStageCount> stages;
};

struct IntervalLine {
  int64_t start_ms = 0, end_ms = 0;
  bool final = false;
  std::string host, iface, kernel, version;
  std::vector<uint64_t> ports;
  uint64_t packets = 0;
  std::array<StageStats, kStageCount> stages;
  std::vector<SeriesRow> breakdown;
  // `drops` by reason, then the counters of what could not be tied
  // (unordered, ambiguous_reads, ...), in the line's order.
  std::vector<std::pair<std::string, uint64_t>> losses;
  // `coverage`'s counts: matching packets, records in the histograms.
  struct Coverage {
    uint64_t matching = 0, recorded = 0;
  };
  std::optional<Coverage> coverage;  // absent from lines older than it
};

struct OutlierLine {
  int64_t time_ms = 0;
  std::string host, iface, proto, family;
  uint64_t dport = 0, sport = 0, len = 0;
  std::optional<uint64_t> total_ns;
  std::vector<std::pair<std::string, int64_t>> offsets_ns;  // stamp -> ns from the first
  std::vector<std::pair<std::string, uint64_t>> stages_ns;
  std::optional<uint64_t> rx_cpu;
  bool ksoftirqd = false;
  std::string reader_unknown;  // why there is no reader, else empty
  std::optional<uint64_t> reader_cpu, reader_pid, reader_tid;
  std::string reader_comm;
  bool woken = false, slept_in_call = false;
};

struct Skip {
  std::string reason;  // "not JSON (truncated?)", "schema 3, not 2", ...
};

struct Parsed {
  std::variant<Skip, IntervalLine, OutlierLine> line;
  // Members the schema does not name, by path ("interval.foo",
  // "outlier.stamps.bar", "interval.drops.new_reason").
  std::vector<std::string> unknown_fields;
};

Parsed parse_line(std::string_view text);

// RFC 3339 in UTC with a Z ("2026-11-22T10:00:10.000Z", any fraction): ms
// since the epoch, or nothing when it is not one.
std::optional<int64_t> parse_time_ms(std::string_view text);

// The drop reasons and counters of docs/OUTPUT.md a loss chart shows.
bool known_drop_reason(std::string_view name);
bool known_loss_counter(std::string_view name);

}  // namespace netlatd::page
