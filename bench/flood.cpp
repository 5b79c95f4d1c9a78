// UDP flood for bench/: a bounded sender (sendmmsg) and a counting receiver (recvmmsg).
//
//   nlbench-flood recv --bind 10.201.3.1:47100 [--seconds 30] [--idle-ms 300]
//   nlbench-flood send --to 10.201.3.1:47100 --seconds 3 [--rate PPS] [--max-packets N]
//                            [--size 64]
//
// The sender stops at whichever comes first of --seconds and --max-packets; --rate 0
// sends as fast as it can. The receiver times from its first to its last datagram and
// stops after --idle-ms of silence or --seconds in all. Each prints one JSON line.
// IPv4 literals only: traffic goes to loopback or a namespace the bench created.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr unsigned kBatch = 64;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "flood: error: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: flood recv --bind IP:PORT [--seconds S] [--idle-ms MS]\n"
               "       flood send --to IP:PORT --seconds S [--rate PPS] [--max-packets N] "
               "[--size BYTES]\n");
  std::exit(64);
}

sockaddr_in parse_addr(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) usage();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) != 1) usage();
  a.sin_port = htons(static_cast<uint16_t>(std::stoul(s.substr(colon + 1))));
  return a;
}

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int run_recv(const sockaddr_in& bind_to, double seconds, long idle_ms) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  // A deep queue so a short scheduling hiccup of the receiver is not counted
  // as lost receive capacity.
  int rcvbuf = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&bind_to), sizeof bind_to) != 0) die("bind");
  timeval tv{0, 50 * 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) die("SO_RCVTIMEO");
  std::printf("{\"ready\":true}\n");
  std::fflush(stdout);

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
  }
  const double span = received > 1 ? static_cast<double>(last - first) / 1e9 : 0.0;
  std::printf("{\"received\":%llu,\"calls\":%llu,\"seconds\":%.6f,\"pps\":%.1f}\n",
              static_cast<unsigned long long>(received), static_cast<unsigned long long>(calls),
              span, span > 0 ? static_cast<double>(received) / span : 0.0);
  return 0;
}

int run_send(const sockaddr_in& to, double seconds, double rate, uint64_t max_packets,
             size_t size) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) die("connect");
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
  if (argc < 2) usage();
  const std::string_view mode = argv[1];
  std::string to, bind_to;
  double seconds = 3, rate = 0;
  long idle_ms = 300;
  uint64_t max_packets = 50'000'000;
  size_t size = 64;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (a == "--to") to = v;
    else if (a == "--bind") bind_to = v;
    else if (a == "--seconds") seconds = std::atof(v);
    else if (a == "--rate") rate = std::atof(v);
    else if (a == "--max-packets") max_packets = std::strtoull(v, nullptr, 10);
    else if (a == "--idle-ms") idle_ms = std::atol(v);
    else if (a == "--size") size = static_cast<size_t>(std::atol(v));
    else usage();
  }
  if (seconds <= 0 || seconds > 600) usage();
  if (mode == "recv" && !bind_to.empty()) return run_recv(parse_addr(bind_to), seconds, idle_ms);
  if (mode == "send" && !to.empty()) return run_send(parse_addr(to), seconds, rate, max_packets, size);
  usage();
}
