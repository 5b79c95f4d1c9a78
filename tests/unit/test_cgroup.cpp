// Reader cgroups: the container (and pod) a cgroup path shows, for each
// runtime's layout under both cgroup drivers; `--cgroup` paths; the bounded
// cache of cgroup names and the labels it gives a series.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/output/labels.hpp"

using namespace netlatd;

namespace {

const std::string kId = "3f4e8a0b6c2d41e59a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b";
const std::string kId2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kPod = "0c8a2f3e-9b1d-4e5f-8a7b-6c5d4e3f2a1b";
const std::string kPodSystemd = "0c8a2f3e_9b1d_4e5f_8a7b_6c5d4e3f2a1b";

struct Row {
  std::string path;
  ContainerRef want;
};

}  // namespace

TEST_CASE("container_of_cgroup: each runtime's layout, systemd and cgroupfs drivers", "[cgroup]") {
  const std::vector<Row> rows{
      // systemd driver
      {"/system.slice/docker-" + kId + ".scope", {kId, "docker", ""}},
      {"/system.slice/docker-" + kId + ".scope/init.scope", {kId, "docker", ""}},  // systemd inside the container
      {"/machine.slice/libpod-" + kId + ".scope", {kId, "podman", ""}},
      {"/machine.slice/libpod-" + kId + ".scope/container", {kId, "podman", ""}},
      {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + kId + ".scope", {kId, "podman", ""}},
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodSystemd + ".slice/cri-containerd-" +
           kId + ".scope",
       {kId, "containerd", kPod}},
      {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kPodSystemd + ".slice/crio-" + kId +
           ".scope",
       {kId, "cri-o", kPod}},
      {"/kubepods.slice/kubepods-pod" + kPodSystemd + ".slice/cri-containerd-" + kId + ".scope",  // guaranteed
       {kId, "containerd", kPod}},
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodSystemd + ".slice/docker-" + kId +
           ".scope",
       {kId, "docker", kPod}},
      // the pod's slice itself, and CRI-O's conmon beside the container: a pod, no container
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodSystemd + ".slice", {"", "", kPod}},
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodSystemd + ".slice/crio-conmon-" + kId +
           ".scope",
       {"", "", kPod}},
      // systemd notation as a directory: the runtime made the cgroup itself
      {"/system.slice/containerd.service/kubepods-burstable-pod" + kPodSystemd + ".slice:cri-containerd:" + kId,
       {kId, "containerd", kPod}},
      {"/system.slice/containerd.service/kubepods-besteffort-pod" + kPodSystemd + ".slice:cri-containerd:" + kId,
       {kId, "containerd", kPod}},
      // cgroupfs driver
      {"/docker/" + kId, {kId, "docker", ""}},
      {"/docker/" + kId + "/docker/" + kId2, {kId2, "docker", ""}},  // docker in docker: the innermost
      {"/kubepods/burstable/pod" + kPod + "/" + kId, {kId, "", kPod}},
      {"/kubepods/besteffort/pod" + kPod + "/" + kId, {kId, "", kPod}},
      {"/kubepods/pod" + kPod + "/" + kId, {kId, "", kPod}},
      {"/kubepods/pod0123456789abcdef0123456789abcdef/" + kId, {kId, "", "0123456789abcdef0123456789abcdef"}},
      {"/libpod_parent/libpod-" + kId, {kId, "podman", ""}},
      // no container
      {"/", {}},
      {"/system.slice/nginx.service", {}},
      {"/system.slice/docker.service", {}},
      {"/system.slice/containerd.service", {}},
      {"/user.slice/user-1000.slice/session-3.scope", {}},
      {"/kubepods.slice/kubepods-burstable.slice", {}},
      {"/" + kId, {}},                                   // 64 hex digits alone say nothing
      {"/system.slice/" + kId, {}},
      {"/pod" + kPod + "/" + kId, {}},                   // "pod..." outside kubepods is not a pod
      {"/system.slice/docker-" + kId.substr(1) + ".scope", {}},  // 63 digits
      {"/system.slice/docker-" + std::string(64, 'G') + ".scope", {}},
      {"/system.slice/docker-3F4E8A0B6C2D41E59A7B8C9D0E1F2A3B4C5D6E7F8091A2B3C4D5E6F708192A3B.scope", {}},
      {"/system.slice/rkt-" + kId + ".scope", {}},
      {"/system.slice/docker-" + kId, {}},              // docker names scopes, never bare directories
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podnot_a_uid.slice", {}},
      {"/x:cri-containerd:short", {}},
      {"", {}},
      {"////", {}},
  };
  for (const Row &r : rows) {
    INFO(r.path);
    CHECK(container_of_cgroup(r.path) == r.want);
  }
}

TEST_CASE("normalize_cgroup_arg: a cgroup path, or the same under the mount; errors", "[cgroup]") {
  const std::filesystem::path root = "/sys/fs/cgroup";
  CHECK(normalize_cgroup_arg("/system.slice/nginx.service", root) == "/system.slice/nginx.service");
  CHECK(normalize_cgroup_arg("/system.slice//nginx.service/", root) == "/system.slice/nginx.service");
  CHECK(normalize_cgroup_arg("/sys/fs/cgroup/system.slice/nginx.service", root) == "/system.slice/nginx.service");
  CHECK(normalize_cgroup_arg("/sys/fs/cgroup", root) == "/");
  CHECK(normalize_cgroup_arg("/sys//fs/cgroup/a.slice", root) == "/a.slice");
  CHECK(normalize_cgroup_arg("/sys/fs/cgroup/", root) == "/");
  CHECK(normalize_cgroup_arg("/sys/fs/cgroupx/a", root) == "/sys/fs/cgroupx/a");
  CHECK(normalize_cgroup_arg("/", root) == "/");
  CHECK(normalize_cgroup_arg("/sys/fs/cgroup/unified/a.slice", "/sys/fs/cgroup/unified") == "/a.slice");
  auto message = [&](std::string_view arg) {
    try {
      normalize_cgroup_arg(arg, root);
    } catch (const std::invalid_argument &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message("") == "is empty; give a cgroup path such as /system.slice/nginx.service");
  CHECK(message("system.slice") ==
        "'system.slice' is not absolute; give a cgroup path such as /system.slice/nginx.service");
  CHECK(message("/a/../b") == "'/a/../b' has a '..' component; give the cgroup's path as /proc/PID/cgroup shows it");
  CHECK(message("/a/./b") == "'/a/./b' has a '.' component; give the cgroup's path as /proc/PID/cgroup shows it");
}

TEST_CASE("cgroup_directory: the directory under the mount, or one line why not", "[cgroup]") {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / ("netlatd-cg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "a.slice");
  { std::ofstream(root / "a.slice" / "cgroup.procs"); }
  { std::ofstream(root / "cgroup.procs"); }
  CHECK(cgroup_directory("/a.slice", root) == root / "a.slice");
  CHECK(cgroup_directory("/", root) == root);
  try {
    cgroup_directory("/b.slice", root);
    FAIL("accepted a cgroup that does not exist");
  } catch (const std::invalid_argument &e) {
    CHECK(std::string(e.what()) == "no cgroup '/b.slice' (no " + (root / "b.slice" / "cgroup.procs").string() + ")");
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("CgroupNames: container labels, a bounded cache, gone cgroups", "[cgroup][breakdown]") {
  int lookups = 0;
  CgroupNames names(
      [&](uint64_t id) -> std::optional<std::string> {
        ++lookups;
        if (id == 1)
          return "/system.slice/docker-" + kId + ".scope";
        if (id == 2)
          return "/kubepods/burstable/pod" + kPod + "/" + kId2;
        if (id < 100)
          return "/system.slice/s" + std::to_string(id) + ".service";
        return std::nullopt;  // gone
      },
      3);
  CHECK(names.info(1).container == ContainerRef{kId, "docker", ""});
  CHECK(names.info(2).container == ContainerRef{kId2, "", kPod});
  CHECK(names.info(100).path == "cgroup-id:100");
  CHECK(names.info(100).container == ContainerRef{});
  CHECK(lookups == 3);
  CHECK(names.size() == 3);
  names.info(1);                       // now the most recently used
  CHECK(names.info(5).path == "/system.slice/s5.service");  // evicts 2, the least recently used
  CHECK(names.size() == 3);
  CHECK(lookups == 4);
  names.info(1);
  CHECK(lookups == 4);  // still cached
  names.info(2);
  CHECK(lookups == 5);  // looked up again
  CHECK(names.size() == 3);

  using Labels = std::vector<std::pair<std::string, std::string>>;
  SeriesKey k;
  k.dport = 8080;
  k.proto = 6;
  k.cgroup = 2;
  CHECK(series_labels(parse_breakdown("dport,cgroup"), k, names) ==
        Labels{{"dport", "8080"},
               {"cgroup", "/kubepods/burstable/pod" + kPod + "/" + kId2},
               {"container_id", kId2},
               {"pod_uid", kPod}});
  k.cgroup = 1;
  CHECK(series_labels(parse_breakdown("cgroup"), k, names) ==
        Labels{{"cgroup", "/system.slice/docker-" + kId + ".scope"},
               {"container_id", kId},
               {"container_runtime", "docker"}});
  k.cgroup = 7;  // no container: the cgroup alone
  CHECK(series_labels(parse_breakdown("cgroup"), k, names) == Labels{{"cgroup", "/system.slice/s7.service"}});
  k.cgroup = kNoCgroup;
  CHECK(series_labels(parse_breakdown("cgroup"), k, names) == Labels{{"cgroup", "unknown"}});
}
