#pragma once
#include <unistd.h>

#include <utility>

namespace netlatd {

// A file descriptor closed when it goes out of scope (-1: none). Moving it
// hands the descriptor over.
class Fd {
public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  Fd(Fd &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd &operator=(Fd &&other) noexcept {
    if (this != &other) {
      if (fd_ >= 0)
        close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  // The descriptor, no longer closed here.
  int release() { return std::exchange(fd_, -1); }

private:
  int fd_;
};

}  // namespace netlatd
