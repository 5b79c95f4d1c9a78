#include "netlatd/interface.hpp"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "netlatd/errors.hpp"

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

std::vector<LinkEvent> parse_link_messages(const void *data, size_t len) {
  std::vector<LinkEvent> events;
  // NLMSG_OK/NLMSG_NEXT take an int length; a datagram is far below INT_MAX.
  int left = static_cast<int>(std::min<size_t>(len, 1u << 30));
  for (auto *h = static_cast<const nlmsghdr *>(data); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_type == NLMSG_DONE)
      break;
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
      if (a->rta_type != IFLA_IFNAME)
        continue;
      const char *name = static_cast<const char *>(RTA_DATA(a));
      // The name is NUL-terminated by the kernel; do not trust it to be.
      e.name.assign(name, strnlen(name, RTA_PAYLOAD(a)));
    }
    events.push_back(std::move(e));
  }
  return events;
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
  in_network_namespace(netns_fd, [this] {
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
  });
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "rtnetlink socket");
  // Room for a burst (many veths created at once) before the kernel drops
  // notifications; if it still does, read_events() reports it.
  int bytes = 1 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = RTMGRP_LINK;
  if (bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    throw std::system_error(err, std::generic_category(), "rtnetlink bind to RTMGRP_LINK");
  }
}

LinkMonitor::~LinkMonitor() {
  if (fd_ >= 0)
    close(fd_);
}

std::vector<LinkEvent> LinkMonitor::read_events(bool &lost) {
  std::vector<LinkEvent> events;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    sockaddr_nl from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr *>(&from), &from_len);
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
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ExitCode::NoInterface,
                "no network namespace '" + spec + "' (" + path + ": " + std::strerror(errno) + ")");
  // The kernel says what namespace a file is (4.11+); a regular file or
  // another kind of namespace is refused here, not at setns().
  if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET) {
    close(fd);
    throw Error(ExitCode::NoInterface, "'" + path + "' is not a network namespace");
  }
  return fd;
}

uint32_t netns_inode(int fd) {
  if (fd < 0)
    return current_netns_inode();
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<uint32_t>(st.st_ino) : 0;
}

}  // namespace netlatd
