#include "netlatd/net/cgroup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "netlatd/base/fd.hpp"

namespace netlatd {

namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;  // CGROUP2_SUPER_MAGIC
// The file-handle type of kernfs (FILEID_KERNFS): its 8 bytes are the node's
// id, which for cgroup v2 is the cgroup id BPF reports.
constexpr int kFileIdKernfs = 0xfe;

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return !s.empty();
}

bool is_container_id(std::string_view s) { return s.size() == 64 && is_hex(s); }

// A Kubernetes pod UID: a UUID, or the 32 hex digits of a static pod's hash.
bool is_pod_uid(std::string_view s) {
  if (s.size() == 32)
    return is_hex(s);
  if (s.size() != 36)
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex(s.substr(i, 1)))
      return false;
  }
  return true;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The runtime a systemd scope prefix belongs to ("cri-containerd" -> "containerd").
std::optional<std::string_view> runtime_of_prefix(std::string_view prefix) {
  if (prefix == "docker")
    return "docker";
  if (prefix == "cri-containerd")
    return "containerd";
  if (prefix == "crio")
    return "cri-o";
  if (prefix == "libpod")
    return "podman";
  return std::nullopt;
}

// "kubepods-burstable-pod<uid with _>.slice" (systemd driver) or
// "pod<uid>" (cgroupfs driver, below a kubepods directory).
std::optional<std::string> pod_of_component(std::string_view c, bool under_kubepods) {
  if (c.rfind("kubepods", 0) == 0 && ends_with(c, ".slice")) {
    const size_t at = c.rfind("-pod");
    if (at == std::string_view::npos)
      return std::nullopt;
    std::string uid(c.substr(at + 4, c.size() - at - 4 - 6));
    for (char &ch : uid)
      if (ch == '_')
        ch = '-';
    if (is_pod_uid(uid))
      return uid;
    return std::nullopt;
  }
  if (under_kubepods && c.rfind("pod", 0) == 0 && is_pod_uid(c.substr(3)))
    return std::string(c.substr(3));
  return std::nullopt;
}

// "<prefix>-<id>.scope" (systemd) or "<prefix>-<id>" (podman's cgroupfs).
std::optional<ContainerRef> scope_container(std::string_view c) {
  std::string_view body = ends_with(c, ".scope") ? c.substr(0, c.size() - 6) : c;
  if (body.size() < 66 || body[body.size() - 65] != '-')
    return std::nullopt;
  const std::string_view id = body.substr(body.size() - 64);
  const auto runtime = runtime_of_prefix(body.substr(0, body.size() - 65));
  if (!runtime || !is_container_id(id))
    return std::nullopt;
  // Only podman names a bare (cgroupfs) directory so; the others, scopes.
  if (body.size() == c.size() && *runtime != "podman")
    return std::nullopt;
  return ContainerRef{std::string(id), std::string(*runtime), ""};
}

}  // namespace

ContainerRef container_of_cgroup(std::string_view path) {
  ContainerRef out;
  bool under_kubepods = false;
  std::string_view parent;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view c = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (c.empty())
      continue;
    if (c == "kubepods" || c.rfind("kubepods.slice", 0) == 0 || c.rfind("kubepods-", 0) == 0)
      under_kubepods = true;
    // The systemd notation "slice:prefix:name" as a directory name, where
    // the runtime made the cgroup itself (a containerd inside a container).
    if (const size_t colon = c.find(':'); colon != std::string_view::npos) {
      const std::string_view slice = c.substr(0, colon), rest = c.substr(colon + 1);
      const size_t colon2 = rest.find(':');
      if (colon2 != std::string_view::npos) {
        const auto runtime = runtime_of_prefix(rest.substr(0, colon2));
        const std::string_view id = rest.substr(colon2 + 1);
        if (runtime && is_container_id(id)) {
          out.id = id;
          out.runtime = *runtime;
          if (auto pod = pod_of_component(slice, true))
            out.pod_uid = *pod;
        }
      }
    } else if (auto pod = pod_of_component(c, under_kubepods)) {
      out.pod_uid = *pod;
      under_kubepods = true;
    } else if (auto scope = scope_container(c)) {
      out.id = scope->id;
      out.runtime = scope->runtime;
    } else if (is_container_id(c) && (parent == "docker" || !out.pod_uid.empty())) {
      // cgroupfs driver: /docker/<id>, /kubepods/<qos>/pod<uid>/<id> (which
      // runtime made it, the path does not say).
      out.id = c;
      out.runtime = parent == "docker" ? "docker" : "";
    }
    parent = c;
  }
  return out;
}

std::filesystem::path cgroup2_root() {
  struct statfs fs{};
  if (::statfs("/sys/fs/cgroup/unified", &fs) == 0 && fs.f_type == kCgroup2SuperMagic)
    return "/sys/fs/cgroup/unified";
  return "/sys/fs/cgroup";
}

namespace {

// The path under `root` of the open cgroup directory `fd`, nothing if it is
// outside `root` (another mount, a cgroup namespace) or deleted.
std::optional<std::string> path_of_fd(int fd, const std::string &root) {
  std::array<char, 4096> buf{};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size() - 1);
  if (n <= 0)
    return std::nullopt;
  const std::string target(buf.data(), static_cast<size_t>(n));
  if (ends_with(target, " (deleted)"))
    return std::nullopt;
  if (target == root)
    return "/";
  if (target.size() > root.size() && target.compare(0, root.size(), root) == 0 && target[root.size()] == '/')
    return target.substr(root.size());
  return std::nullopt;
}

enum class ByHandle { Found, Gone, CannotTell };

ByHandle find_by_handle(uint64_t id, const std::string &root, std::string &path) {
  const Fd mount(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (mount.get() < 0)
    return ByHandle::CannotTell;
  std::vector<unsigned char> storage(sizeof(file_handle) + sizeof(id));
  auto *fh = reinterpret_cast<file_handle *>(storage.data());
  fh->handle_bytes = sizeof(id);
  fh->handle_type = kFileIdKernfs;
  std::memcpy(fh->f_handle, &id, sizeof(id));
  const Fd cgroup(::open_by_handle_at(mount.get(), fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (cgroup.get() < 0)
    return errno == ESTALE || errno == ENOENT ? ByHandle::Gone : ByHandle::CannotTell;
  const auto p = path_of_fd(cgroup.get(), root);
  if (!p)
    return ByHandle::CannotTell;
  path = *p;
  return ByHandle::Found;
}

}  // namespace

std::optional<std::string> find_cgroup_path(uint64_t id) {
  const std::filesystem::path root = cgroup2_root();
  std::string found;
  switch (find_by_handle(id, root.string(), found)) {
  case ByHandle::Found:
    return found;
  case ByHandle::Gone:
    return std::nullopt;
  case ByHandle::CannotTell:
    break;
  }
  // Without CAP_DAC_READ_SEARCH: the id is the directory's inode number.
  struct stat st{};
  if (::stat(root.c_str(), &st) == 0 && st.st_ino == id)
    return "/";
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           root, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec))
      continue;
    if (::stat(it->path().c_str(), &st) == 0 && st.st_ino == id)
      return "/" + std::filesystem::relative(it->path(), root, ec).string();
  }
  return std::nullopt;
}

std::string normalize_cgroup_arg(std::string_view arg, const std::filesystem::path &root) {
  if (arg.empty())
    throw std::invalid_argument("is empty; give a cgroup path such as /system.slice/nginx.service");
  if (arg.front() != '/')
    throw std::invalid_argument("'" + std::string(arg) +
                                "' is not absolute; give a cgroup path such as /system.slice/nginx.service");
  std::string out;
  std::string_view rest = arg;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view c = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (c.empty())
      continue;
    if (c == "." || c == "..")
      throw std::invalid_argument("'" + std::string(arg) + "' has a '" + std::string(c) +
                                  "' component; give the cgroup's path as /proc/PID/cgroup shows it");
    out += '/';
    out += c;
  }
  // The same under the mount: the mount's own path taken off, once.
  const std::string r = root.lexically_normal().string();
  if (r.size() > 1 && out.compare(0, r.size(), r) == 0 && (out.size() == r.size() || out[r.size()] == '/'))
    out.erase(0, r.size());
  return out.empty() ? "/" : out;
}

std::filesystem::path cgroup_directory(const std::string &path, const std::filesystem::path &root) {
  const std::filesystem::path dir = path == "/" ? root : root / path.substr(1);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "cgroup.procs", ec))
    throw std::invalid_argument("no cgroup '" + path + "' (no " + (dir / "cgroup.procs").string() + ")");
  return dir;
}

CgroupNames::CgroupNames(Lookup lookup, size_t capacity)
    : lookup_(lookup ? std::move(lookup) : Lookup(find_cgroup_path)), capacity_(capacity ? capacity : 1) {}

const CgroupInfo &CgroupNames::info(uint64_t id) {
  if (auto it = known_.find(id); it != known_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.second);
    return it->second.first;
  }
  CgroupInfo info;
  if (id == kNoCgroup) {
    info.path = "unknown";
  } else if (id == kOtherCgroup) {
    info.path = "other";
  } else if (auto path = lookup_(id)) {
    info.path = *path;
    info.container = container_of_cgroup(info.path);
  } else {
    info.path = "cgroup-id:" + std::to_string(id);
  }
  if (known_.size() >= capacity_) {
    known_.erase(recent_.back());
    recent_.pop_back();
  }
  recent_.push_front(id);
  return known_.emplace(id, std::make_pair(std::move(info), recent_.begin())).first->second.first;
}

}  // namespace netlatd
