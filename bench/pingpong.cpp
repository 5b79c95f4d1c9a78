// UDP ping-pong for bench/: the client sends one datagram, the server echoes it,
// the client times each round trip with CLOCK_MONOTONIC and prints one JSON line.
//
//   nlbench-pingpong server --bind 127.0.0.1:47001 [--seconds 600]
//   nlbench-pingpong client --to 127.0.0.1:47001 [--bind 127.0.0.1:47002]
//                                 [--count 20000] [--warmup 2000] [--size 64]
//
// Only IPv4 literals are accepted: bench/ sends to loopback or into a namespace
// it created, never to a name that could resolve elsewhere.
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

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "pingpong: error: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: pingpong server --bind IP:PORT [--seconds S]\n"
               "       pingpong client --to IP:PORT [--bind IP:PORT] [--count N] [--warmup N] "
               "[--size BYTES] [--timeout-ms MS]\n");
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

void set_timeout(int fd, long ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) die("SO_RCVTIMEO");
}

int make_socket(const sockaddr_in* bind_to) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind_to && bind(fd, reinterpret_cast<const sockaddr*>(bind_to), sizeof *bind_to) != 0)
    die("bind");
  return fd;
}

// The server exits on its own after --seconds so a crashed harness never leaves it behind.
int run_server(const sockaddr_in& bind_to, long seconds) {
  int fd = make_socket(&bind_to);
  set_timeout(fd, 200);
  std::printf("{\"ready\":true}\n");
  std::fflush(stdout);
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(seconds) * 1000000000ull;
  char buf[65536];
  uint64_t echoed = 0;
  while (now_ns() < deadline) {
    sockaddr_in peer{};
    socklen_t plen = sizeof peer;
    ssize_t n = recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&peer), &plen);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      die("recvfrom");
    }
    if (sendto(fd, buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&peer), plen) < 0)
      die("sendto");
    ++echoed;
  }
  std::printf("{\"echoed\":%llu}\n", static_cast<unsigned long long>(echoed));
  return 0;
}

int run_client(const sockaddr_in& to, const sockaddr_in* bind_to, long count, long warmup,
               size_t size, long timeout_ms) {
  int fd = make_socket(bind_to);
  set_timeout(fd, timeout_ms);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) die("connect");
  std::vector<char> out(std::max<size_t>(size, 8)), in(65536);
  std::vector<uint64_t> rtt;
  rtt.reserve(static_cast<size_t>(count));
  long lost = 0;
  uint64_t seq = 0;
  for (long i = 0; i < warmup + count; ++i) {
    ++seq;
    std::memcpy(out.data(), &seq, sizeof seq);
    const uint64_t t0 = now_ns();
    if (send(fd, out.data(), out.size(), 0) < 0) die("send");
    // A lost datagram (or a stale echo of one we gave up on) must not be
    // counted as a round trip: match the sequence number.
    for (;;) {
      ssize_t n = recv(fd, in.data(), in.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) { ++lost; break; }
        die("recv");
      }
      uint64_t got = 0;
      if (n >= 8) std::memcpy(&got, in.data(), sizeof got);
      if (got != seq) continue;
      const uint64_t t1 = now_ns();
      if (i >= warmup) rtt.push_back(t1 - t0);
      break;
    }
  }
  if (rtt.empty()) {
    std::fprintf(stderr, "pingpong: error: no round trip completed (%ld lost)\n", lost);
    return 2;
  }
  std::vector<uint64_t> sorted = rtt;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) {
    size_t idx = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(idx, sorted.size() - 1)];
  };
  long double sum = 0;
  for (auto v : sorted) sum += static_cast<long double>(v);
  std::printf("{\"count\":%zu,\"lost\":%ld,\"size\":%zu,\"p50_ns\":%llu,\"p90_ns\":%llu,"
              "\"p99_ns\":%llu,\"min_ns\":%llu,\"max_ns\":%llu,\"mean_ns\":%.1Lf}\n",
              sorted.size(), lost, out.size(), static_cast<unsigned long long>(pct(0.50)),
              static_cast<unsigned long long>(pct(0.90)), static_cast<unsigned long long>(pct(0.99)),
              static_cast<unsigned long long>(sorted.front()),
              static_cast<unsigned long long>(sorted.back()),
              sum / static_cast<long double>(sorted.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const std::string_view mode = argv[1];
  std::string to, bind_to;
  long seconds = 600, count = 20000, warmup = 2000, timeout_ms = 200;
  size_t size = 64;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (a == "--to") to = v;
    else if (a == "--bind") bind_to = v;
    else if (a == "--seconds") seconds = std::atol(v);
    else if (a == "--count") count = std::atol(v);
    else if (a == "--warmup") warmup = std::atol(v);
    else if (a == "--size") size = static_cast<size_t>(std::atol(v));
    else if (a == "--timeout-ms") timeout_ms = std::atol(v);
    else usage();
  }
  if (mode == "server") {
    if (bind_to.empty()) usage();
    return run_server(parse_addr(bind_to), seconds);
  }
  if (mode == "client") {
    if (to.empty() || count <= 0) usage();
    sockaddr_in b{};
    if (!bind_to.empty()) b = parse_addr(bind_to);
    return run_client(parse_addr(to), bind_to.empty() ? nullptr : &b, count, warmup, size,
                      timeout_ms);
  }
  usage();
}
