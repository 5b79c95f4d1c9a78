#pragma once
// The soak's consumer of the daemon's output: renames it before each SIGHUP
// (every kRotationsPerStall-th new output a named pipe left unread for
// kStallMs), reads each file once the daemon has moved on from it, and holds
// every record against the receive calls of the round it falls in.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reader_apps.hpp"
#include "record_check.hpp"

namespace nltest::soak_tier {

// One round of traffic: its window on CLOCK_MONOTONIC (no receive call of
// the soak falls outside a round), what its applications read and sent.
struct Round {
  int64_t start = 0, end = INT64_MAX;
  bool finished = false, checked = false, dropped = false;
  std::map<uint16_t, std::vector<ReadEntry>> reads;
  std::map<uint16_t, std::map<int64_t, SentEntry>> sent;
  std::map<uint16_t, std::vector<Record>> pending;  // records not yet checked
};

struct VerdictSum {
  size_t records = 0, right = 0, wrong = 0, unknown = 0, no_return_stamp = 0, unknown_with_reader_side = 0;
  size_t late_batches = 0, too_late = 0;
  std::map<std::string, size_t> unknown_reasons;
  std::vector<std::string> wrong_examples;
  void add(const Verdict &v);
};

// What the daemon wrote, read file by file as the soak rotates them, and
// the verdict on its records.
class Soak {
public:
  explicit Soak(std::filesystem::path dir) : dir_(std::move(dir)), out_(dir_ / "out.jsonl") {}

  const std::filesystem::path &output() const { return out_; }
  void set_daemon(pid_t pid) { pid_ = pid; }

  // Renames the output (if the daemon made it yet), makes the next one a
  // named pipe every kRotationsPerStall-th time, then SIGHUP. Returns when
  // the signal was sent (taken before it, so that the daemon's answer
  // cannot come earlier).
  int64_t rotate();

  // Reads what is due: pipes past their stall, and every renamed output the
  // daemon has moved on from. At the end (the daemon gone) everything.
  void consume(bool final);

  int begin_round();
  void end_round(int i, std::map<uint16_t, std::vector<ReadEntry>> reads,
                 std::map<uint16_t, std::map<int64_t, SentEntry>> sent);

  // Figures.
  int hups() const { return hups_; }
  int stalls() const { return stalls_; }
  const VerdictSum &verdict() const { return verdict_; }
  size_t outlier_lines() const { return outlier_lines_; }
  size_t interval_lines() const { return interval_lines_; }
  size_t bad_lines() const { return bad_lines_; }
  size_t finals() const { return finals_; }
  uint32_t last_ifindex() const { return last_ifindex_; }
  std::string first_bad() const { return first_bad_; }

private:
  struct Chunk {
    int index = 0;
    std::filesystem::path path;
    bool fifo = false;
    int fd = -1;
    int64_t stall_until = 0, renamed_ns = 0;
    std::string text;
  };

  static void drain_fd(int fd, std::string &into);
  static void drain(Chunk &c) { drain_fd(c.fd, c.text); }

  // Which output the daemon has open: 0 for the current path, N for
  // out.jsonl.N, -1 for none found (between a close and an open).
  long daemon_output_index() const;

  void parse(const std::string &text);
  // A record goes to the round whose window holds its return stamp.
  void place(Record rec);
  // A finished round is checked once an output renamed 3 s after its end is
  // complete (its records are in by then); records that come later are
  // checked on their own against the same calls. Calls are kept for 5
  // rounds after that.
  void check_settled(bool final);
  void check_round(Round &r);

  std::filesystem::path dir_, out_;
  pid_t pid_ = -1;
  std::recursive_mutex mu_;
  int rotation_ = 0, hups_ = 0, stalls_ = 0;
  std::deque<Chunk> chunks_;
  int current_fifo_fd_ = -1;
  int64_t current_stall_until_ = 0, completed_renamed_ns_ = 0;
  std::string current_fifo_text_;
  std::deque<Round> rounds_;
  std::set<size_t> late_;
  VerdictSum verdict_;
  size_t outlier_lines_ = 0, interval_lines_ = 0, bad_lines_ = 0, finals_ = 0;
  uint32_t last_ifindex_ = 0;
  std::string first_bad_;
};

}  // namespace nltest::soak_tier
