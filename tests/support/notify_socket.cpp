#include "notify_socket.hpp"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace nltest {

NotifySocket::NotifySocket(Reading reading, Address address) {
  char tmpl[] = "/tmp/netlatd-notify-XXXXXX";
  if (!::mkdtemp(tmpl))
    throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  // An abstract name is unique as the directory's path is.
  path_ = (address == Address::abstract ? "@" : "") + dir_ + "/notify.sock";
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd_ < 0 || path_.size() >= sizeof(addr.sun_path))
    throw std::runtime_error("cannot create a notify socket");
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  socklen_t len = sizeof(addr);
  if (address == Address::abstract) {
    addr.sun_path[0] = '\0';
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size());
  }
  if (::bind(fd_, reinterpret_cast<sockaddr *>(&addr), len) != 0)
    throw std::runtime_error("cannot bind the notify socket " + path_);
  if (reading == Reading::now)
    start_reading();
}

void NotifySocket::start_reading() {
  if (!reader_.joinable())
    reader_ = std::thread([this] { read_all(); });
}

NotifySocket::~NotifySocket() {
  stop_ = true;
  if (reader_.joinable())
    reader_.join();
  if (fd_ >= 0)
    ::close(fd_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void NotifySocket::read_all() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1)
      continue;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0)
      continue;
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.emplace_back(buf, static_cast<size_t>(n));
    arrived_.notify_all();
  }
}

std::string NotifySocket::receive(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!arrived_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return !inbox_.empty(); }))
    return {};
  received_.push_back(std::move(inbox_.front()));
  inbox_.pop_front();
  return received_.back();
}

bool NotifySocket::wait_for_line(const std::string &line, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      return false;
    std::istringstream msg(receive(static_cast<int>(left)));
    for (std::string l; std::getline(msg, l);)
      if (l == line)
        return true;
  }
}

}  // namespace nltest
