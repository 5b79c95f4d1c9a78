#pragma once
// Where report lines go: stdout or a file. Lines are handed over through a
// bounded queue to a writer thread, so a slow or dead consumer (a stalled log
// collector, a closed pipe) never stalls draining the ring buffer: when the
// queue is full, lines are dropped and counted.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <sys/types.h>

namespace netlatd {

class LineSink {
public:
  // "-" = stdout. Throws Error(CantCreate) when the file cannot be opened.
  // A file, at each open and reopen, is given to `group` (a name or a gid;
  // empty = left as created) with read access, and so is its directory with
  // search access when only its owner could enter it: log collectors run as
  // their own user in a group such as adm. Failing that is a warning.
  // The queue holds at most max_queued_lines lines and max_queued_bytes bytes.
  static constexpr size_t kMaxQueuedBytes = 8u << 20;
  explicit LineSink(std::string path, std::string group = "", size_t max_queued_lines = 4096,
                    size_t max_queued_bytes = kMaxQueuedBytes);
  // Gives up on lines still queued (flush() first to wait for them); never
  // waits for a consumer that does not read.
  ~LineSink();
  LineSink(const LineSink &) = delete;
  LineSink &operator=(const LineSink &) = delete;

  // Never blocks; a '\n' is appended.
  void write(std::string line);
  // The same for a line that must get through a stalled consumer (an
  // interval line: the histograms, and the counts of what was dropped): when
  // the queue is full, the oldest queued line written by write() makes room,
  // counted as dropped. Refused only when every queued line is a kept one.
  void write_kept(std::string line);
  // True, and the line counted as dropped as write() would, when the queue
  // is full or the output broken: a caller can skip making a line that
  // would be dropped (an outlier line under a stalled consumer).
  bool drop_if_full();
  // Reopens the file (logrotate moved it); no-op for stdout.
  void reopen();
  // Waits up to timeout_ms for queued lines to be written.
  bool flush(int timeout_ms);
  // Waits for queued lines to be written while the consumer takes them:
  // false once it has taken no line for idle_ms. For the exit, where the
  // last lines (the final interval line among them) must reach a consumer
  // that is still reading, however slowly, and a stalled one must not hold
  // the exit for longer than idle_ms.
  bool flush_while_taken(int idle_ms);

  const std::string &path() const noexcept { return path_; }
  uint64_t dropped() const;        // lines dropped because the queue was full or the output broken
  bool broken() const;             // the consumer went away (EPIPE) or the file failed

private:
  void run();
  int open_fd() const;
  void share_with_group(int fd) const;
  bool refuse_locked(size_t bytes);
  bool full_locked(size_t bytes) const;
  void queue_locked(std::string line, bool kept, bool resumed);
  // Writes all of `line`; false with `err` set on failure or when abandoned.
  bool write_all(const std::string &line, int &err);

  std::string path_;
  std::string group_;
  std::optional<gid_t> gid_;  // group_ resolved; unset when empty or unknown
  size_t max_queued_, max_queued_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_, drained_;
  struct Queued {
    std::string line;
    bool kept;  // by write_kept(): makes room, never made room for
  };
  std::deque<Queued> queue_;
  size_t queued_bytes_ = 0;
  bool stop_ = false, reopen_ = false, broken_ = false, writing_ = false, dropping_ = false;
  std::atomic<bool> abandon_{false};
  uint64_t dropped_ = 0;
  uint64_t written_ = 0;  // lines written whole: what flush_while_taken watches
  int fd_ = -1;
  int stdout_flags_ = -1;  // stdout's file status flags before we made it non-blocking; -1 = untouched
  std::thread thread_;
};

}  // namespace netlatd
