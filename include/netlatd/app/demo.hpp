#pragma once
// --demo: traffic netlatd makes itself on loopback so a new user sees real
// numbers at once. A UDP reader and a TCP reader (real recvfrom()/recv()
// callers) and their senders, on 127.0.0.1, bounded in rate.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "netlatd/service/daemon.hpp"

namespace netlatd {

class DemoTraffic {
public:
  explicit DemoTraffic(uint16_t port);  // UDP and TCP on 127.0.0.1:port. Throws Error when the port is taken.
  ~DemoTraffic();
  DemoTraffic(const DemoTraffic &) = delete;
  DemoTraffic &operator=(const DemoTraffic &) = delete;

private:
  // Each runs on a thread of its own until stop_.
  void read_datagrams();
  void send_datagrams(uint16_t port);
  void read_streams();
  void send_streams(uint16_t port);

  std::atomic<bool> stop_{false};
  int udp_rx_ = -1, tcp_listen_ = -1;
  std::vector<std::thread> threads_;
};

// --demo's traffic as the daemon's companion; none without --demo.
Companion demo_companion(const Options &opts);

}  // namespace netlatd
