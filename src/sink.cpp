#include "netlatd/sink.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "netlatd/errors.hpp"

namespace netlatd {
namespace {

// A consumer that has taken nothing for this long is reported once as stalled
// (lines keep queuing until the queue is full, then are dropped).
constexpr auto kStallReport = std::chrono::seconds(10);

std::string shown(const std::string &path) { return path == "-" ? std::string("standard output") : "'" + path + "'"; }

}  // namespace

LineSink::LineSink(std::string path, size_t max_queued_lines, size_t max_queued_bytes)
    : path_(std::move(path)), max_queued_(max_queued_lines), max_queued_bytes_(max_queued_bytes) {
  fd_ = open_fd();
  if (fd_ < 0)
    throw Error(ExitCode::CantCreate, "cannot open output '" + path_ + "': " + std::strerror(errno));
  if (path_ == "-") {
    // A pipe or socket whose reader stalls would block write() for ever, and
    // with it the exit. Non-blocking writes let the writer give up at exit.
    // Files never block that way, and a terminal's flags are shared with the
    // shell, so only pipes and sockets are switched (and restored at the end).
    struct stat st {};
    if (fstat(fd_, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      const int flags = fcntl(fd_, F_GETFL);
      if (flags >= 0 && !(flags & O_NONBLOCK) && fcntl(fd_, F_SETFL, flags | O_NONBLOCK) == 0)
        stdout_flags_ = flags;
    }
  }
  thread_ = std::thread([this] { run(); });
}

LineSink::~LineSink() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  abandon_ = true;
  cv_.notify_all();
  thread_.join();
  if (stdout_flags_ >= 0)
    fcntl(fd_, F_SETFL, stdout_flags_);
  if (fd_ >= 0 && path_ != "-")
    close(fd_);
}

int LineSink::open_fd() const {
  if (path_ == "-")
    return STDOUT_FILENO;
  return open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

void LineSink::write(std::string line) {
  line.push_back('\n');
  {
    std::lock_guard lock(mu_);
    if (broken_ || queue_.size() >= max_queued_ || queued_bytes_ + line.size() > max_queued_bytes_) {
      dropped_++;
      if (!dropping_ && !broken_)
        spdlog::warn("output {} is not keeping up ({} lines queued); dropping report lines, counted as "
                     "output_dropped",
                     shown(path_), queue_.size());
      dropping_ = true;
      return;
    }
    if (dropping_) {
      spdlog::info("output {} is taking lines again; {} dropped so far", shown(path_), dropped_);
      dropping_ = false;
    }
    queued_bytes_ += line.size();
    queue_.push_back(std::move(line));
  }
  cv_.notify_one();
}

void LineSink::reopen() {
  {
    std::lock_guard lock(mu_);
    reopen_ = true;
  }
  cv_.notify_one();
}

bool LineSink::flush(int timeout_ms) {
  std::unique_lock lock(mu_);
  return drained_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return (queue_.empty() && !writing_) || broken_; });
}

uint64_t LineSink::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

bool LineSink::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

bool LineSink::write_all(const std::string &line, int &err) {
  const char *p = line.data();
  size_t left = line.size();
  auto blocked_since = std::chrono::steady_clock::now();
  bool reported = false;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n >= 0) {
      p += n;
      left -= static_cast<size_t>(n);
      blocked_since = std::chrono::steady_clock::now();
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN) {
      err = errno;
      return false;
    }
    // The reader is not reading. Wait in short slices so the destructor can
    // abandon the line instead of waiting for a consumer that may never come.
    if (abandon_) {
      err = 0;
      return false;
    }
    if (!reported && std::chrono::steady_clock::now() - blocked_since >= kStallReport) {
      spdlog::warn("output {} has taken nothing for {} s (a stalled reader?); lines queue up to {}, then are "
                   "dropped",
                   shown(path_), std::chrono::duration_cast<std::chrono::seconds>(kStallReport).count(),
                   max_queued_);
      reported = true;
    }
    pollfd pfd{fd_, POLLOUT, 0};
    ::poll(&pfd, 1, 100);
  }
  return true;
}

void LineSink::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || reopen_ || !queue_.empty(); });
    if (reopen_ && path_ != "-") {
      reopen_ = false;
      int fd = open_fd();
      if (fd < 0) {
        spdlog::error("cannot reopen output '{}': {}; keeping the old file", path_, std::strerror(errno));
      } else {
        close(fd_);
        fd_ = fd;
        broken_ = false;
        spdlog::info("reopened output '{}'", path_);
      }
    }
    reopen_ = false;
    if (queue_.empty() || (stop_ && abandon_)) {
      drained_.notify_all();
      if (stop_)
        return;
      continue;
    }
    std::string line = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= line.size();
    writing_ = true;
    lock.unlock();
    int err = 0;
    const bool ok = write_all(line, err);
    lock.lock();
    writing_ = false;
    if (!ok && err) {
      if (!broken_)
        spdlog::error("output {} failed: {}; dropping report lines, counted as output_dropped{}", shown(path_),
                      std::strerror(err), path_ == "-" ? "" : ", until it is reopened (SIGHUP)");
      broken_ = true;
      dropped_ += 1 + queue_.size();
      queue_.clear();
      queued_bytes_ = 0;
    }
    if (queue_.empty())
      drained_.notify_all();
  }
}

}  // namespace netlatd
