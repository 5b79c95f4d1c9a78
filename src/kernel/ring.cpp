#include "netlatd/kernel/ring.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "netlatd/base/errors.hpp"

namespace netlatd {

namespace {

std::string why(const char *what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

RingBuffer::RingBuffer(int map_fd, uint64_t size) {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (size == 0 || (size & (size - 1)) != 0 || size % page_ != 0)
    throw Error(ExitCode::Software, "the BPF ring buffer's size " + std::to_string(size) +
                                           " is not a power-of-two multiple of the page size");
  // The kernel's layout: the consumer's page (ours to write), then the
  // producer's page and the data twice over (read-only).
  consumer_ = mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (consumer_ == MAP_FAILED) {
    consumer_ = nullptr;
    throw Error(ExitCode::Unavailable, why("cannot map the BPF ring buffer"));
  }
  producer_len_ = page_ + 2 * static_cast<size_t>(size);
  producer_ = mmap(nullptr, producer_len_, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(page_));
  if (producer_ == MAP_FAILED) {
    producer_ = nullptr;
    const std::string msg = why("cannot map the BPF ring buffer's data");
    munmap(consumer_, page_);
    throw Error(ExitCode::Unavailable, msg);
  }
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_.get() < 0 || epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, map_fd, &ev) != 0) {
    const std::string msg = why("cannot poll the BPF ring buffer");
    munmap(producer_, producer_len_);
    munmap(consumer_, page_);
    throw Error(ExitCode::Unavailable, msg);
  }
  auto *data = static_cast<const unsigned char *>(producer_) + page_;
  view_ = std::make_unique<RingView>(static_cast<uint64_t *>(consumer_), static_cast<const uint64_t *>(producer_),
                                     data, size);
}

RingBuffer::~RingBuffer() {
  if (producer_)
    munmap(producer_, producer_len_);
  if (consumer_)
    munmap(consumer_, page_);
}

bool RingBuffer::wait(int timeout_ms) {
  epoll_event ev{};
  const int n = epoll_wait(epoll_.get(), &ev, 1, timeout_ms);
  if (n < 0 && errno != EINTR)
    throw Error(ExitCode::Software, why("ring buffer poll failed"));
  return n > 0;
}

}  // namespace netlatd
