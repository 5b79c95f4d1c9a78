#pragma once
// What the service and prometheus tiers share to run the daemon beside a
// scraper: free local ports, polling, and reading a Prometheus text page.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "http_get.hpp"

namespace nltest {

// A local port (UDP by default) nobody listens on right now.
inline uint16_t free_port(int type = SOCK_DGRAM) {
  int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(s, reinterpret_cast<sockaddr *>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// Polls `done` every 20 ms for up to timeout_ms.
template <typename F>
bool eventually(int timeout_ms, F done) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done())
      return true;
    if (Clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// One sample of a Prometheus text page, e.g. `netlatd_packets_total{proto="udp"}`; -1 when absent.
inline double sample(const std::string &page, const std::string &series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return -1;
}

// Packets whose stamps were lost and counted because no read could take them
// (unjoined_reused, unjoined_expired; docs/JOIN.md), in a metrics page.
inline double unjoined_losses(const std::string &page) {
  double n = 0;
  for (const char *reason : {"unjoined_reused", "unjoined_expired"})
    n += std::max(0.0, sample(page, std::string("netlatd_losses_total{reason=\"") + reason + "\"}"));
  return n;
}

// GET /metrics from the daemon on 127.0.0.1:port; "" unless 200.
inline std::string scrape(uint16_t port) {
  auto res = http_request("127.0.0.1", port, "GET", "/metrics", 2000);
  if (!res || res->status != 200)
    return "";
  return res->body;
}

}  // namespace nltest
