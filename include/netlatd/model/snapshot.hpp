#pragma once
// What one Prometheus scrape shows, kept by the daemon and rendered by
// output/prometheus.hpp: cumulative counters and per-stage histograms.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/model/histogram.hpp"
#include "netlatd/model/stages.hpp"

namespace netlatd {

inline constexpr unsigned kDefaultBucketsPerPowerOfTwo = 4;

// Everything one scrape shows. Counters and histograms are cumulative since
// the daemon started (Prometheus computes rates itself); they never go down.
struct MetricsSnapshot {
  std::string iface;
  std::vector<uint16_t> ports;
  uint32_t sample = 1;  // --sample
  std::string version;  // netlatd version
  std::string kernel;   // uname -r
  // `le` bounds per power of two (--metrics-resolution): 1, 2, 4 or 8.
  unsigned buckets_per_power_of_two = kDefaultBucketsPerPowerOfTwo;

  struct StageMetrics {
    bool applicable = false;  // false: no series in netlatd_stage_latency_seconds
    std::string start_hook;   // e.g. "tp_btf/netif_receive_skb"
    std::string end_hook;
  };
  std::array<StageMetrics, kStageCount> stages;  // indexed by Stage

  // One series of the breakdown (--by): its labels in order, e.g.
  // {{"dport","5000"},{"proto","udp"}}, and its latency per stage in
  // nanoseconds, cumulative. Every applicable stage is rendered for it.
  struct Series {
    std::vector<std::pair<std::string, std::string>> labels;
    std::array<Histogram, kStageCount> latency;
  };
  std::map<SeriesKey, Series> series;

  uint64_t packets_udp = 0;
  uint64_t packets_tcp = 0;
  // Matching packets: the coverage's denominator (model/coverage.hpp); the
  // histograms above give the numerators.
  uint64_t matching = 0;
  // Packets the kernel dropped before they reached the socket (stack_dropped):
  // the network's loss, not netlatd's.
  uint64_t kernel_drops = 0;
  // netlatd's own losses, by reason ("ringbuf_full", ...): records or reads it
  // could not measure. Never stack_dropped.
  std::map<std::string, uint64_t> losses;
  // Reads whose datagram no record names, by why: "ambiguous", "untracked".
  std::map<std::string, uint64_t> reads_unnamed;
  uint64_t sampled_out = 0;                     // matching packets --sample left out
  uint64_t queue_unseen = 0;                    // records without a socket-queue stamp
  uint64_t reader_stamps_far = 0;               // reader stamps left out: over 4.29 s before the return
  // Records counted in packets but added to no stage: stamps out of path
  // order; and records whose reader is not known (ambiguous or unknown),
  // which add only to the stages before the read. As the JSON's
  // `unordered` and `reader_unknown`.
  uint64_t unordered = 0;
  uint64_t reader_unknown = 0;
  // With the napi_poll hook: the traced devices' NAPI polls, the packets they
  // processed, and the polls that used their whole budget. Empty without it.
  std::map<std::string, uint64_t> napi;
  // --cgroup: records left out, "outside" / "no_reader"; empty without --cgroup.
  std::map<std::string, uint64_t> cgroup_filtered;
  // TCP payload bytes: "read" by receive calls on watched sockets, "reported"
  // in records, "skipped" in gaps no record covers.
  std::map<std::string, uint64_t> tcp_bytes;
  std::map<std::string, uint64_t> hook_misses;  // hook label -> BPF recursion misses
};

}  // namespace netlatd
