#pragma once
// Records for the unit tests, and what the kernel side (--aggregate) would
// add for them.
#include <cstdint>
#include <vector>

#include <linux/types.h>
#include "netlatd/abi.h"
#include "netlatd/model/interval.hpp"

namespace nltest {

// Every stamp from the NET_RX raise to the receive return, `total` ns apart
// in all, read by a reader of cgroup `cgroup`.
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

// The series of dport 5000 the kernel side adds for the records of one
// protocol: per stage, each record's value.
inline netlatd::KernelSeries kernel_series(const std::vector<netlatd_packet> &records, uint8_t proto) {
  constexpr uint8_t kTcp = 6;
  netlatd::KernelSeries k;
  k.key.dport = 5000;
  k.key.proto = proto;
  netlatd::IntervalAggregator one;
  for (const netlatd_packet &p : records)
    if (p.l4proto == proto) {
      one.add(p);
      k.data.packets++;
      k.tcp += proto == kTcp;
      k.tcp_bytes += proto == kTcp ? p.len : 0;
    }
  for (netlatd::Stage s : netlatd::kAllStages)
    k.data.stages[static_cast<size_t>(s)] = one.stage(s);
  return k;
}

// The header of a run tracing lo, ports 5000 and 5001, on tp_btf hooks.
inline netlatd::ReportHeader lo_header() {
  using namespace netlatd;
  ReportHeader h;
  h.host = "testhost";
  h.iface = "lo";
  h.ifindex = 1;
  h.ports = {5000, 5001};
  h.kernel = "6.18.0-test";
  h.version = "0.1.0";
  const char *hooks[][2] = {{"tp_btf/irq_handler_entry", "tp_btf/softirq_entry"},
                            {"tp_btf/softirq_entry", "tp_btf/netif_receive_skb"},
                            {"tp_btf/netif_receive_skb", "tp_btf/sk_data_ready"},
                            {"tp_btf/sk_data_ready", "tp_btf/sched_switch"},
                            {"tp_btf/sched_switch", "tp_btf/sock_recv_length"},
                            {"tp_btf/sk_data_ready", "tp_btf/sock_recv_length"},
                            {"tp_btf/softirq_raise", "tp_btf/sock_recv_length"}};
  for (size_t i = 0; i < kStageCount; ++i) {
    h.stages[i].start_hook = hooks[i][0];
    h.stages[i].end_hook = hooks[i][1];
  }
  h.stages[static_cast<size_t>(Stage::Irq)].applicable = false;
  h.stages[static_cast<size_t>(Stage::Irq)].why_not = "interface has no IRQ lines (lo, veth)";
  return h;
}

}  // namespace nltest
