#pragma once
// The snapshot the Prometheus tests render and serve, shared by
// test_metrics.cpp (the exposition) and test_metrics_server.cpp (/metrics).
#include <cstddef>
#include <cstdint>
#include <string>

#include "netlatd/model/snapshot.hpp"

namespace nltest {

inline netlatd::MetricsSnapshot::StageMetrics &stage_of(netlatd::MetricsSnapshot &s, netlatd::Stage st) {
  return s.stages[static_cast<size_t>(st)];
}

inline netlatd::Histogram &latency_of(netlatd::MetricsSnapshot &s, uint16_t dport, uint8_t proto,
                                      netlatd::Stage st) {
  auto &series = s.series[netlatd::SeriesKey{dport, proto, 0, 0}];
  series.labels = {{"dport", std::to_string(dport)}, {"proto", proto == 6 ? "tcp" : "udp"}};
  return series.latency[static_cast<size_t>(st)];
}

inline netlatd::MetricsSnapshot example_snapshot() {
  using netlatd::Stage;
  netlatd::MetricsSnapshot s;
  s.iface = "lo";
  s.ports = {5000, 5001};
  s.version = "0.1.0";
  s.kernel = "6.18.0-test";
  for (Stage st : netlatd::kAllStages) {
    auto &m = stage_of(s, st);
    m.applicable = st != Stage::Irq;  // lo has no NIC IRQ
    m.start_hook = "tp_btf/start";
    m.end_hook = "tp_btf/end";
  }
  auto &total = latency_of(s, 5000, 17, Stage::Total);
  total.record(90);             // 90 ns
  total.record(1'500);          // 1.5 us
  total.record(3'000'000);      // 3 ms
  total.record(20'000'000'000); // 20 s: beyond the last finite bound
  latency_of(s, 5001, 6, Stage::Total).record(700);
  s.packets_udp = 4;
  s.packets_tcp = 1;
  s.kernel_drops = 7;
  s.losses = {{"ringbuf_full", 2}, {"output_dropped", 0}};
  s.reads_unnamed = {{"ambiguous", 3}, {"untracked", 1}};
  s.queue_unseen = 5;
  s.sample = 16;
  s.sampled_out = 150;
  s.unordered = 8;
  s.reader_unknown = 9;
  s.tcp_bytes = {{"read", 1000}, {"reported", 900}, {"skipped", 64}};
  s.hook_misses = {{"tp_btf/tcp_probe", 6}, {"tp_btf/netif_receive_skb", 0}};
  return s;
}

}  // namespace nltest
