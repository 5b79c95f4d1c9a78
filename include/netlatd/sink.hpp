#pragma once
// Where report lines go: stdout or a file. Lines are handed over through a
// bounded queue to a writer thread, so a slow or dead consumer (a stalled log
// collector, a closed pipe) never stalls draining the ring buffer: when the
// queue is full, lines are dropped and counted.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace netlatd {

class LineSink {
public:
  // "-" = stdout. Throws Error(CantCreate) when the file cannot be opened.
  explicit LineSink(std::string path, size_t max_queued_lines = 4096);
  ~LineSink();
  LineSink(const LineSink &) = delete;
  LineSink &operator=(const LineSink &) = delete;

  // Never blocks; a '\n' is appended.
  void write(std::string line);
  // Reopens the file (logrotate moved it); no-op for stdout.
  void reopen();
  // Waits up to timeout_ms for queued lines to be written.
  bool flush(int timeout_ms);

  uint64_t dropped() const;        // lines dropped because the queue was full or the output broken
  bool broken() const;             // the consumer went away (EPIPE) or the file failed

private:
  void run();
  int open_fd() const;

  std::string path_;
  size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_, drained_;
  std::deque<std::string> queue_;
  bool stop_ = false, reopen_ = false, broken_ = false, writing_ = false;
  uint64_t dropped_ = 0;
  int fd_ = -1;
  std::thread thread_;
};

}  // namespace netlatd
