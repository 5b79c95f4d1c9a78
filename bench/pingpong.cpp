// UDP ping-pong for bench/: the client sends one datagram, the server echoes it,
// the client times each round trip with CLOCK_MONOTONIC and prints one JSON line.
//
//   nlbench-pingpong server --bind 127.0.0.1:47001 [--seconds 600]
//   nlbench-pingpong client --to 127.0.0.1:47001 [--bind 127.0.0.1:47002]
//                                 [--count 20000] [--warmup 2000] [--size 64]
//
// Only IPv4 literals are accepted (see nlbench.hpp).
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "nlbench.hpp"

namespace {

using nlbench::die;
using nlbench::now_ns;

constexpr const char* kUsage =
    "usage: nlbench-pingpong server --bind IP:PORT [--seconds S]\n"
    "       nlbench-pingpong client --to IP:PORT [--bind IP:PORT] [--count N] [--warmup N] "
    "[--size BYTES] [--timeout-ms MS]\n";

// The server exits on its own after --seconds so a crashed harness never leaves it behind.
int run_server(const sockaddr_in& bind_to, long seconds) {
  const int fd = nlbench::udp_socket({.bind_to = &bind_to, .recv_timeout_ms = 200, .reuse_addr = true});
  nlbench::say_ready();
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
  const int fd = nlbench::udp_socket(
      {.bind_to = bind_to, .connect_to = &to, .recv_timeout_ms = timeout_ms, .reuse_addr = true});
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
    std::fprintf(stderr, "nlbench-pingpong: error: no round trip completed (%ld lost)\n", lost);
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
  nlbench::tool_name = "nlbench-pingpong";
  if (argc < 2) nlbench::usage(kUsage);
  const std::string_view mode = argv[1];
  std::optional<sockaddr_in> to, bind_to;
  long seconds = 600, count = 20000, warmup = 2000, timeout_ms = 200;
  size_t size = 64;
  nlbench::for_each_flag(argc, argv, 2, kUsage, [&](std::string_view flag, std::string_view v) {
    using nlbench::assign, nlbench::parse_number;
    if (flag == "--to") return assign(to, nlbench::parse_ipv4(v));
    if (flag == "--bind") return assign(bind_to, nlbench::parse_ipv4(v));
    if (flag == "--seconds") return assign(seconds, parse_number<long>(v, 1, 86400));
    if (flag == "--count") return assign(count, parse_number<long>(v, 1, 100'000'000));
    if (flag == "--warmup") return assign(warmup, parse_number<long>(v, 0, 100'000'000));
    if (flag == "--size") return assign(size, parse_number<size_t>(v, 1, 65507));
    if (flag == "--timeout-ms") return assign(timeout_ms, parse_number<long>(v, 1, 600'000));
    return false;
  });
  if (mode == "server" && bind_to) return run_server(*bind_to, seconds);
  if (mode == "client" && to)
    return run_client(*to, bind_to ? &*bind_to : nullptr, count, warmup, size, timeout_ms);
  nlbench::usage(kUsage);
}
