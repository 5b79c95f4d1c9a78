#pragma once
// Real network plumbing for the root-only tiers: a veth pair between two
// network namespaces the test creates (and always removes), and real UDP/TCP
// senders and readers. Traffic stays on 127.0.0.0/8 or inside those namespaces.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace nltest {

// Empty when root tests can run here; otherwise why not (for SKIP).
std::string why_no_root_tier();

// In a Catch2 test: SKIP with that reason unless root tests can run here.
#define SKIP_UNLESS_ROOT()                                                                                             \
  do {                                                                                                                 \
    if (auto why = ::nltest::why_no_root_tier(); !why.empty())                                                         \
      SKIP(why);                                                                                                       \
  } while (0)

// Runs a shell command; returns its exit status. Output goes to the test log.
int sh(const std::string &cmd);
std::string sh_output(const std::string &cmd);

// Two namespaces ("rx" and "tx" sides) joined by a veth pair:
//   rx namespace: interface `rx_if`, address rx_addr (10.213.N.1/30, fd00:213:N::1/64)
//   tx namespace: interface `tx_if`, address tx_addr (10.213.N.2/30, fd00:213:N::2/64)
class VethNamespaces {
public:
  VethNamespaces();
  ~VethNamespaces();
  VethNamespaces(const VethNamespaces &) = delete;
  VethNamespaces &operator=(const VethNamespaces &) = delete;

  std::string rx_ns, tx_ns, rx_if, tx_if;
  std::string rx_addr, tx_addr, rx_addr6, tx_addr6;
  uint32_t rx_ifindex() const;     // ifindex of rx_if inside rx_ns
  uint32_t rx_netns_inode() const; // inode of rx_ns
  // Deletes and re-creates the pair (new ifindex), same names and addresses.
  void recreate();
  // Both ends' MTU (jumbo frames: datagrams of up to mtu - 48 bytes unfragmented).
  void set_mtu(int mtu);

private:
  std::string pair_cmds() const;
  void create();
  void destroy();
  int n_;
};

// Runs fn on a thread that has joined the named namespace ("" = current).
void in_netns(const std::string &ns, const std::function<void()> &fn);

struct Received {
  uint64_t count = 0;
  uint64_t bytes = 0;
  // For UDP with SO_TIMESTAMPNS: kernel receive stamp -> recvmsg() returned, in ns.
  std::vector<int64_t> kernel_to_user_ns;
  // UDP: the length of each datagram, in the order the reads returned them.
  std::vector<uint32_t> lengths;
};

// A real reader: blocking recvmsg()/recv() on its own thread, in a namespace.
class Reader {
public:
  // proto "udp" or "tcp"; family 4 or 6; bind address (or "" for any).
  Reader(std::string ns, std::string proto, int family, std::string addr, uint16_t port, bool timestamps = false);
  ~Reader();
  // Waits until `count` datagrams (UDP) or bytes (TCP) arrived or timeout_ms passed.
  bool wait_for(uint64_t count, int timeout_ms);
  Received result();
  // A slow application: sleep this long after each datagram read, so that
  // datagrams wait in the socket queue. Set before the traffic starts.
  void pause_after_each(int us) { pause_us_ = us; }

private:
  std::atomic<bool> stop_{false}, ready_{false};
  std::atomic<int> pause_us_{0};
  std::thread thread_;
  Received got_;
  std::atomic<uint64_t> count_{0}, bytes_{0};
};

// Sends n UDP datagrams of `size` bytes, gap_us apart, from a namespace.
void send_udp(const std::string &ns, int family, const std::string &addr, uint16_t port, int n, int size, int gap_us);
// Sends n writes of `size` bytes over one TCP connection, gap_us apart.
void send_tcp(const std::string &ns, int family, const std::string &addr, uint16_t port, int n, int size, int gap_us);

}  // namespace nltest
