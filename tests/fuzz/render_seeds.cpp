// Writes the render harness's seed corpus: ring records shaped like the ones
// the kernel side writes, and odd ones it should never write. Run again when
// the ring's records (struct netlatd_wire_packet, netlatd_wire_reader)
// change:
//   build-fuzz/tests/fuzz/fuzz_render_seeds tests/fuzz/corpus/render
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "netlatd/decode/record.hpp"

namespace {

constexpr uint8_t kUdp = 17, kTcp = 6;

// Every stamp from `first` on, `step` ns apart, from a host up 1000 s.
netlatd_packet packet(unsigned first, uint64_t step, uint8_t proto, uint16_t flags, const char *comm) {
  netlatd_packet p{};
  uint64_t t = 1'000'000'000'000;
  for (unsigned i = first; i < NETLATD_STAMP_SYSCALL_EXIT; ++i, t += step)
    p.stamp_ns[i] = t;
  p.l4proto = proto;
  p.flags = flags;
  p.dport = 5000;
  p.sport = 40000;
  p.len = 64;
  p.iface_id = 1;
  p.rx_cpu = 1;
  p.reader_cpu = 1;
  p.reader_tgid = 4242;
  p.reader_tid = 4243;
  std::strncpy(p.reader_comm, comm, sizeof p.reader_comm);
  return p;
}

struct Ring {
  std::string bytes;
  void reader(const netlatd_wire_reader &r) {
    bytes += '\x01';
    bytes.append(reinterpret_cast<const char *>(&r), sizeof r);
  }
  void wire(const netlatd_wire_packet &w) {
    bytes += '\x00';
    bytes.append(reinterpret_cast<const char *>(&w), sizeof w);
  }
  // A packet as the kernel side writes it: its reader named first.
  void packet(const netlatd_packet &p) {
    const auto w = netlatd::encode_packet(p);
    if (!w) {
      std::fprintf(stderr, "fuzz_render_seeds: a seed the kernel side could not write\n");
      std::exit(1);
    }
    if (p.stamp_ns[NETLATD_STAMP_RECV_RETURN])
      reader(netlatd::encode_reader(p));
    wire(*w);
  }
};

void write(const std::string &dir, const char *name, const Ring &ring, const std::string &iface) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out << ring.bytes << iface;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    return 64;
  const std::string dir = argv[1];
  netlatd_packet lo = packet(NETLATD_STAMP_SOFTIRQ_RAISE, 1500, kUdp, NETLATD_PKT_IN_SOFTIRQ, "server");
  lo.stamp_ns[NETLATD_STAMP_COPY] = 0;  // a linear UDP datagram is copied without the tracepoint
  lo.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
  netlatd_packet nic = packet(NETLATD_STAMP_IRQ, 40'000, kTcp,
                              NETLATD_PKT_IPV6 | NETLATD_PKT_TCP | NETLATD_PKT_WOKEN | NETLATD_PKT_KSOFTIRQD, "nginx");
  // The reader's stamps run from its call's start, before the packet came.
  nic.stamp_ns[NETLATD_STAMP_CALL_START] = 999'000'000'000;
  nic.stamp_ns[NETLATD_STAMP_SWITCH_IN] = nic.stamp_ns[NETLATD_STAMP_WAKEUP] + 5'000;
  nic.iface_id = NETLATD_MAX_IFACES;
  netlatd_packet ambiguous = lo;
  for (netlatd_stamp s : {NETLATD_STAMP_WAKEUP, NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START, NETLATD_STAMP_COPY,
                          NETLATD_STAMP_RECV_RETURN})
    ambiguous.stamp_ns[s] = 0;
  ambiguous.reader_unknown = NETLATD_READER_AMBIGUOUS;
  ambiguous.reader_tgid = ambiguous.reader_tid = ambiguous.reader_cpu = 0;
  std::memset(ambiguous.reader_comm, 0, sizeof ambiguous.reader_comm);

  Ring udp_lo, tcp_nic, reversed, zeros, huge, unnamed, mixed;
  udp_lo.packet(lo);
  tcp_nic.packet(nic);
  // The reader's stamps after its return, the packet's before its base.
  netlatd_wire_packet rev = *netlatd::encode_packet(nic);
  for (__u32 &b : rev.reader_before)
    b = UINT32_MAX;
  rev.recv_return_ns = 1;
  reversed.reader(netlatd::encode_reader(nic));
  reversed.wire(rev);
  zeros.wire(netlatd_wire_packet{});
  zeros.reader(netlatd_wire_reader{});
  netlatd_wire_packet all_ones;
  std::memset(&all_ones, 0xff, sizeof all_ones);
  netlatd_wire_reader odd_reader;
  std::memset(&odd_reader, 0xff, sizeof odd_reader);
  std::memcpy(odd_reader.comm, "\xff\xc3(\x1b[2J", 8);
  huge.reader(odd_reader);
  huge.wire(all_ones);
  // A packet naming a reader the ring never named.
  unnamed.wire(*netlatd::encode_packet(lo));
  for (const Ring *r : {&udp_lo, &tcp_nic, &reversed, &zeros, &huge, &unnamed, &udp_lo, &udp_lo, &tcp_nic})
    mixed.bytes += r->bytes;
  mixed.packet(ambiguous);

  write(dir, "udp-lo", udp_lo, "");
  write(dir, "tcp-ipv6-nic", tcp_nic, "eth0");
  write(dir, "out-of-order", reversed, "eth0");
  write(dir, "zeros", zeros, "");
  write(dir, "huge", huge, "\xff\xfe" "eth\n0\"\\");
  write(dir, "unnamed-reader", unnamed, "");
  write(dir, "mixed", mixed, "veth-a");
  return 0;
}
