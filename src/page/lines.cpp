#include "lines.hpp"

#include <algorithm>
#include <charconv>
#include <span>

#include <nlohmann/json.hpp>

namespace netlatd::page {
namespace {

using nlohmann::json;

// A line that is not what the schema says; caught in parse_line() only.
struct Bad {
  std::string why;
};

using Names = std::span<const std::string_view>;

constexpr std::string_view kIntervalFields[] = {
    "type", "schema", "time", "start", "interval_s", "final", "host", "iface", "ifindex", "ports", "kernel",
    "version", "packets", "udp", "tcp", "stages", "by", "breakdown", "drops", "unordered", "ambiguous_reads",
    "untracked_reads", "early_reads", "queue_unseen", "reader_stamps_far", "tcp_bytes", "hook_misses", "reader_unknown", "napi",
    "cgroup_filtered", "coverage", "sample", "sampled_out"};
constexpr std::string_view kStageFields[] = {"hook_start", "hook_end", "applicable", "why_not", "count", "min_ns", "p50_ns",
                                "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "buckets"};
constexpr std::string_view kRowFields[] = {"iface", "dport", "proto", "family", "cgroup", "container_id", "container_runtime",
                              "pod_uid", "packets", "stages"};
constexpr std::string_view kDropReasons[] = {
    "inflight_full", "order_given_up", "order_lost", "outliers_rate_limited", "output_dropped", "reader_forgotten", "ringbuf_full",
    "sock_fifo_full", "sock_state_failed", "stack_dropped", "tcp_copies", "tcp_gap", "tcp_range_unknown", "tcp_read_too_many",
    "tcp_segs_full", "unjoined_expired", "unjoined_reused", "unread_expired", "unseen_read"};
// Counted beside `drops`: records or reads netlatd could not tie whole.
constexpr std::string_view kLossCounters[] = {"unordered",    "ambiguous_reads",   "untracked_reads", "early_reads",
                                 "queue_unseen", "reader_stamps_far", "reader_unknown"};
constexpr std::string_view kOutlierFields[] = {
    "type",   "schema",         "time",       "host",   "iface",     "ports",          "dport",
    "proto",  "family",         "len",        "total_ns", "sport",   "stamps",         "stamps_mono_ns",
    "offsets_ns", "stages",     "rx_cpu",     "ksoftirqd", "reader_unknown", "reader_cpu", "reader_pid",
    "reader_tid", "reader_comm", "woken",     "slept_in_call"};
constexpr std::string_view kStampNames[] = {"irq",       "softirq_raise", "softirq_entry", "netif_receive_skb",
                               "sock_queue", "wakeup",       "switch_in",     "call_start",
                               "copy",      "recv_return",   "syscall_exit",  "read_start"};
constexpr std::string_view kTcpBytesFields[] = {"read", "reported", "skipped"};
constexpr std::string_view kNapiFields[] = {"polls", "packets", "budget_exhausted"};
constexpr std::string_view kFilteredFields[] = {"outside", "no_reader"};
constexpr std::string_view kCoverageFields[] = {"matching", "recorded", "share", "stages"};
constexpr std::string_view kShareFields[] = {"recorded", "share"};

bool in(Names names, std::string_view s) { return std::find(names.begin(), names.end(), s) != names.end(); }

// Names every member of `o` outside `names` as where.member.
void note_unknown(const json &o, Names names, const std::string &where, std::vector<std::string> &out) {
  if (!o.is_object())
    return;
  for (const auto &[key, value] : o.items())
    if (!in(names, key))
      out.push_back(where + "." + key);
}

const json &member(const json &o, const char *key, const std::string &where) {
  const auto it = o.find(key);
  if (it == o.end())
    throw Bad{"no " + where + "." + key};
  return *it;
}

uint64_t u64_of(const json &v, const std::string &what) {
  if (!v.is_number_unsigned())
    throw Bad{what + " is not an unsigned integer"};
  return v.get<uint64_t>();
}

uint64_t u64(const json &o, const char *key, const std::string &where) {
  return u64_of(member(o, key, where), where + "." + key);
}

std::optional<uint64_t> opt_u64(const json &o, const char *key, const std::string &where) {
  if (!o.contains(key))
    return std::nullopt;
  return u64(o, key, where);
}

std::string str(const json &o, const char *key, const std::string &where) {
  const json &v = member(o, key, where);
  if (!v.is_string())
    throw Bad{where + "." + key + " is not a string"};
  return v.get<std::string>();
}

std::string opt_str(const json &o, const char *key, const std::string &where) {
  return o.contains(key) ? str(o, key, where) : std::string();
}

bool opt_bool(const json &o, const char *key, const std::string &where) {
  if (!o.contains(key))
    return false;
  if (!o[key].is_boolean())
    throw Bad{where + "." + key + " is not a boolean"};
  return o[key].get<bool>();
}

int64_t time_of(const json &o, const char *key, const std::string &where) {
  const std::optional<int64_t> t = parse_time_ms(str(o, key, where));
  if (!t)
    throw Bad{where + "." + key + " is not an RFC 3339 UTC time"};
  return *t;
}

const json &object(const json &o, const char *key, const std::string &where) {
  const json &v = member(o, key, where);
  if (!v.is_object())
    throw Bad{where + "." + key + " is not an object"};
  return v;
}

std::vector<Bucket> buckets_of(const json &v, const std::string &where) {
  if (!v.is_array())
    throw Bad{where + " is not an array"};
  std::vector<Bucket> out;
  out.reserve(v.size());
  for (const json &b : v) {
    if (!b.is_array() || b.size() != 3)
      throw Bad{where + " holds a bucket that is not [lower, upper, count]"};
    const Bucket k{u64_of(b[0], where), u64_of(b[1], where), u64_of(b[2], where)};
    if (k.upper <= k.lower || (!out.empty() && k.lower < out.back().upper))
      throw Bad{where + " has buckets out of order"};
    out.push_back(k);
  }
  return out;
}

StageStats stage_of(const json &s, bool with_hooks, const std::string &where, std::vector<std::string> &unknown) {
  if (!s.is_object())
    throw Bad{where + " is not an object"};
  note_unknown(s, kStageFields, where, unknown);
  StageStats st;
  st.present = true;
  if (with_hooks) {
    st.hook_start = str(s, "hook_start", where);
    st.hook_end = str(s, "hook_end", where);
    st.applicable = opt_bool(s, "applicable", where);
    st.why_not = opt_str(s, "why_not", where);
  } else {
    st.applicable = true;  // a row lists applicable stages only
  }
  if (!st.applicable)
    return st;
  st.count = u64(s, "count", where);
  if (st.count == 0)
    return st;
  st.min_ns = u64(s, "min_ns", where);
  st.max_ns = u64(s, "max_ns", where);
  st.p50_ns = u64(s, "p50_ns", where);
  st.p99_ns = u64(s, "p99_ns", where);
  st.p999_ns = u64(s, "p999_ns", where);
  const json &mean = member(s, "mean_ns", where);
  // Within [min, max] (rounded to 0.1 ns), so that mean x count stays finite.
  if (!mean.is_number() || !(mean.get<double>() >= static_cast<double>(st.min_ns) - 0.1) ||
      !(mean.get<double>() <= static_cast<double>(st.max_ns) + 0.1))
    throw Bad{where + ".mean_ns is not a number in [min_ns, max_ns]"};
  st.mean_ns = mean.get<double>();
  st.buckets = buckets_of(member(s, "buckets", where), where + ".buckets");
  return st;
}

// `stages` of a line or a row: known names only (the rest are unknown fields).
std::array<StageStats, kStageCount> stages_of(const json &o, bool with_hooks, const std::string &where,
                                              std::vector<std::string> &unknown) {
  const json &s = object(o, "stages", where);
  std::array<StageStats, kStageCount> out;
  for (size_t i = 0; i < kStageCount; ++i) {
    const std::string name(kStages[i]);
    if (s.contains(name))
      out[i] = stage_of(s[name], with_hooks, where + ".stages." + name, unknown);
    else if (with_hooks)
      throw Bad{"no " + where + ".stages." + name};
  }
  for (const auto &[key, value] : s.items())
    if (std::find(kStages.begin(), kStages.end(), key) == kStages.end())
      unknown.push_back(where + ".stages." + key);
  return out;
}

SeriesRow row_of(const json &r, std::vector<std::string> &unknown) {
  const std::string where = "interval.breakdown[]";
  if (!r.is_object())
    throw Bad{where + " is not an object"};
  note_unknown(r, kRowFields, where, unknown);
  SeriesRow row;
  std::string label;
  if (r.contains("iface"))
    label += str(r, "iface", where) + " ";
  if (r.contains("dport"))
    label += std::to_string(u64(r, "dport", where));
  for (const char *key : {"proto", "family", "cgroup"})
    if (r.contains(key))
      label += (label.empty() || label.back() == ' ' ? "" : "/") + str(r, key, where);
  row.label = label.empty() ? "all" : label;
  row.packets = u64(r, "packets", where);
  row.stages = stages_of(r, false, where, unknown);
  return row;
}

// The counts of `coverage` (absent from lines older than it); the shares
// are theirs, so only checked for names.
void coverage_counts_of(const json &line, IntervalLine &out, std::vector<std::string> &unknown) {
  if (!line.contains("coverage"))
    return;
  const std::string w = "interval.coverage";
  const json &c = object(line, "coverage", "interval");
  note_unknown(c, kCoverageFields, w, unknown);
  out.coverage = IntervalLine::Coverage{u64(c, "matching", w), u64(c, "recorded", w)};
  for (const auto &[stage, share] : object(c, "stages", w).items()) {
    if (std::find(kStages.begin(), kStages.end(), stage) == kStages.end())
      unknown.push_back(w + ".stages." + stage);
    note_unknown(share, kShareFields, w + ".stages." + stage, unknown);
  }
}

void losses_of(const json &line, IntervalLine &out, std::vector<std::string> &unknown) {
  const json &drops = object(line, "drops", "interval");
  for (const auto &[key, value] : drops.items()) {
    out.losses.emplace_back(key, u64_of(value, "interval.drops." + key));
    if (!known_drop_reason(key))
      unknown.push_back("interval.drops." + key);
  }
  for (std::string_view c : kLossCounters) {
    const std::string key(c);
    if (const auto n = opt_u64(line, key.c_str(), "interval"))
      out.losses.emplace_back(key, *n);
  }
}

IntervalLine interval_of(const json &line, std::vector<std::string> &unknown) {
  const std::string w = "interval";
  note_unknown(line, kIntervalFields, w, unknown);
  IntervalLine out;
  out.end_ms = time_of(line, "time", w);
  out.start_ms = time_of(line, "start", w);
  out.final = opt_bool(line, "final", w);
  out.host = opt_str(line, "host", w);
  out.iface = opt_str(line, "iface", w);
  out.kernel = opt_str(line, "kernel", w);
  out.version = opt_str(line, "version", w);
  if (line.contains("ports") && line["ports"].is_array())
    for (const json &p : line["ports"])
      out.ports.push_back(u64_of(p, w + ".ports[]"));
  out.packets = u64(line, "packets", w);
  out.stages = stages_of(line, true, w, unknown);
  if (line.contains("breakdown")) {
    if (!line["breakdown"].is_array())
      throw Bad{"interval.breakdown is not an array"};
    for (const json &r : line["breakdown"])
      out.breakdown.push_back(row_of(r, unknown));
  }
  losses_of(line, out, unknown);
  coverage_counts_of(line, out, unknown);
  const std::pair<const char *, Names> subs[] = {
      {"tcp_bytes", kTcpBytesFields}, {"napi", kNapiFields}, {"cgroup_filtered", kFilteredFields}};
  for (const auto &[key, names] : subs)
    if (line.contains(key))
      note_unknown(line[key], names, w + "." + key, unknown);
  return out;
}

template <class T>
std::vector<std::pair<std::string, T>> numbers_of(const json &o, const char *key, Names names,
                                                 std::vector<std::string> &unknown) {
  const json &m = object(o, key, "outlier");
  std::vector<std::pair<std::string, T>> out;
  for (const auto &[name, value] : m.items()) {
    if (!in(names, name)) {
      unknown.push_back(std::string("outlier.") + key + "." + name);
      continue;
    }
    if (!value.is_number_integer())
      throw Bad{std::string("outlier.") + key + "." + name + " is not an integer"};
    out.emplace_back(name, value.template get<T>());
  }
  return out;
}

OutlierLine outlier_of(const json &line, std::vector<std::string> &unknown) {
  const std::string w = "outlier";
  note_unknown(line, kOutlierFields, w, unknown);
  OutlierLine out;
  out.time_ms = time_of(line, "time", w);
  out.host = opt_str(line, "host", w);
  out.iface = opt_str(line, "iface", w);
  out.proto = str(line, "proto", w);
  out.family = opt_str(line, "family", w);
  out.dport = u64(line, "dport", w);
  out.sport = opt_u64(line, "sport", w).value_or(0);
  out.len = opt_u64(line, "len", w).value_or(0);
  out.total_ns = opt_u64(line, "total_ns", w);
  out.offsets_ns = numbers_of<int64_t>(line, "offsets_ns", kStampNames, unknown);
  out.stages_ns = numbers_of<uint64_t>(line, "stages", kStages, unknown);
  if (line.contains("stamps"))
    note_unknown(line["stamps"], kStampNames, w + ".stamps", unknown);
  out.rx_cpu = opt_u64(line, "rx_cpu", w);
  out.ksoftirqd = opt_bool(line, "ksoftirqd", w);
  out.reader_unknown = opt_str(line, "reader_unknown", w);
  out.reader_cpu = opt_u64(line, "reader_cpu", w);
  out.reader_pid = opt_u64(line, "reader_pid", w);
  out.reader_tid = opt_u64(line, "reader_tid", w);
  out.reader_comm = opt_str(line, "reader_comm", w);
  out.woken = opt_bool(line, "woken", w);
  out.slept_in_call = opt_bool(line, "slept_in_call", w);
  return out;
}

}  // namespace

bool known_drop_reason(std::string_view name) { return in(kDropReasons, name); }

bool known_loss_counter(std::string_view name) { return in(kLossCounters, name); }

Parsed parse_line(std::string_view text) {
  Parsed p{Skip{}, {}};
  const json line = json::parse(text.begin(), text.end(), nullptr, false);
  if (line.is_discarded()) {
    p.line = Skip{"not JSON (a truncated line?)"};
    return p;
  }
  if (!line.is_object() || !line.contains("type") || !line["type"].is_string()) {
    p.line = Skip{"not a netlatd line (no \"type\")"};
    return p;
  }
  const std::string type = line["type"].get<std::string>();
  if (type != "interval" && type != "outlier") {
    p.line = Skip{"type \"" + type.substr(0, 40) + "\" not known"};
    return p;
  }
  const auto schema = line.find("schema");
  if (schema == line.end() || !schema->is_number_integer() || schema->get<int64_t>() != kSchema) {
    p.line = Skip{"schema " + (schema == line.end() ? std::string("missing") : schema->dump().substr(0, 20)) +
                  ", not " + std::to_string(kSchema)};
    return p;
  }
  try {
    if (type == "interval")
      p.line = interval_of(line, p.unknown_fields);
    else
      p.line = outlier_of(line, p.unknown_fields);
  } catch (const Bad &b) {
    p.line = Skip{b.why};
    p.unknown_fields.clear();
  } catch (const nlohmann::json::exception &e) {
    p.line = Skip{std::string("unreadable ") + type + " line"};
    p.unknown_fields.clear();
  }
  return p;
}

}  // namespace netlatd::page
