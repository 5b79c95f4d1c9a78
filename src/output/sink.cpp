#include "netlatd/output/sink.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"

namespace netlatd {
namespace {

// A consumer that has taken nothing for this long is reported once as stalled
// (lines keep queuing until the queue is full, then are dropped).
constexpr auto kStallReport = std::chrono::seconds(10);

std::string shown(const std::string &path) { return path == "-" ? std::string("standard output") : "'" + path + "'"; }

// A group name, or a gid in decimal; nullopt when the system has no such name.
std::optional<gid_t> resolve_group(const std::string &group) {
  if (!group.empty() && group.size() < 10 &&
      std::all_of(group.begin(), group.end(), [](unsigned char c) { return std::isdigit(c); }))
    return static_cast<gid_t>(std::stoul(group));
  std::vector<char> buf(4096);
  struct group entry {};
  struct group *found = nullptr;
  while (getgrnam_r(group.c_str(), &entry, buf.data(), buf.size(), &found) == ERANGE)
    buf.resize(buf.size() * 2);
  if (!found)
    return std::nullopt;
  return found->gr_gid;
}

// Only a directory made for netlatd's output (the unit's LogsDirectory=
// /var/log/netlatd) is handed to the group: the same rule on the directory of
// any path would open /root to it for an output at /root/out.jsonl.
bool directory_is_netlatds(const std::filesystem::path &dir, const struct stat &st) {
  return dir.filename() == "netlatd" && st.st_uid == geteuid() && (st.st_mode & S_IRWXO) == 0;
}

}  // namespace

LineSink::LineSink(std::string path, std::string group, size_t max_queued_lines, size_t max_queued_bytes)
    : path_(std::move(path)), group_(std::move(group)), max_queued_(max_queued_lines),
      max_queued_bytes_(max_queued_bytes) {
  if (path_ != "-" && !group_.empty()) {
    gid_ = resolve_group(group_);
    if (!gid_)
      spdlog::warn("output group '{}' does not exist here; '{}' keeps the group it is created with", group_,
                   path_);
  }
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
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0)
    return fd;
  // A named pipe (a collector reading a FIFO) whose reader stalls would
  // block write() for ever, and with it the exit: as for a piped stdout,
  // non-blocking writes let the writer give up. This descriptor is ours alone.
  struct stat st {};
  if (fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    const int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
      fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  share_with_group(fd);
  return fd;
}

// Done at every open: the file may be new (logrotate renamed the old one, and
// its `create` line may name another group).
void LineSink::share_with_group(int fd) const {
  if (!gid_)
    return;
  // Without CAP_CHOWN the owner may hand a file only to a group it is a
  // member of: the units add the group with SupplementaryGroups=.
  const auto refused = [&](const std::string &what) {
    spdlog::warn("cannot give {} to group '{}': {} (netlatd must be a member of the group: SupplementaryGroups= "
                 "in the unit)",
                 what, group_, std::strerror(errno));
  };
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return;
  if ((st.st_gid != *gid_ && fchown(fd, static_cast<uid_t>(-1), *gid_) != 0) ||
      (!(st.st_mode & S_IRGRP) && fchmod(fd, (st.st_mode & 07777) | S_IRGRP) != 0)) {
    refused("output '" + path_ + "'");
    return;
  }
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty())
    dir = ".";
  constexpr mode_t kGroupEnters = S_IRGRP | S_IXGRP;
  struct stat ds {};
  if (stat(dir.c_str(), &ds) != 0 || (ds.st_gid == *gid_ && (ds.st_mode & kGroupEnters) == kGroupEnters))
    return;
  if (!directory_is_netlatds(dir, ds)) {
    if (!(ds.st_mode & (S_IXGRP | S_IXOTH)))
      spdlog::warn("group '{}' cannot enter '{}', so cannot read the output there; netlatd shares only a "
                   "directory named netlatd that it owns",
                   group_, dir.string());
    return;
  }
  if ((ds.st_gid != *gid_ && chown(dir.c_str(), static_cast<uid_t>(-1), *gid_) != 0) ||
      chmod(dir.c_str(), (ds.st_mode & 07777) | kGroupEnters) != 0)
    refused("directory '" + dir.string() + "'");
}

bool LineSink::full_locked(size_t bytes) const {
  return queue_.size() >= max_queued_ || queued_bytes_ + bytes > max_queued_bytes_;
}

// Under mu_: true (and counted) when a line of `bytes` cannot be queued.
bool LineSink::refuse_locked(size_t bytes) {
  if (broken_ || full_locked(bytes)) {
    dropped_++;
    if (!dropping_ && !broken_)
      spdlog::warn("output {} is not keeping up ({} lines queued); dropping report lines, counted as "
                   "output_dropped",
                   shown(path_), queue_.size());
    dropping_ = true;
    return true;
  }
  return false;
}

// Under mu_, with room checked. `resumed`: the line went in without a line
// dropped for it, which ends an episode of dropping.
void LineSink::queue_locked(std::string line, bool kept, bool resumed) {
  if (dropping_ && resumed) {
    spdlog::info("output {} is taking lines again; {} dropped so far", shown(path_), dropped_);
    dropping_ = false;
  }
  queued_bytes_ += line.size();
  queue_.push_back(Queued{std::move(line), kept});
}

void LineSink::write(std::string line) {
  line.push_back('\n');
  {
    std::lock_guard lock(mu_);
    if (refuse_locked(line.size()))
      return;
    queue_locked(std::move(line), false, true);
  }
  cv_.notify_one();
}

void LineSink::write_kept(std::string line) {
  line.push_back('\n');
  {
    std::lock_guard lock(mu_);
    // The oldest lines that may go, until this one fits.
    size_t evicted = 0;
    for (auto it = queue_.begin(); !broken_ && full_locked(line.size()) && it != queue_.end();) {
      if (it->kept) {
        ++it;
        continue;
      }
      queued_bytes_ -= it->line.size();
      it = queue_.erase(it);
      evicted++;
    }
    dropped_ += evicted;
    if (evicted && !dropping_)
      spdlog::warn("output {} is not keeping up ({} lines queued); dropping outlier lines to keep interval "
                   "lines, counted as output_dropped",
                   shown(path_), queue_.size());
    dropping_ = dropping_ || evicted;
    if (refuse_locked(line.size()))
      return;
    queue_locked(std::move(line), true, evicted == 0);
  }
  cv_.notify_one();
}

bool LineSink::drop_if_full() {
  std::lock_guard lock(mu_);
  return refuse_locked(1);
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

bool LineSink::flush_while_taken(int idle_ms) {
  std::unique_lock lock(mu_);
  for (;;) {
    const uint64_t before = written_;
    if (drained_.wait_for(lock, std::chrono::milliseconds(idle_ms),
                          [&] { return (queue_.empty() && !writing_) || broken_ || written_ != before; })) {
      if ((queue_.empty() && !writing_) || broken_)
        return true;
      continue;  // a line was taken: wait on
    }
    return false;
  }
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
    std::string line = std::move(queue_.front().line);
    queue_.pop_front();
    queued_bytes_ -= line.size();
    writing_ = true;
    lock.unlock();
    int err = 0;
    const bool ok = write_all(line, err);
    lock.lock();
    writing_ = false;
    written_ += ok;
    if (!ok && err) {
      if (!broken_)
        spdlog::error("output {} failed: {}; dropping report lines, counted as output_dropped{}", shown(path_),
                      std::strerror(err), path_ == "-" ? "" : ", until it is reopened (SIGHUP)");
      broken_ = true;
      dropped_ += 1 + queue_.size();
      queue_.clear();
      queued_bytes_ = 0;
    }
    drained_.notify_all();  // flush() waits for the queue's end, flush_while_taken() for each line
  }
}

}  // namespace netlatd
