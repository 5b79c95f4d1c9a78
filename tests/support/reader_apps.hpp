#pragma once
// The applications of the reader tests (tests/tools/nlreaders.c) and their
// peers (tests/tools/nlsenders.c) as child processes, and their logs: what
// every receive call returned, and when, on CLOCK_MONOTONIC.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "process.hpp"

namespace nltest {

// One datagram (or TCP read) a receive call returned. Datagrams one
// recvmmsg() returned share the call's bounds.
struct ReadEntry {
  uint32_t tid = 0, len = 0;
  uint16_t peer_port = 0;  // 0: the call gives no address (recv, read)
  int64_t id = -1;         // the message's id from its header, -1: none
  int64_t before = 0, after = 0;
};

struct ReaderLog {
  int64_t realtime_minus_mono = 0;  // ns, for wall-clock stamps
  uint64_t offset_bracket = 0;      // ns, the uncertainty of that offset
  std::vector<ReadEntry> reads;
};

struct SentEntry {
  uint32_t id = 0, len = 0;
  uint16_t sport = 0, cpu = 0;
  int64_t ns = 0;  // CLOCK_MONOTONIC just before the send
};

// nlreaders MODE ARGS... in network namespace `ns`, logging to a file of
// its own. The constructor returns once its socket is bound.
class ReaderApp {
public:
  // Held: no thread of it reads before go() (nlreaders --go-file).
  enum class Start { Now, Held };
  ReaderApp(const std::string &ns, const std::string &mode, const std::vector<std::string> &args,
            Start start = Start::Now);
  ~ReaderApp();  // kills it if still running, removes its files
  ReaderApp(const ReaderApp &) = delete;
  ReaderApp &operator=(const ReaderApp &) = delete;
  // Waits for it to end by itself (its count, or idle); true if it exited 0.
  bool finish(int timeout_ms);
  void go() const;
  std::string output() const;
  ReaderLog log() const;
  pid_t pid() const { return proc_->pid(); }

private:
  std::filesystem::path dir_;
  std::unique_ptr<Process> proc_;
};

struct SenderResult {
  bool ok = false;                      // exited 0 in time
  std::string output;                   // its stdout and stderr
  std::map<int64_t, SentEntry> sent;    // what it sent, by message id
};

// nlsenders MODE ARGS... in `ns`, to completion.
SenderResult run_senders(const std::string &ns, const std::string &mode, const std::vector<std::string> &args,
                         int timeout_ms);

ReaderLog parse_reader_log(const std::string &text);
std::map<int64_t, SentEntry> parse_sender_log(const std::string &text);

}  // namespace nltest
