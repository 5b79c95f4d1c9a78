#pragma once
// What the parts of the soak share: its ports and pacing, and its clocks
// (CLOCK_MONOTONIC, that of the records' stamps and the applications' logs).
#include <time.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace nltest::soak_tier {

constexpr uint16_t kFloodPort = 5601, kChurnPort = 5602, kChurnPeerPort = 5603, kTcpPort = 5604,
                   kMetricsPort = 9661;
constexpr int kRotationsPerStall = 5;   // every fifth output is a pipe that stalls
constexpr int kStallMs = 3000;
constexpr int kChurnRounds = 1000;      // UDP sockets per round, 2 datagrams read of 3
constexpr int kTcpRequests = 1000;      // TCP connections per round
constexpr int kFloodMs = 3000;          // the flood's part of a round

using Clock = std::chrono::steady_clock;

inline int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace nltest::soak_tier
