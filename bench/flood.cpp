// UDP flood for bench/: a bounded sender (sendmmsg) and a counting receiver (recvmmsg).
//
//   nlbench-flood recv --bind 10.201.3.1:47100 [--seconds 30] [--idle-ms 300] [--pause-us 0]
//   nlbench-flood send --to 10.201.3.1:47100 --seconds 3 [--rate PPS] [--max-packets N]
//                            [--size 64]
//
// The sender stops at whichever comes first of --seconds and --max-packets; --rate 0
// sends as fast as it can. The receiver times from its first to its last datagram and
// stops after --idle-ms of silence or --seconds in all; --pause-us makes it a slow reader
// (a sleep after each call of up to 64 datagrams), so datagrams queue unread on its
// 16 MiB buffer. Each prints one JSON line.
// IPv4 literals only: traffic goes to loopback or a namespace the bench created.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <vector>

#include "nlbench.hpp"

namespace {

using nlbench::die;
using nlbench::now_ns;

constexpr unsigned kBatch = 64;

constexpr const char* kUsage =
    "usage: nlbench-flood recv --bind IP:PORT [--seconds S] [--idle-ms MS] [--pause-us US]\n"
    "       nlbench-flood send --to IP:PORT --seconds S [--rate PPS] [--max-packets N] "
    "[--size BYTES]\n";

int run_recv(const sockaddr_in& bind_to, double seconds, long idle_ms, long pause_us) {
  // A deep queue so a short scheduling hiccup of the receiver is not counted
  // as lost receive capacity.
  const int fd =
      nlbench::udp_socket({.bind_to = &bind_to, .recv_timeout_ms = 50, .rcvbuf_bytes = 16 << 20});
  nlbench::say_ready();

  std::vector<char> bufs(kBatch * 2048);
  mmsghdr msgs[kBatch]{};
  iovec iov[kBatch]{};
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {bufs.data() + i * 2048, 2048};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const uint64_t start = now_ns();
  const uint64_t deadline = start + static_cast<uint64_t>(seconds * 1e9);
  uint64_t first = 0, last = 0, received = 0, calls = 0;
  for (;;) {
    const uint64_t t = now_ns();
    if (t >= deadline) break;
    if (received > 0 && t - last > static_cast<uint64_t>(idle_ms) * 1000000ull) break;
    int n = recvmmsg(fd, msgs, kBatch, MSG_WAITFORONE, nullptr);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      die("recvmmsg");
    }
    const uint64_t t1 = now_ns();
    if (received == 0) first = t1;
    last = t1;
    received += static_cast<uint64_t>(n);
    ++calls;
    if (pause_us > 0) {
      const timespec pause{pause_us / 1000000, pause_us % 1000000 * 1000};
      nanosleep(&pause, nullptr);
    }
  }
  const double span = received > 1 ? static_cast<double>(last - first) / 1e9 : 0.0;
  std::printf("{\"received\":%llu,\"calls\":%llu,\"seconds\":%.6f,\"pps\":%.1f}\n",
              static_cast<unsigned long long>(received), static_cast<unsigned long long>(calls),
              span, span > 0 ? static_cast<double>(received) / span : 0.0);
  return 0;
}

int run_send(const sockaddr_in& to, double seconds, double rate, uint64_t max_packets,
             size_t size) {
  const int fd = nlbench::udp_socket({.connect_to = &to});
  std::vector<char> payload(std::max<size_t>(size, 1), 'x');
  mmsghdr msgs[kBatch]{};
  iovec iov{payload.data(), payload.size()};
  for (auto& m : msgs) {
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
  }
  const uint64_t start = now_ns();
  const uint64_t deadline = start + static_cast<uint64_t>(seconds * 1e9);
  uint64_t sent = 0, errors = 0;
  // Paced mode: every millisecond, catch up to rate * elapsed. Sleeping on an
  // absolute clock keeps the average exact even when one tick runs late.
  timespec next{};
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (;;) {
    uint64_t t = now_ns();
    if (t >= deadline || sent >= max_packets) break;
    uint64_t want = max_packets;
    if (rate > 0) {
      want = std::min<uint64_t>(max_packets,
                                static_cast<uint64_t>(rate * static_cast<double>(t - start) / 1e9));
    }
    while (sent < want) {
      const unsigned n = static_cast<unsigned>(std::min<uint64_t>(kBatch, want - sent));
      int r = sendmmsg(fd, msgs, n, 0);
      if (r < 0) {
        // ENOBUFS/ECONNREFUSED under overload: count and go on, the receive
        // side is what we measure.
        ++errors;
        if (errors > 1000000) die("sendmmsg");
        break;
      }
      sent += static_cast<uint64_t>(r);
      if (rate <= 0 && now_ns() >= deadline) break;
    }
    if (rate > 0) {
      next.tv_nsec += 1000000;
      if (next.tv_nsec >= 1000000000) { next.tv_nsec -= 1000000000; ++next.tv_sec; }
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
    }
  }
  const double span = static_cast<double>(now_ns() - start) / 1e9;
  std::printf("{\"sent\":%llu,\"errors\":%llu,\"seconds\":%.6f,\"pps\":%.1f}\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(errors),
              span, span > 0 ? static_cast<double>(sent) / span : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nlbench::tool_name = "nlbench-flood";
  if (argc < 2) nlbench::usage(kUsage);
  const std::string_view mode = argv[1];
  std::optional<sockaddr_in> to, bind_to;
  double seconds = 3, rate = 0;
  long idle_ms = 300, pause_us = 0;
  uint64_t max_packets = 50'000'000;
  size_t size = 64;
  nlbench::for_each_flag(argc, argv, 2, kUsage, [&](std::string_view flag, std::string_view v) {
    using nlbench::assign, nlbench::parse_number;
    if (flag == "--to") return assign(to, nlbench::parse_ipv4(v));
    if (flag == "--bind") return assign(bind_to, nlbench::parse_ipv4(v));
    if (flag == "--seconds") return assign(seconds, parse_number<double>(v, 0.001, 600));
    if (flag == "--rate") return assign(rate, parse_number<double>(v, 0, 1e9));
    if (flag == "--max-packets") return assign(max_packets, parse_number<uint64_t>(v, 1, 1ull << 40));
    if (flag == "--idle-ms") return assign(idle_ms, parse_number<long>(v, 1, 600'000));
    if (flag == "--pause-us") return assign(pause_us, parse_number<long>(v, 0, 1'000'000));
    if (flag == "--size") return assign(size, parse_number<size_t>(v, 1, 65507));
    return false;
  });
  if (mode == "recv" && bind_to) return run_recv(*bind_to, seconds, idle_ms, pause_us);
  if (mode == "send" && to) return run_send(*to, seconds, rate, max_packets, size);
  nlbench::usage(kUsage);
}
