#pragma once
// The per-stage histograms split by what a packet is (destination port,
// protocol, IP family) and who read it (the reader's cgroup): `--by`. The
// same split feeds the JSON `breakdown` and the Prometheus labels; every key
// is bounded (docs/OUTPUT.md#breakdown says by how much).
#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "netlatd/model/histogram.hpp"
#include "netlatd/model/stages.hpp"

namespace netlatd {

// What the histograms are split by. The default splits by port and protocol.
struct BreakdownSpec {
  bool dport = true;
  bool proto = true;
  bool family = false;
  bool cgroup = false;
  bool iface = false;  // the traced interface: on by itself when several are traced
  bool operator==(const BreakdownSpec &) const = default;
};

// "dport,proto,family,cgroup,iface" in any order and subset, or "none". Throws
// std::invalid_argument with a one-line message naming the bad word.
BreakdownSpec parse_breakdown(std::string_view list);
// The keys split by, in their fixed order: {"dport", "proto"}.
std::vector<std::string_view> breakdown_keys(const BreakdownSpec &spec);

// Reader cgroups named one by one before the rest are folded into `other`.
inline constexpr size_t kCgroupTopN = 8;
// The cgroup of a record whose reader is not known (a packet-only record).
inline constexpr uint64_t kNoCgroup = 0;
// The cgroups beyond the top N, folded together.
inline constexpr uint64_t kOtherCgroup = UINT64_MAX;

// The transport protocols a record carries (IPPROTO_TCP, IPPROTO_UDP).
inline constexpr uint8_t kIpprotoTcp = 6;
inline constexpr uint8_t kIpprotoUdp = 17;

// One series: the value of each key split by, 0 for a key not split by.
struct SeriesKey {
  uint16_t dport = 0;
  uint8_t proto = 0;   // IPPROTO_UDP, IPPROTO_TCP
  uint8_t family = 0;  // 4, 6
  uint64_t cgroup = 0; // cgroup v2 id, kNoCgroup or kOtherCgroup
  uint32_t iface = 0;  // the traced interface's number (netlatd_packet.iface_id)
  auto operator<=>(const SeriesKey &) const = default;
};
SeriesKey series_key(const BreakdownSpec &spec, const netlatd_packet &p) noexcept;

// Packets and per-stage latency of one series.
struct StageHistograms {
  uint64_t packets = 0;
  std::array<Histogram, kStageCount> stages{};
  void merge(const StageHistograms &other) noexcept;
};
using SeriesMap = std::map<SeriesKey, StageHistograms>;

// One series as the kernel side added it (--aggregate): its packets (of
// them TCP, and their payload) and per-stage histograms.
struct KernelSeries {
  SeriesKey key;
  StageHistograms data;
  uint64_t tcp = 0;
  uint64_t tcp_bytes = 0;
};

// The JSON's cut: per port, protocol and family, the kCgroupTopN cgroups with
// the most packets (ties: the lower id) keep their own series; the others are
// merged into one series of cgroup kOtherCgroup. Records without a reader
// (kNoCgroup) are never folded.
SeriesMap fold_cgroups_top(const SeriesMap &series, size_t top_n = kCgroupTopN);

// Prometheus' cut: a counter must never go down, so a cgroup that has a series
// keeps it for the daemon's life. The first `limit` cgroups seen get one; any
// later one counts under kOtherCgroup.
class StickyCgroups {
public:
  explicit StickyCgroups(size_t limit = kCgroupTopN) : limit_(limit) {}
  uint64_t map(uint64_t cgroup);

private:
  size_t limit_;
  std::set<uint64_t> named_;
};

// The traced interfaces' names by their number (netlatd_packet.iface_id).
using IfaceNames = std::map<uint32_t, std::string>;

}  // namespace netlatd
