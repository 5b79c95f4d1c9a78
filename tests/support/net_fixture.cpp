#include "net_fixture.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace nltest {
namespace {

std::atomic<int> g_counter{0};

std::string hex2(int v) {
  char b[3];
  std::snprintf(b, sizeof b, "%02x", v & 0xff);
  return b;
}

int64_t now_realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

void fill_addr(int family, const std::string &addr, uint16_t port, sockaddr_storage &ss, socklen_t &len) {
  std::memset(&ss, 0, sizeof(ss));
  if (family == 6) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    if (addr.empty())
      a->sin6_addr = in6addr_any;
    else
      inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto *a = reinterpret_cast<sockaddr_in *>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = addr.empty() ? htonl(INADDR_ANY) : inet_addr(addr.c_str());
    len = sizeof(*a);
  }
}

}  // namespace

std::string why_no_root_tier() {
  if (geteuid() != 0)
    return "needs root (loads BPF programs, creates network namespaces)";
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return "kernel has no BTF (/sys/kernel/btf/vmlinux)";
  if (sh("command -v ip >/dev/null") != 0)
    return "iproute2 'ip' is not installed";
  return "";
}

int sh(const std::string &cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string sh_output(const std::string &cmd) {
  std::string out;
  FILE *f = popen(cmd.c_str(), "r");
  if (!f)
    return out;
  char buf[512];
  while (fgets(buf, sizeof(buf), f))
    out += buf;
  pclose(f);
  return out;
}

VethNamespaces::VethNamespaces() : n_(static_cast<int>(getpid() % 200) + g_counter.fetch_add(1) % 50) {
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(g_counter.load());
  rx_ns = "nltest-rx-" + tag;
  tx_ns = "nltest-tx-" + tag;
  rx_if = "nlrx" + std::to_string(getpid() % 100000);
  tx_if = "nltx" + std::to_string(getpid() % 100000);
  const std::string net = std::to_string(n_ % 250);
  rx_addr = "10.213." + net + ".1";
  tx_addr = "10.213." + net + ".2";
  rx_addr6 = "fd00:213:" + net + "::1";
  tx_addr6 = "fd00:213:" + net + "::2";
  create();
}

VethNamespaces::~VethNamespaces() { destroy(); }

// The pair with its addresses, and each end's neighbour entries for the
// other's made permanent: no datagram of a test waits on ARP or neighbour
// discovery, whose queue holds only ~166 datagrams (unres_qlen_bytes) and
// drops the rest when a host too busy to answer it meets a burst.
std::string VethNamespaces::pair_cmds() const {
  const std::string rx_mac = "02:13:00:00:" + hex2(n_ % 250) + ":01", tx_mac = "02:13:00:00:" + hex2(n_ % 250) + ":02";
  return "ip link add " + rx_if + " address " + rx_mac + " netns " + rx_ns + " type veth peer name " + tx_if +
         " address " + tx_mac + " netns " + tx_ns +
         "; ip -n " + rx_ns + " addr add " + rx_addr + "/30 dev " + rx_if +
         "; ip -n " + tx_ns + " addr add " + tx_addr + "/30 dev " + tx_if +
         "; ip -n " + rx_ns + " addr add " + rx_addr6 + "/64 dev " + rx_if + " nodad" +
         "; ip -n " + tx_ns + " addr add " + tx_addr6 + "/64 dev " + tx_if + " nodad" +
         "; ip -n " + tx_ns + " neigh replace " + rx_addr + " lladdr " + rx_mac + " dev " + tx_if + " nud permanent" +
         "; ip -n " + tx_ns + " neigh replace " + rx_addr6 + " lladdr " + rx_mac + " dev " + tx_if + " nud permanent" +
         "; ip -n " + rx_ns + " neigh replace " + tx_addr + " lladdr " + tx_mac + " dev " + rx_if + " nud permanent" +
         "; ip -n " + rx_ns + " neigh replace " + tx_addr6 + " lladdr " + tx_mac + " dev " + rx_if + " nud permanent" +
         "; ip -n " + rx_ns + " link set " + rx_if + " up; ip -n " + tx_ns + " link set " + tx_if + " up";
}

void VethNamespaces::create() {
  const std::string cmds = "set -e; ip netns add " + rx_ns + "; ip netns add " + tx_ns + "; ip -n " + rx_ns +
                           " link set lo up; ip -n " + tx_ns + " link set lo up; " + pair_cmds();
  if (sh(cmds) != 0) {
    destroy();
    throw std::runtime_error("cannot create veth namespaces");
  }
}

void VethNamespaces::destroy() {
  sh("ip netns del " + rx_ns + " 2>/dev/null; ip netns del " + tx_ns + " 2>/dev/null; true");
}

void VethNamespaces::recreate() {
  sh("ip -n " + rx_ns + " link del " + rx_if + " 2>/dev/null; true");
  sh("ip netns del " + tx_ns + " 2>/dev/null; ip netns add " + tx_ns);
  const std::string cmds = "set -e; ip -n " + tx_ns + " link set lo up; " + pair_cmds();
  if (sh(cmds) != 0)
    throw std::runtime_error("cannot re-create the veth pair");
}

void VethNamespaces::set_mtu(int mtu) {
  const std::string m = std::to_string(mtu);
  if (sh("ip -n " + rx_ns + " link set " + rx_if + " mtu " + m + " && ip -n " + tx_ns + " link set " + tx_if +
         " mtu " + m) != 0)
    throw std::runtime_error("cannot set the veth MTU to " + m);
}

uint32_t VethNamespaces::rx_ifindex() const {
  std::string out = sh_output("ip -n " + rx_ns + " -o link show dev " + rx_if);
  return static_cast<uint32_t>(std::strtoul(out.c_str(), nullptr, 10));
}

uint32_t VethNamespaces::rx_netns_inode() const {
  struct stat st {};
  if (stat(("/run/netns/" + rx_ns).c_str(), &st) != 0)
    return 0;
  return static_cast<uint32_t>(st.st_ino);
}

void in_netns(const std::string &ns, const std::function<void()> &fn) {
  std::exception_ptr err;
  std::thread t([&] {
    try {
      if (!ns.empty()) {
        int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
          throw std::runtime_error("cannot enter netns " + ns);
        close(fd);
      }
      fn();
    } catch (...) {
      err = std::current_exception();
    }
  });
  t.join();
  if (err)
    std::rethrow_exception(err);
}

Reader::Reader(std::string ns, std::string proto, int family, std::string addr, uint16_t port, bool timestamps) {
  thread_ = std::thread([=, this] {
    if (!ns.empty()) {
      int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        ready_ = true;
        return;
      }
      close(fd);
    }
    const bool udp = proto == "udp";
    int s = socket(family == 6 ? AF_INET6 : AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (timestamps)
      setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
    // 16 MiB, as nlreaders sets: with the default (~200 KiB, some 250
    // small datagrams) a reader thread a few ms behind (a sanitizer build, a
    // loaded host) could lose datagrams the tests count on. Root only; ignored
    // without it.
    if (udp) {
      const int rcvbuf = 16 << 20;
      setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
    }
    timeval tv{0, 100000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_storage ss;
    socklen_t len;
    fill_addr(family, addr, port, ss, len);
    if (bind(s, reinterpret_cast<sockaddr *>(&ss), len) != 0) {
      close(s);
      ready_ = true;
      return;
    }
    int conn = -1;
    if (!udp)
      listen(s, 4);
    ready_ = true;
    char buf[65536];
    char cbuf[256];
    while (!stop_) {
      if (!udp && conn < 0) {
        conn = accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn >= 0)
          setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        continue;
      }
      iovec iov{buf, sizeof(buf)};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof(cbuf);
      ssize_t n = recvmsg(udp ? s : conn, &msg, 0);
      int64_t t_user = now_realtime_ns();
      if (n < 0)
        continue;
      if (!udp && n == 0) {
        close(conn);
        conn = -1;
        continue;
      }
      if (udp) {
        for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
            timespec ts;
            std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            got_.kernel_to_user_ns.push_back(t_user - (static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec));
          }
        }
        got_.lengths.push_back(static_cast<uint32_t>(n));
        count_++;
        if (int pause = pause_us_.load())
          std::this_thread::sleep_for(std::chrono::microseconds(pause));
      } else {
        count_ += static_cast<uint64_t>(n);
      }
      bytes_ += static_cast<uint64_t>(n);
    }
    if (conn >= 0)
      close(conn);
    close(s);
  });
  while (!ready_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

Reader::~Reader() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

bool Reader::wait_for(uint64_t count, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (count_.load() < count) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

Received Reader::result() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
  got_.count = count_.load();
  got_.bytes = bytes_.load();
  return got_;
}

void send_udp(const std::string &ns, int family, const std::string &addr, uint16_t port, int n, int size, int gap_us) {
  in_netns(ns, [&] {
    int s = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss;
    socklen_t len;
    fill_addr(family, addr, port, ss, len);
    std::vector<char> payload(static_cast<size_t>(size), 'x');
    for (int i = 0; i < n; i++) {
      sendto(s, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr *>(&ss), len);
      if (gap_us)
        std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    close(s);
  });
}

void send_tcp(const std::string &ns, int family, const std::string &addr, uint16_t port, int n, int size, int gap_us) {
  in_netns(ns, [&] {
    int s = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss;
    socklen_t len;
    fill_addr(family, addr, port, ss, len);
    int one = 1;
    setsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
    for (int tries = 0; connect(s, reinterpret_cast<sockaddr *>(&ss), len) != 0 && tries < 50; tries++)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<char> payload(static_cast<size_t>(size), 'y');
    for (int i = 0; i < n; i++) {
      send(s, payload.data(), payload.size(), MSG_NOSIGNAL);
      if (gap_us)
        std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    close(s);
  });
}

}  // namespace nltest
