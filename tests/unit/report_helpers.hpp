#pragma once
// Loopback-shaped packets with stage durations of the caller's choosing, and
// wall-clock instants, for the report tests: test_report.cpp (the aggregate
// and its text), test_report_json.cpp and test_report_time.cpp.
#include <chrono>
#include <cstdint>

#include <linux/types.h>
#include "netlatd/abi.h"

namespace nltest {

constexpr uint8_t kUdp = 17, kTcp = 6;

// Loopback-shaped packet read by a reader already waiting in its receive call
// (called before the packet came, on CPU again `queue` after it was queued):
// no IRQ stamp; stage durations chosen by the caller.
inline netlatd_packet lo_packet(uint64_t t0, uint64_t softirq, uint64_t netif, uint64_t queue,
                                uint64_t oncpu, uint8_t proto = kUdp) {
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_CALL_START] = t0 - 1;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = t0;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = t0 + 100;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = t0 + 100 + softirq;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = t0 + 100 + softirq + netif;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = t0 + 100 + softirq + netif + queue;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = t0 + 100 + softirq + netif + queue + oncpu;
  p.l4proto = proto;
  p.dport = 5000;
  return p;
}

inline std::chrono::system_clock::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms) {
  using namespace std::chrono;
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s} +
         milliseconds{ms};
}

}  // namespace nltest
