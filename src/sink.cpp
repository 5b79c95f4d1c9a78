#include "netlatd/sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "netlatd/errors.hpp"

namespace netlatd {

LineSink::LineSink(std::string path, size_t max_queued_lines) : path_(std::move(path)), max_queued_(max_queued_lines) {
  fd_ = open_fd();
  if (fd_ < 0)
    throw Error(ExitCode::CantCreate, "cannot open output '" + path_ + "': " + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

LineSink::~LineSink() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
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
    if (broken_ || queue_.size() >= max_queued_) {
      if (dropped_++ == 0)
        spdlog::warn("output '{}' is not keeping up; dropping report lines (counted as output_dropped)", path_);
      return;
    }
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
    if (queue_.empty()) {
      drained_.notify_all();
      if (stop_)
        return;
      continue;
    }
    std::string line = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    const char *p = line.data();
    size_t left = line.size();
    int err = 0;
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        err = errno;
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    lock.lock();
    writing_ = false;
    if (err) {
      if (!broken_)
        spdlog::error("output '{}' failed: {}; dropping report lines until it is reopened (SIGHUP)", path_,
                      std::strerror(err));
      broken_ = true;
      dropped_ += 1 + queue_.size();
      queue_.clear();
    }
    if (queue_.empty())
      drained_.notify_all();
  }
}

}  // namespace netlatd
