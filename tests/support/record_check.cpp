#include "record_check.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

using nlohmann::json;

namespace nltest {
namespace {

// One receive call: its bounds and the datagrams it returned.
struct Call {
  int64_t before = 0, after = 0;
  std::vector<size_t> reads;  // indexes into the read log
};

using CallsByThread = std::map<uint32_t, std::vector<Call>>;

// A thread's reads are logged in the order it made its calls; datagrams
// of one recvmmsg() share the call's bounds.
CallsByThread calls_by_thread(const std::vector<ReadEntry> &reads) {
  CallsByThread calls;
  for (size_t i = 0; i < reads.size(); i++) {
    auto &v = calls[reads[i].tid];
    if (v.empty() || v.back().before != reads[i].before || v.back().after != reads[i].after)
      v.push_back({reads[i].before, reads[i].after, {}});
    v.back().reads.push_back(i);
  }
  return calls;
}

// The call whose bounds hold t, else the nearest within the slack (the
// earlier of two as near: a return stamp comes late in its call, never
// early). A thread's calls do not overlap.
const Call *call_at(const std::vector<Call> &calls, int64_t t, int64_t slack) {
  auto it = std::upper_bound(calls.begin(), calls.end(), t + slack,
                             [](int64_t v, const Call &c) { return v < c.before; });
  const Call *best = nullptr;
  int64_t best_distance = slack + 1;
  for (int back = 0; back < 2 && it != calls.begin(); back++) {
    --it;
    const int64_t distance = t < it->before ? it->before - t : (t > it->after ? t - it->after : 0);
    if (distance <= best_distance) {
      best = &*it;
      best_distance = distance;
    }
  }
  return best_distance <= slack ? best : nullptr;
}

// The read datagram's send in the sender's log, by the message's id, if
// the log is given and has it.
const SentEntry *sent_of(const ReadEntry &r, const CheckOptions &opt) {
  if (!opt.sent || r.id < 0)
    return nullptr;
  auto it = opt.sent->find(r.id);
  return it == opt.sent->end() ? nullptr : &it->second;
}

// The datagram's source port: from the call (recvfrom, recvmsg, recvmmsg)
// or, for recv and read, from the sender's log.
std::optional<uint16_t> source_port(const ReadEntry &r, const CheckOptions &opt) {
  if (r.peer_port)
    return r.peer_port;
  if (const SentEntry *sent = sent_of(r, opt))
    return sent->sport;
  return std::nullopt;
}

// Why the record is not of this read, or "" if it is.
std::string mismatch(const Record &rec, const ReadEntry &r, const CheckOptions &opt, int64_t slack) {
  if (r.len != rec.len)
    return "length";
  auto sport = source_port(r, opt);
  if (rec.sport && sport && *rec.sport != *sport)
    return "source port";
  const SentEntry *sent = sent_of(r, opt);
  if (sent && rec.mono.count("netif_receive_skb") && rec.mono.at("netif_receive_skb") < sent->ns - slack)
    return "netif_receive_skb before the datagram was sent";
  return "";
}

std::string describe(const Record &rec, const Call *call, const std::vector<ReadEntry> &reads,
                     const std::string &why) {
  std::string s = "record len " + std::to_string(rec.len) + " tid " + std::to_string(*rec.reader_tid);
  if (rec.mono.count("recv_return"))
    s += " recv_return " + std::to_string(rec.mono.at("recv_return"));
  if (!call)
    return s + ": no call of that thread holds its return stamp";
  s += ": its call [" + std::to_string(call->before) + ", " + std::to_string(call->after) + "] returned len";
  for (size_t i : call->reads)
    s += " " + std::to_string(reads[i].len);
  // Where a datagram of the record's length was read nearest in time.
  const ReadEntry *nearest = nullptr;
  const int64_t t = rec.mono.count("recv_return") ? rec.mono.at("recv_return") : 0;
  for (const ReadEntry &r : reads)
    if (r.len == rec.len && (!nearest || std::llabs(r.after - t) < std::llabs(nearest->after - t)))
      nearest = &r;
  if (nearest)
    s += "; the nearest read of that length: tid " + std::to_string(nearest->tid) + " in [" +
         std::to_string(nearest->before) + ", " + std::to_string(nearest->after) + "]";
  return s + " (" + why + ")";
}

// The reader's stamps against the call's start, for the log.
std::string stamps_from_call(const Record &rec, const Call &call) {
  std::string stamps;
  for (const auto &[name, t] : rec.mono)
    stamps += " " + name + "=" + std::to_string(t - call.before);
  return stamps;
}

// The oncpu stage of a right record against the call that returned it: it
// ends at the return stamp (inside the call, checked by the match) and must
// not start before the call did. Left out only where its start was not
// known: no call start, or no queue stamp (netlatd_read_start, stage_math.h).
void check_oncpu(const Record &rec, const Call &call, int64_t slack, Verdict &v) {
  v.call_ns.push_back(static_cast<double>(call.after - call.before));
  v.return_to_after_ns.push_back(static_cast<double>(call.after - rec.mono.at("recv_return")));
  auto it = rec.stages.find("oncpu");
  if (it == rec.stages.end()) {
    v.oncpu_absent++;
    if (rec.mono.count("call_start") && rec.mono.count("sock_queue")) {
      v.oncpu_absent_though_known++;
      if (v.stage_examples.size() < 4)
        v.stage_examples.push_back("record len " + std::to_string(rec.len) +
                                   ": oncpu absent though call_start and sock_queue are known; stamps from the "
                                   "call's start:" + stamps_from_call(rec, call));
    }
    return;
  }
  v.oncpu_ns.push_back(static_cast<double>(it->second));
  const int64_t start = rec.mono.at("recv_return") - it->second;
  if (start >= call.before - slack) {
    v.oncpu_inside++;
    return;
  }
  v.oncpu_outside++;
  if (v.stage_examples.size() < 4)
    v.stage_examples.push_back("record len " + std::to_string(rec.len) + ": oncpu " + std::to_string(it->second) +
                               " ns starts " + std::to_string(call.before - start) +
                               " ns before the call; stamps from its start:" + stamps_from_call(rec, call));
}

// Where the datagrams of one length were sent and read.
struct LengthWindow {
  int64_t first_sent = INT64_MAX;  // INT64_MIN: some send is not known
  int64_t last_read = INT64_MIN;
  std::set<uint16_t> sports;
  bool any_sport = false;  // some read of it gives no source port
};

std::map<uint32_t, LengthWindow> length_windows(const std::vector<ReadEntry> &reads, const CheckOptions &opt) {
  std::map<uint32_t, LengthWindow> out;
  for (const ReadEntry &r : reads) {
    LengthWindow &w = out[r.len];
    w.last_read = std::max(w.last_read, r.after);
    const SentEntry *sent = sent_of(r, opt);
    w.first_sent = std::min(w.first_sent, sent ? sent->ns : INT64_MIN);
    if (auto sport = source_port(r, opt))
      w.sports.insert(*sport);
    else
      w.any_sport = true;
  }
  return out;
}

// Why a UDP record that names no reader cannot be of any datagram read, or
// "" if it can be: its reader is not known, its datagram must be. A length
// no read returned, a source port none came from, or a receive stamp
// outside every such datagram's time from its send to its read.
std::string packet_only_mismatch(const Record &rec, const std::map<uint32_t, LengthWindow> &windows,
                                 int64_t slack) {
  auto w = windows.find(rec.len);
  if (w == windows.end())
    return "no read returned a datagram of its length";
  if (rec.sport && !w->second.any_sport && !w->second.sports.count(*rec.sport))
    return "no datagram of its length came from its source port";
  auto rx = rec.mono.find("netif_receive_skb");
  if (rx == rec.mono.end())
    return "";
  if (w->second.first_sent != INT64_MIN && rx->second < w->second.first_sent - slack)
    return "received before any datagram of its length was sent";
  if (rx->second > w->second.last_read + slack)
    return "received after every read of its length";
  return "";
}

}  // namespace

int64_t rfc3339_ns(const std::string &s) {
  tm t{};
  int frac_pos = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%n", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour,
                  &t.tm_min, &t.tm_sec, &frac_pos) < 6 || frac_pos == 0)
    throw std::runtime_error("not an RFC 3339 ns time: " + s);
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  int64_t ns = 0;
  int digits = 0;
  for (size_t i = static_cast<size_t>(frac_pos); i < s.size() && s[i] >= '0' && s[i] <= '9'; i++, digits++)
    ns = ns * 10 + (s[i] - '0');
  for (; digits < 9; digits++)
    ns *= 10;
  return static_cast<int64_t>(timegm(&t)) * 1000000000ll + ns;
}

std::vector<Record> records_from(const std::vector<json> &outliers, int64_t realtime_minus_mono) {
  std::vector<Record> out;
  for (const json &j : outliers) {
    Record r;
    r.proto = j.value("proto", "");
    r.dport = j.value("dport", uint16_t{0});
    r.len = j.at("len").get<uint32_t>();
    if (j.contains("sport"))
      r.sport = j["sport"].get<uint16_t>();
    r.reader_unknown = j.value("reader_unknown", "");
    for (auto &[key, v] : j.items())
      r.reader_fields |= key.rfind("reader_", 0) == 0 && key != "reader_unknown";
    if (r.reader_unknown.empty() && j.contains("reader_tid"))
      r.reader_tid = j["reader_tid"].get<uint32_t>();
    r.exact_clock = j.contains("stamps_mono_ns");
    if (r.exact_clock)
      for (auto &[name, v] : j["stamps_mono_ns"].items())
        r.mono[name] = v.get<int64_t>();
    else if (j.contains("stamps"))
      for (auto &[name, v] : j["stamps"].items())
        r.mono[name] = rfc3339_ns(v.get<std::string>()) - realtime_minus_mono;
    if (j.contains("stages"))
      for (auto &[name, v] : j["stages"].items())
        r.stages[name] = v.get<int64_t>();
    out.push_back(std::move(r));
  }
  return out;
}

Verdict check_records(const std::vector<Record> &records, const std::vector<ReadEntry> &reads,
                      const CheckOptions &opt) {
  Verdict v;
  const CallsByThread calls = calls_by_thread(reads);
  const std::map<uint32_t, LengthWindow> windows = length_windows(reads, opt);
  std::vector<bool> claimed(reads.size());
  for (const Record &rec : records) {
    v.records++;
    v.no_queue_stamp += rec.mono.count("sock_queue") ? 0 : 1;
    v.sport_seen |= rec.sport.has_value();
    v.exact_clock |= rec.exact_clock;
    if (!rec.reader_unknown.empty() || !rec.reader_tid) {
      v.unknown++;
      v.unknown_reasons[rec.reader_unknown.empty() ? "(no reader fields)" : rec.reader_unknown]++;
      if (rec.reader_fields || rec.stages.count("sock_queue") || rec.stages.count("oncpu") || rec.stages.count("total"))
        v.unknown_with_reader_side++;
      // TCP reads return bytes, not segments: only UDP's length is a datagram's.
      const int64_t slack = rec.exact_clock ? 0 : opt.wall_slack_ns;
      const std::string why =
          rec.proto == "udp" && opt.reads_complete ? packet_only_mismatch(rec, windows, slack) : "";
      if (!why.empty()) {
        v.wrong++;
        if (v.wrong_examples.size() < 6)
          v.wrong_examples.push_back("packet-only record len " + std::to_string(rec.len) + " (" + why + ")");
      }
      continue;
    }
    auto ret = rec.mono.find("recv_return");
    if (ret == rec.mono.end()) {
      v.no_return_stamp++;
      continue;
    }
    const int64_t slack = rec.exact_clock ? 0 : opt.wall_slack_ns;
    auto thread = calls.find(*rec.reader_tid);
    const Call *call = thread == calls.end() ? nullptr : call_at(thread->second, ret->second, slack);
    std::string why = "no datagram of its call";
    bool matched = false;
    for (size_t i : call ? call->reads : std::vector<size_t>{}) {
      std::string m = claimed[i] ? "its datagram has a record already" : mismatch(rec, reads[i], opt, slack);
      if (!m.empty()) {
        why = m;
        continue;
      }
      claimed[i] = matched = true;
      break;
    }
    if (matched) {
      v.right++;
      check_oncpu(rec, *call, slack, v);
    } else {
      v.wrong++;
      if (v.wrong_examples.size() < 6)
        v.wrong_examples.push_back(describe(rec, call, reads, why));
    }
  }
  return v;
}

std::string Verdict::summary(size_t datagrams) const {
  auto pct = [&](size_t n) { return datagrams ? 100.0 * static_cast<double>(n) / static_cast<double>(datagrams) : 0.0; };
  char line[512];
  std::snprintf(line, sizeof line,
                "%zu read, %zu records: %zu right, %zu wrong (%.1f %%), %zu without a return stamp, %zu with no "
                "reader named (ambiguous, %.1f %%; %zu of them with a reader's fields or stages); oncpu inside the call %zu, outside %zu, absent %zu (%zu of them "
                "with its start known); %zu without a queue stamp; clock %s",
                datagrams, records, right, wrong, pct(wrong), no_return_stamp, unknown, pct(unknown),
                unknown_with_reader_side, oncpu_inside,
                oncpu_outside, oncpu_absent, oncpu_absent_though_known, no_queue_stamp,
                exact_clock ? "stamps_mono_ns" : "wall stamps converted");
  return line;
}

}  // namespace nltest
