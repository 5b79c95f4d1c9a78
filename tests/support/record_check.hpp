#pragma once
// Holds netlatd's per-packet records (its outlier lines) against what the
// application's own receive calls returned (nlreaders' log). A record is
// right when the thread it names had a receive call whose bounds hold the
// record's return stamp, and that call returned the record's datagram (its
// length, and its source port where the record has one). Anything else that
// names a reader is wrong. A record that names no reader (schema 2's
// "reader_unknown") is counted by its reason, not judged.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reader_apps.hpp"

namespace nltest {

struct Record {
  std::string proto;
  uint16_t dport = 0;
  uint32_t len = 0;
  std::optional<uint16_t> sport;       // schema 2
  std::optional<uint32_t> reader_tid;  // absent when reader_unknown is set
  std::string reader_unknown;          // schema 2: why no reader is named
  bool reader_fields = false;          // any reader_* field but reader_unknown
  std::map<std::string, int64_t> mono; // stamp -> CLOCK_MONOTONIC ns
  bool exact_clock = false;            // from stamps_mono_ns, not converted
  std::map<std::string, int64_t> stages;
};

// RFC 3339 UTC with nanoseconds ("2026-11-22T10:00:07.123456789Z") -> ns
// since the epoch.
int64_t rfc3339_ns(const std::string &s);

// The records of outlier lines; stamps from `stamps_mono_ns` where netlatd
// writes it (schema 2), else its wall-clock `stamps` put back on the
// monotonic clock with the reader's own offset.
std::vector<Record> records_from(const std::vector<nlohmann::json> &outliers, int64_t realtime_minus_mono);

struct CheckOptions {
  // How far a stamp converted from wall-clock time may be off: the two
  // offsets (netlatd's and the reader's) are each measured to ~100 ns.
  int64_t wall_slack_ns = 1000;
  // When given: each datagram's send, by id; a right record's
  // netif_receive_skb cannot come before it.
  const std::map<int64_t, SentEntry> *sent = nullptr;
  // `reads` holds every datagram read: a UDP record that names no reader
  // must then be of one of them. False where the reads are not at hand (the
  // soak checks such records alone).
  bool reads_complete = true;
};

struct Verdict {
  size_t records = 0, right = 0, wrong = 0, unknown = 0;
  size_t no_return_stamp = 0;  // names a reader but has no recv_return: cannot be right
  // Say no reader is named, yet carry a reader's fields or a stage that
  // ends at a reader (sock_queue, oncpu, total): a guess kept.
  size_t unknown_with_reader_side = 0;
  std::map<std::string, size_t> unknown_reasons;
  bool sport_seen = false, exact_clock = false;
  // The oncpu stage of right records against the call's own bounds. Absent
  // is right only where netlatd did not know where it starts: no call start,
  // or no queue stamp (a TCP segment queued where tcp_probe does not fire,
  // counted as queue_unseen). `oncpu_absent_though_known`: both were known.
  size_t oncpu_inside = 0, oncpu_outside = 0, oncpu_absent = 0, oncpu_absent_though_known = 0;
  // Records without a socket-queue stamp, right or not.
  size_t no_queue_stamp = 0;
  std::vector<double> oncpu_ns, call_ns;
  // Right records: from the return stamp to the reader's clock after the
  // call (the syscall's exit path); negative only within the clock slack.
  std::vector<double> return_to_after_ns;
  // The first few failures, for the log: wrong records, and right records
  // whose oncpu stage does not fit their call.
  std::vector<std::string> wrong_examples, stage_examples;

  std::string summary(size_t datagrams) const;
};

Verdict check_records(const std::vector<Record> &records, const std::vector<ReadEntry> &reads,
                      const CheckOptions &opt = {});

}  // namespace nltest
