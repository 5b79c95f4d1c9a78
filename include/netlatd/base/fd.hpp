#pragma once
#include <unistd.h>

namespace netlatd {

// A file descriptor closed when it goes out of scope (-1: none).
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

}  // namespace netlatd
