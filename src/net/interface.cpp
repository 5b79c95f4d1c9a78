#include "netlatd/net/interface.hpp"

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/sockios.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "netlatd/base/errors.hpp"
#include "netlatd/base/fd.hpp"

namespace netlatd {
namespace fs = std::filesystem;

std::optional<InterfaceInfo> lookup_interface(const std::string &name, const std::vector<int> &irq_override) {
  if (name.empty() || name.size() >= IF_NAMESIZE)
    return std::nullopt;
  unsigned idx = if_nametoindex(name.c_str());
  if (idx == 0)
    return std::nullopt;
  InterfaceInfo info;
  info.name = name;
  info.ifindex = idx;
  std::ifstream f("/proc/interrupts");
  std::stringstream interrupts;
  interrupts << f.rdbuf();
  info.irq_lines = irq_override.empty() ? find_irq_lines("/", name, interrupts.str())
                                        : irq_lines_given(irq_override, interrupts.str());
  info.irqs = counted_irqs(info.irq_lines);
  std::error_code ec;
  fs::path drv = fs::read_symlink(fs::path("/sys/class/net") / name / "device" / "driver", ec);
  if (!ec)
    info.driver = drv.filename().string();
  return info;
}

uint32_t current_netns_inode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0)
    return 0;
  return static_cast<uint32_t>(st.st_ino);
}

namespace {

// Attribute types carry NLA_F_NESTED / NLA_F_NET_BYTEORDER in their top bits
// on some kernels and paths; the type is what is left.
unsigned short attr_type(const rtattr *a) {
  return static_cast<unsigned short>(a->rta_type & NLA_TYPE_MASK);
}

std::string attr_string(const rtattr *a) {
  const char *s = static_cast<const char *>(RTA_DATA(a));
  // NUL-terminated by the kernel; do not trust it to be.
  return std::string(s, strnlen(s, RTA_PAYLOAD(a)));
}

template <typename T>
std::optional<T> attr_value(const rtattr *a) {
  if (RTA_PAYLOAD(a) < sizeof(T))
    return std::nullopt;
  T v;
  std::memcpy(&v, RTA_DATA(a), sizeof(T));
  return v;
}

// IFLA_LINKINFO: the kind, and for a VLAN its id from IFLA_INFO_DATA (whose
// attributes mean what the kind says, so read once the kind is known).
void parse_link_info(const rtattr *info, LinkEvent &e) {
  // A second IFLA_LINKINFO in one message replaces the first as a whole:
  // a VLAN id must not outlive the kind it came with.
  e.type.clear();
  e.vlan_id = 0;
  const rtattr *data = nullptr;
  int left = static_cast<int>(RTA_PAYLOAD(info));
  for (auto *a = static_cast<const rtattr *>(RTA_DATA(info)); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
    if (attr_type(a) == IFLA_INFO_KIND)
      e.type = attr_string(a);
    else if (attr_type(a) == IFLA_INFO_DATA)
      data = a;
  }
  if (!data || e.type != "vlan")
    return;
  left = static_cast<int>(RTA_PAYLOAD(data));
  for (auto *a = static_cast<const rtattr *>(RTA_DATA(data)); RTA_OK(a, left); a = RTA_NEXT(a, left))
    if (attr_type(a) == IFLA_VLAN_ID)
      e.vlan_id = attr_value<uint16_t>(a).value_or(0);
}

}  // namespace

std::vector<LinkEvent> parse_link_messages(const void *data, size_t len, LinkBatchEnd *end) {
  std::vector<LinkEvent> events;
  // NLMSG_OK/NLMSG_NEXT take an int length; a datagram is far below INT_MAX.
  int left = static_cast<int>(std::min<size_t>(len, 1u << 30));
  for (auto *h = static_cast<const nlmsghdr *>(data); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (end && (h->nlmsg_flags & NLM_F_DUMP_INTR))
      end->interrupted = true;
    if (h->nlmsg_type == NLMSG_DONE) {
      if (end)
        end->done = true;
      break;
    }
    if (h->nlmsg_type == NLMSG_ERROR) {
      if (end && h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
        int err = 0;
        std::memcpy(&err, NLMSG_DATA(h), sizeof(err));
        // Negative errno; 0 acknowledges. INT_MIN has no positive.
        end->error = err < 0 && err != INT_MIN ? -err : err == 0 ? 0 : EPROTO;
      }
      continue;
    }
    if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK)
      continue;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)))
      continue;
    const auto *ifi = static_cast<const ifinfomsg *>(NLMSG_DATA(h));
    LinkEvent e;
    e.kind = h->nlmsg_type == RTM_NEWLINK ? LinkEvent::Kind::New : LinkEvent::Kind::Deleted;
    e.ifindex = static_cast<uint32_t>(ifi->ifi_index);
    int attr_left = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ifinfomsg)));
    for (auto *a = IFLA_RTA(ifi); RTA_OK(a, attr_left); a = RTA_NEXT(a, attr_left)) {
      switch (attr_type(a)) {
      case IFLA_IFNAME:
        e.name = attr_string(a);
        break;
      case IFLA_MASTER:
        e.master = attr_value<uint32_t>(a).value_or(0);
        break;
      case IFLA_LINK:
        e.link = attr_value<uint32_t>(a).value_or(0);
        break;
      case IFLA_LINK_NETNSID:
        e.link_netnsid = attr_value<int32_t>(a);
        break;
      case IFLA_LINKINFO:
        parse_link_info(a, e);
        break;
      default:
        break;
      }
    }
    events.push_back(std::move(e));
  }
  return events;
}

std::vector<LinkEvent> dump_links(int netns_fd) {
  int made = -1;
  int err = 0;
  in_network_namespace(netns_fd, [&] {
    made = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    err = errno;  // errno is the thread's own
  });
  if (made < 0)
    throw std::system_error(err, std::generic_category(), "rtnetlink socket");
  const Fd fd(made);
  // The kernel answers at once; a bound keeps a lookup from ever hanging.
  timeval timeout{2, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  // A dump the links changed under (NLM_F_DUMP_INTR) may miss or repeat one.
  for (uint32_t attempt = 1; attempt <= 4; ++attempt) {
    struct {
      nlmsghdr h;
      ifinfomsg ifi;
    } request{};
    request.h.nlmsg_len = sizeof(request);
    request.h.nlmsg_type = RTM_GETLINK;
    request.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    request.h.nlmsg_seq = attempt;
    request.ifi.ifi_family = AF_UNSPEC;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd.get(), &request, sizeof(request), 0, reinterpret_cast<sockaddr *>(&kernel), sizeof(kernel)) < 0)
      throw std::system_error(errno, std::generic_category(), "rtnetlink link dump request");
    std::vector<LinkEvent> links;
    LinkBatchEnd end;
    // A dump part holds at most 32 KiB (the kernel's skb for it).
    std::vector<nlmsghdr> space(65536 / sizeof(nlmsghdr));
    char *buf = reinterpret_cast<char *>(space.data());
    const size_t buf_size = space.size() * sizeof(nlmsghdr);
    while (!end.done) {
      const ssize_t n = recv(fd.get(), buf, buf_size, MSG_TRUNC);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        throw std::system_error(errno, std::generic_category(), "rtnetlink link dump");
      if (static_cast<size_t>(n) > buf_size)
        throw std::system_error(EMSGSIZE, std::generic_category(), "rtnetlink link dump");
      auto batch = parse_link_messages(buf, static_cast<size_t>(n), &end);
      if (end.error != 0)
        throw std::system_error(end.error, std::generic_category(), "rtnetlink link dump");
      links.insert(links.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    }
    if (!end.interrupted)
      return links;
  }
  throw std::system_error(EAGAIN, std::generic_category(), "rtnetlink link dump interrupted 4 times");
}

int ethtool_socket(int netns_fd) {
  int made = -1;
  int err = 0;
  in_network_namespace(netns_fd, [&] {
    // Any socket reaches the device ioctls; a namespace may lack IPv4.
    made = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (made < 0)
      made = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    err = errno;
  });
  if (made < 0)
    throw std::system_error(err, std::generic_category(), "socket for SIOCETHTOOL");
  return made;
}

std::optional<DriverInfo> driver_info(int ethtool_fd, const std::string &ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ)
    return std::nullopt;
  ethtool_drvinfo drv{};
  drv.cmd = ETHTOOL_GDRVINFO;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  ifr.ifr_data = reinterpret_cast<char *>(&drv);
  if (ioctl(ethtool_fd, SIOCETHTOOL, &ifr) != 0)
    return std::nullopt;  // lo, or a driver without ethtool: no device to find
  DriverInfo info;
  info.driver.assign(drv.driver, strnlen(drv.driver, sizeof(drv.driver)));
  info.bus_info.assign(drv.bus_info, strnlen(drv.bus_info, sizeof(drv.bus_info)));
  return info;
}

std::string netns_path(const std::string &spec) {
  if (spec.find('/') != std::string::npos)
    return spec;
  if (!spec.empty() && std::all_of(spec.begin(), spec.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "/proc/" + spec + "/ns/net";
  return "/run/netns/" + spec;
}

void in_network_namespace(int netns_fd, const std::function<void()> &fn) {
  if (netns_fd < 0) {
    fn();
    return;
  }
  // A thread of its own: setns() changes the calling thread only, and the
  // daemon's own threads stay where they are.
  std::exception_ptr failed;
  std::thread t([&] {
    try {
      if (setns(netns_fd, CLONE_NEWNET) != 0)
        throw std::system_error(errno, std::generic_category(), "setns into the network namespace");
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  t.join();
  if (failed)
    std::rethrow_exception(failed);
}

std::vector<std::pair<uint32_t, std::string>> interface_names(int netns_fd) {
  std::vector<std::pair<uint32_t, std::string>> links;
  in_network_namespace(netns_fd, [&] {
    if (struct if_nameindex *all = if_nameindex()) {
      for (auto *i = all; i->if_index != 0; ++i)
        links.emplace_back(i->if_index, i->if_name);
      if_freenameindex(all);
    }
  });
  std::sort(links.begin(), links.end());
  return links;
}

LinkMonitor::LinkMonitor(int netns_fd) {
  int socket_err = 0;
  in_network_namespace(netns_fd, [&] {
    fd_ = Fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
    socket_err = errno;  // errno is the thread's own: the namespace's thread, not ours
  });
  if (fd_.get() < 0)
    throw std::system_error(socket_err, std::generic_category(), "rtnetlink socket");
  // Room for a burst (many veths created at once) before the kernel drops
  // notifications; if it still does, read_events() reports it.
  int bytes = 1 << 20;
  setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = RTMGRP_LINK;
  if (bind(fd_.get(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0)
    throw std::system_error(errno, std::generic_category(), "rtnetlink bind to RTMGRP_LINK");
}

std::vector<LinkEvent> LinkMonitor::read_events(bool &lost) {
  std::vector<LinkEvent> events;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    sockaddr_nl from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd_.get(), buf, sizeof(buf), 0, reinterpret_cast<sockaddr *>(&from), &from_len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == ENOBUFS) {
        lost = true;
        continue;
      }
      break;  // EAGAIN: nothing more
    }
    // Only the kernel (port id 0) speaks for the links; anything else on
    // this socket would be another process's message.
    if (from.nl_pid != 0)
      continue;
    auto batch = parse_link_messages(buf, static_cast<size_t>(n));
    events.insert(events.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
  }
  return events;
}

int open_netns(const std::string &spec) {
  if (spec.empty())
    return -1;
  const std::string path = netns_path(spec);
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    throw Error(ExitCode::NoInterface,
                "no network namespace '" + spec + "' (" + path + ": " + std::strerror(errno) + ")");
  // The kernel says what namespace a file is (4.11+); a regular file or
  // another kind of namespace is refused here, not at setns().
  if (ioctl(fd.get(), NS_GET_NSTYPE) != CLONE_NEWNET)
    throw Error(ExitCode::NoInterface, "'" + path + "' is not a network namespace");
  return fd.release();
}

uint32_t netns_inode(int fd) {
  if (fd < 0)
    return current_netns_inode();
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<uint32_t>(st.st_ino) : 0;
}

// The kernel's own rule for a device name (dev_valid_name): 1 to 15 bytes,
// not "." or "..", no '/', ':' or white space. Anything else names no
// interface, and would be a path outside /sys/class/net.
bool valid_interface_name(const std::string &name) {
  if (name.empty() || name.size() >= 16 || name == "." || name == "..")
    return false;
  for (unsigned char c : name)
    if (c == '/' || c == ':' || c <= ' ' || c == 0x7f)
      return false;
  return true;
}

bool is_iface_set_word(const std::string &word) { return word == "all" || word == "irq"; }

bool traces_several_ifaces(const std::vector<std::string> &ifaces) {
  return ifaces.size() > 1 || (ifaces.size() == 1 && is_iface_set_word(ifaces[0]));
}

}  // namespace netlatd
