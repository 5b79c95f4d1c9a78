#pragma once
// Reader cgroups for people and for filters: a cgroup v2 id to its path, a
// path to the container (and Kubernetes pod) it shows, and `--cgroup` paths
// to the directories the kernel side checks readers against.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <functional>
#include <list>
#include <map>
#include <string_view>
#include <utility>

#include "netlatd/model/breakdown.hpp"

namespace netlatd {

// The container a cgroup path shows; empty strings for what it does not.
struct ContainerRef {
  std::string id;       // "3f4e...": 64 hex digits for every layout known
  std::string runtime;  // "docker", "containerd", "cri-o", "podman"; "" when the path does not say
  std::string pod_uid;  // Kubernetes pod UID "0c8a...-...", from a kubepods pod slice or directory
  bool operator==(const ContainerRef &) const = default;
};

// The container of a cgroup v2 path ("/system.slice/docker-<64hex>.scope",
// "/kubepods/burstable/pod<uid>/<64hex>", ...): the innermost path component
// that names one, so a cgroup a container made below its own (systemd in a
// container) is still that container's. Pure; docs/OUTPUT.md lists the layouts.
ContainerRef container_of_cgroup(std::string_view path);

// Where the cgroup v2 hierarchy is mounted: the unified mount of a hybrid
// layout first (its ids are the ones BPF reports), else /sys/fs/cgroup.
std::filesystem::path cgroup2_root();

// The path of cgroup v2 id `id` under cgroup2_root() ("/system.slice/x.service"),
// or nothing if no cgroup has it (gone). By file handle where the kernel lets
// netlatd open one (CAP_DAC_READ_SEARCH), else by a walk of the hierarchy.
std::optional<std::string> find_cgroup_path(uint64_t id);

// A `--cgroup` value: a cgroup path as /proc/PID/cgroup and the breakdown
// show it ("/system.slice/nginx.service"), or the same under the mount
// ("/sys/fs/cgroup/system.slice/nginx.service"). Throws std::invalid_argument
// (one line) if it is not absolute or climbs with "..". Pure.
std::string normalize_cgroup_arg(std::string_view arg, const std::filesystem::path &root);

// The directory of a normalized `--cgroup` path under `root`. Throws
// std::invalid_argument (one line) when there is no such cgroup.
std::filesystem::path cgroup_directory(const std::string &path, const std::filesystem::path &root);

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
  // `lookup` for tests; by default find_cgroup_path.
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

}  // namespace netlatd
