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

#include "netlatd/cgroup.hpp"
#include "netlatd/histogram.hpp"
#include "netlatd/stages.hpp"

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

// What a cgroup id is called: its path under the cgroup2 mount
// ("/system.slice/nginx.service"), "unknown" for kNoCgroup, "other" for
// kOtherCgroup, "cgroup-id:N" for a cgroup gone before it was looked up; and
// the container that path shows, if any.
struct CgroupInfo {
  std::string path;
  ContainerRef container;
};

// Cgroup ids named for people, remembered: the kCgroupNamesMax most recently
// used (a cgroup id is never reused, so a name never goes stale; one evicted
// and gone since is named "cgroup-id:N" when it comes back).
inline constexpr size_t kCgroupNamesMax = 4096;
class CgroupNames {
public:
  using Lookup = std::function<std::optional<std::string>(uint64_t)>;
  // `lookup` for tests; by default find_cgroup_path (netlatd/cgroup.hpp).
  explicit CgroupNames(Lookup lookup = {}, size_t capacity = kCgroupNamesMax);
  const CgroupInfo &info(uint64_t id);
  const std::string &name(uint64_t id) { return info(id).path; }
  size_t size() const { return known_.size(); }

private:
  Lookup lookup_;
  size_t capacity_;
  std::list<uint64_t> recent_;  // most recently used first
  std::map<uint64_t, std::pair<CgroupInfo, std::list<uint64_t>::iterator>> known_;
};

// The traced interfaces' names by their number (netlatd_packet.iface_id).
using IfaceNames = std::map<uint32_t, std::string>;

// The label pairs of a series in the fixed key order, only the keys split
// by: {{"dport","5000"},{"proto","udp"}}. An interface number without a
// name reads "iface-id:N". `cgroup` comes with `container_id`,
// `container_runtime` and `pod_uid` where its path shows them.
std::vector<std::pair<std::string, std::string>> series_labels(const BreakdownSpec &spec, const SeriesKey &key,
                                                               CgroupNames &names, const IfaceNames *ifaces = nullptr);

}  // namespace netlatd
