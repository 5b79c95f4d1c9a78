// Cgroup paths, as the kernel and container runtimes make them and as users
// type them: container_of_cgroup() gives a container id only of 64 lowercase
// hex digits, a runtime only with an id and only one it knows, a pod UID only
// in one of its two shapes, and never reads outside the input;
// normalize_cgroup_arg() gives an absolute path without empty, "." or ".."
// components, the same again when normalized twice (unless it still starts
// like the mount), or a
// std::invalid_argument that the Error carrying it up shows as one line.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "netlatd/net/cgroup.hpp"

namespace {

bool lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

bool pod_shape(std::string_view s) {
  if (s.size() == 32)
    return lower_hex(s);
  if (s.size() != 36)
    return false;
  for (size_t i = 0; i < 36; ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !lower_hex(s.substr(i, 1)))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view path(reinterpret_cast<const char *>(data), size);
  const netlatd::ContainerRef c = netlatd::container_of_cgroup(path);
  if (!c.id.empty() && (c.id.size() != 64 || !lower_hex(c.id) || path.find(c.id) == std::string_view::npos))
    nlfuzz::fail("a container id is 64 lowercase hex digits of the path", c.id);
  if (c.id.empty() && !c.runtime.empty())
    nlfuzz::fail("a runtime only with a container id", c.runtime);
  if (!c.runtime.empty() && c.runtime != "docker" && c.runtime != "containerd" && c.runtime != "cri-o" &&
      c.runtime != "podman")
    nlfuzz::fail("a runtime netlatd knows", c.runtime);
  if (!c.pod_uid.empty() && !pod_shape(c.pod_uid))
    nlfuzz::fail("a pod UID is a UUID or 32 hex digits", c.pod_uid);

  try {
    const std::string n = netlatd::normalize_cgroup_arg(path, "/sys/fs/cgroup");
    if (n.empty() || n[0] != '/' || (n.size() > 1 && n.back() == '/') || n.find("//") != std::string::npos ||
        n.find("/./") != std::string::npos || n.find("/../") != std::string::npos ||
        (n.size() >= 2 && n.compare(n.size() - 2, 2, "/.") == 0) ||
        (n.size() >= 3 && n.compare(n.size() - 3, 3, "/..") == 0))
      nlfuzz::fail("a normalized cgroup path is absolute and plain", n);
    // (Unless it still looks like the mount: a cgroup named so is ambiguous.)
    if (n.rfind("/sys/fs/cgroup", 0) != 0 && netlatd::normalize_cgroup_arg(n, "/sys/fs/cgroup") != n)
      nlfuzz::fail("normalizing twice changes nothing", n);
  } catch (const std::invalid_argument &e) {
    // As options.cpp passes it on: the Error escapes what it echoes.
    nlfuzz::check_error(netlatd::Error(netlatd::ExitCode::Usage, std::string("--cgroup: ") + e.what()),
                        {netlatd::ExitCode::Usage});
  }
  return 0;
}
