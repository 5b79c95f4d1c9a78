// What the nlbench-* traffic tools share: flag and address parsing, the clock, and the
// UDP socket set-up. Header-only and plain sockets, so the tools still build (and
// bench/run.sh can compile them by hand) when the project itself does not.
//
// Namespaces are not set up here: bench.py starts a tool inside its namespace with
// `ip netns exec`, so a tool only ever sees one network stack.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

namespace nlbench {

// Set by each tool's main() before anything can fail: prefixes every error line.
inline const char* tool_name = "nlbench";

// A system call failed: one line naming it and errno, exit 1.
[[noreturn]] inline void die(const char* what) {
  std::fprintf(stderr, "%s: error: %s: %s\n", tool_name, what, std::strerror(errno));
  std::exit(1);
}

// Each tool's usage text; printed on any bad flag or value, exit 64 (EX_USAGE).
[[noreturn]] inline void usage(const char* text) {
  std::fprintf(stderr, "%s", text);
  std::exit(64);
}

// A whole decimal number in [lo, hi], or nothing (no silent 0 for "abc" as atol gives).
template <typename T>
std::optional<T> parse_number(std::string_view s, T lo, T hi) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// "A.B.C.D:PORT". IPv4 literals only: bench/ sends to loopback or into a namespace
// it created, never to a name that could resolve elsewhere.
inline std::optional<sockaddr_in> parse_ipv4(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon >= 16) return std::nullopt;
  char host[16]{};
  s.copy(host, colon);
  auto port = parse_number<uint16_t>(s.substr(colon + 1), 1, 65535);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (!port || inet_pton(AF_INET, host, &a.sin_addr) != 1) return std::nullopt;
  a.sin_port = htons(*port);
  return a;
}

inline uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Calls on_flag(name, value) for each "--name value" pair from argv[first]; a flag
// without a value, or one on_flag does not know (returns false), is a usage error.
template <typename OnFlag>
void for_each_flag(int argc, char** argv, int first, const char* usage_text, OnFlag on_flag) {
  for (int i = first; i < argc; i += 2) {
    if (i + 1 >= argc || !on_flag(std::string_view(argv[i]), std::string_view(argv[i + 1])))
      usage(usage_text);
  }
}

// For on_flag above: stores a parsed value; false (a usage error) if it did not parse.
template <typename T, typename U>
bool assign(T& into, const std::optional<U>& parsed) {
  if (!parsed) return false;
  into = *parsed;
  return true;
}

struct UdpSocket {
  const sockaddr_in* bind_to = nullptr;
  const sockaddr_in* connect_to = nullptr;
  long recv_timeout_ms = 0;  // 0: block; otherwise recv fails with EAGAIN after it
  int rcvbuf_bytes = 0;      // 0: the system default
  bool reuse_addr = false;
};

// A UDP/IPv4 socket set up as asked; any failure is fatal (die).
inline int udp_socket(const UdpSocket& o) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  if (o.reuse_addr) {
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("SO_REUSEADDR");
  }
  // SO_RCVBUFFORCE goes past net.core.rmem_max (we are root); fall back if refused.
  if (o.rcvbuf_bytes > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &o.rcvbuf_bytes, sizeof o.rcvbuf_bytes) != 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.rcvbuf_bytes, sizeof o.rcvbuf_bytes) != 0)
    die("SO_RCVBUF");
  if (o.recv_timeout_ms > 0) {
    const timeval tv{o.recv_timeout_ms / 1000, (o.recv_timeout_ms % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) die("SO_RCVTIMEO");
  }
  if (o.bind_to && bind(fd, reinterpret_cast<const sockaddr*>(o.bind_to), sizeof *o.bind_to) != 0)
    die("bind");
  if (o.connect_to &&
      connect(fd, reinterpret_cast<const sockaddr*>(o.connect_to), sizeof *o.connect_to) != 0)
    die("connect");
  return fd;
}

// A child of bench.py says it can take traffic: the one line bench.py waits for.
inline void say_ready() {
  std::printf("{\"ready\":true}\n");
  std::fflush(stdout);
}

}  // namespace nlbench
