#pragma once
// A record for the unit tests: every stamp from the NET_RX raise to the
// receive return, `total` ns apart in all, read by a reader of cgroup
// `cgroup`.
#include <cstdint>

#include <linux/types.h>
#include "netlatd/abi.h"

namespace nltest {

inline netlatd_packet path_packet(uint16_t dport, uint8_t proto, bool ipv6, uint64_t cgroup,
                                  uint64_t total = 10'000) {
  netlatd_packet p{};
  const uint64_t t0 = 1'000'000;
  p.stamp_ns[NETLATD_STAMP_CALL_START] = t0 - 1;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = t0;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = t0 + total / 10;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = t0 + total / 5;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = t0 + total / 2;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = t0 + total;
  p.dport = dport;
  p.l4proto = proto;
  p.flags = ipv6 ? NETLATD_PKT_IPV6 : 0;
  p.reader_cgroup = cgroup;
  return p;
}

}  // namespace nltest
