// Writes the render harness's seed corpus: records shaped like the ones the
// kernel side emits, and the odd ones it should never emit. Run again when
// struct netlatd_packet changes:
//   build-fuzz/tests/fuzz/fuzz_render_seeds tests/fuzz/corpus/render
#include <linux/types.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "netlatd/abi.h"

namespace {

constexpr uint8_t kUdp = 17, kTcp = 6;

// Every stamp from `first` on, `step` ns apart, from a host up 1000 s.
netlatd_packet packet(unsigned first, uint64_t step, uint8_t proto, uint16_t flags, const char *comm) {
  netlatd_packet p{};
  uint64_t t = 1'000'000'000'000;
  for (unsigned i = first; i < NETLATD_STAMP_COUNT; ++i, t += step)
    p.stamp_ns[i] = t;
  p.l4proto = proto;
  p.flags = flags;
  p.dport = 5000;
  p.len = 64;
  p.iface_id = 1;
  std::strncpy(p.reader_comm, comm, sizeof p.reader_comm);
  return p;
}

void write(const std::string &dir, const char *name, const std::vector<netlatd_packet> &records,
           const std::string &iface) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char *>(records.data()),
            static_cast<std::streamsize>(records.size() * sizeof(netlatd_packet)));
  out << iface;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    return 64;
  const std::string dir = argv[1];
  netlatd_packet lo = packet(NETLATD_STAMP_SOFTIRQ_RAISE, 1500, kUdp, NETLATD_PKT_IN_SOFTIRQ, "server");
  lo.stamp_ns[NETLATD_STAMP_COPY] = 0;  // a linear UDP datagram is copied without the tracepoint
  netlatd_packet nic = packet(NETLATD_STAMP_IRQ, 40'000, kTcp,
                              NETLATD_PKT_IPV6 | NETLATD_PKT_TCP | NETLATD_PKT_WOKEN | NETLATD_PKT_KSOFTIRQD, "nginx");
  netlatd_packet reversed = nic;
  std::swap(reversed.stamp_ns[NETLATD_STAMP_RECEIVE_SKB], reversed.stamp_ns[NETLATD_STAMP_RECV_RETURN]);
  netlatd_packet zeros{};
  netlatd_packet huge = packet(NETLATD_STAMP_IRQ, 1, 99, 0xffff, "\xff\xc3(\x1b[2J");
  for (__u64 &t : huge.stamp_ns)
    t += UINT64_MAX - 1'000'000'000'100;
  huge.len = UINT32_MAX;
  huge.dport = UINT16_MAX;

  write(dir, "udp-lo", {lo}, "");
  write(dir, "tcp-ipv6-nic", {nic}, "eth0");
  write(dir, "out-of-order", {reversed}, "eth0");
  write(dir, "zeros", {zeros}, "");
  write(dir, "huge", {huge}, "\xff\xfe" "eth\n0\"\\");
  write(dir, "mixed", {lo, nic, reversed, zeros, huge, lo, lo, nic}, "veth-a");
  return 0;
}
