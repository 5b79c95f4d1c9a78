#include "netlatd/app/demo.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "netlatd/base/errors.hpp"

namespace netlatd {
namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int bound_socket(int type, uint16_t port) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw Error(ExitCode::Software, std::string("demo: socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  timeval tv{0, 200000};  // readers wake up to notice the stop flag
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a = loopback(port);
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
    int err = errno;
    close(fd);
    throw Error(ExitCode::Usage, "demo: cannot bind 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err) +
                                     " (choose another with --port)");
  }
  return fd;
}

void pace(std::mt19937 &rng, const std::atomic<bool> &stop) {
  // Irregular gaps (0.5-10 ms) so the reader sometimes sleeps, sometimes not.
  std::uniform_int_distribution<int> gap_us(500, 10000);
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(gap_us(rng));
  while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

}  // namespace

DemoTraffic::DemoTraffic(uint16_t port) {
  udp_rx_ = bound_socket(SOCK_DGRAM, port);
  try {
    tcp_listen_ = bound_socket(SOCK_STREAM, port);
  } catch (...) {
    close(udp_rx_);
    throw;
  }
  listen(tcp_listen_, 4);

  threads_.emplace_back([this] { read_datagrams(); });
  threads_.emplace_back([this, port] { send_datagrams(port); });
  threads_.emplace_back([this] { read_streams(); });
  threads_.emplace_back([this, port] { send_streams(port); });
}

void DemoTraffic::read_datagrams() {
  char buf[2048];
  while (!stop_) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    (void)recvfrom(udp_rx_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr *>(&from), &len);
  }
}

void DemoTraffic::send_datagrams(uint16_t port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = loopback(port);
  std::mt19937 rng(42);
  char payload[256] = "netlatd demo datagram";
  while (!stop_) {
    (void)sendto(fd, payload, 64 + rng() % 192, 0, reinterpret_cast<sockaddr *>(&to), sizeof(to));
    pace(rng, stop_);
  }
  close(fd);
}

void DemoTraffic::read_streams() {
  char buf[4096];
  while (!stop_) {
    int c = accept4(tcp_listen_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0)
      continue;
    timeval tv{0, 200000};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (!stop_) {
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        break;
    }
    close(c);
  }
}

void DemoTraffic::send_streams(uint16_t port) {
  std::mt19937 rng(7);
  while (!stop_) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to = loopback(port);
    if (connect(fd, reinterpret_cast<sockaddr *>(&to), sizeof(to)) != 0) {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    char payload[512] = "netlatd demo stream";
    for (int i = 0; i < 200 && !stop_; i++) {
      if (send(fd, payload, 100 + rng() % 400, MSG_NOSIGNAL) < 0)
        break;
      pace(rng, stop_);
    }
    close(fd);
  }
}

DemoTraffic::~DemoTraffic() {
  stop_ = true;
  for (auto &t : threads_)
    t.join();
  close(udp_rx_);
  close(tcp_listen_);
}

Companion demo_companion(const Options &opts) {
  if (!opts.demo)
    return {};
  const uint16_t port = opts.ports.front();
  return [port] { return std::make_shared<DemoTraffic>(port); };
}

}  // namespace netlatd
