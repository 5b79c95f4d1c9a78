// The /metrics endpoint: parse_listen_address and MetricsServer, each a real
// HTTP scrape over 127.0.0.1 (and ::1) on an ephemeral port, slow, huge and
// malformed clients included. What it serves is test_metrics.cpp's.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_get.hpp"
#include "metrics_helpers.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/model/snapshot.hpp"

using netlatd::MetricsSnapshot;
using nltest::example_snapshot;

TEST_CASE("parse_listen_address", "[metrics]") {
  using netlatd::parse_listen_address;
  struct Case {
    const char *text, *host;
    int port;
  };
  for (const Case &c : {Case{"127.0.0.1:9464", "127.0.0.1", 9464}, Case{":9100", "127.0.0.1", 9100},
                        Case{"9100", "127.0.0.1", 9100}, Case{"0.0.0.0:0", "0.0.0.0", 0},
                        Case{"[::1]:9464", "::1", 9464},
                        // An address alone: the default port.
                        Case{"127.0.0.1", "127.0.0.1", 9659}, Case{"[::1]", "::1", 9659},
                        Case{"0.0.0.0", "0.0.0.0", 9659}}) {
    INFO(c.text);
    auto a = parse_listen_address(c.text);
    CHECK(a.host == c.host);
    CHECK(a.port == c.port);
  }
  for (const char *bad : {"127.0.0.1:http", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9464",
                          "[::1]9464", "[::1", "1.2.3.4:80x", "", "localhost:9464", "example.org:9464",
                          "[127.0.0.1]:9464", "[]:9464", "300.0.0.1:9464", "[::1]:", "300.1.2.3", "[::1]x",
                          "[]"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_listen_address(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_listen_address("localhost:http"),
                    Catch::Matchers::ContainsSubstring("port 'http' is not a number"));
  // A name is refused: it could resolve to any address, and the endpoint has no authentication.
  CHECK_THROWS_WITH(parse_listen_address("localhost:9464"),
                    Catch::Matchers::ContainsSubstring("'localhost' is not an IPv4 address"));
}

TEST_CASE("MetricsServer serves /metrics over real HTTP", "[metrics]") {
  const MetricsSnapshot snapshot = example_snapshot();
  std::atomic<int> scrapes{0};
  netlatd::MetricsServer server("127.0.0.1:0", [&] {
    ++scrapes;
    return netlatd::render_prometheus(snapshot);
  });
  REQUIRE(server.port() != 0);
  CHECK(server.host() == "127.0.0.1");

  auto res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK_THAT(res->header("content-type"), Catch::Matchers::StartsWith("text/plain; version=0.0.4"));
  CHECK(res->body == netlatd::render_prometheus(snapshot));
  CHECK(scrapes == 1);

  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/");
  REQUIRE(res);
  CHECK(res->status == 404);
  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metricsx");
  REQUIRE(res);
  CHECK(res->status == 404);
  res = nltest::http_request("127.0.0.1", server.port(), "POST", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 405);
  CHECK(res->header("allow") == "GET, HEAD");
  CHECK(scrapes == 1);
  // HEAD: the headers of a scrape, no body.
  res = nltest::http_request("127.0.0.1", server.port(), "HEAD", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->header("content-length") == std::to_string(netlatd::render_prometheus(snapshot).size()));
  CHECK(res->body.empty());
  // A query string is not part of the path.
  res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics?name[]=x");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(scrapes == 3);

  server.stop();
  server.stop();  // idempotent
  CHECK_FALSE(nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 1000));
}

TEST_CASE("MetricsServer listens on IPv6", "[metrics]") {
  // lo has ::1 unless IPv6 is disabled on this host.
  const int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool have_v6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
  if (probe >= 0)
    close(probe);
  if (!have_v6)
    SKIP("no IPv6 loopback address (::1) on this host");

  netlatd::MetricsServer server("[::1]:0", [] { return std::string("netlatd_up 1\n"); });
  REQUIRE(server.port() != 0);
  CHECK(server.host() == "::1");
  auto res = nltest::http_request("::1", server.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body == "netlatd_up 1\n");
  // Only ::1 is bound: the same port on 127.0.0.1 is refused.
  CHECK_FALSE(nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 1000));
}

TEST_CASE("MetricsServer: a client that never sends its request holds nothing up", "[metrics]") {
  netlatd::MetricsServer server("127.0.0.1:0", [] { return std::string("netlatd_up 1\n"); });
  auto connect_silent = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
    return fd;
  };
  // The server gives a silent connection 1 s, then serves the next one.
  const int silent = connect_silent();
  auto t = std::chrono::steady_clock::now();
  auto res = nltest::http_request("127.0.0.1", server.port(), "GET", "/metrics", 5000);
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(std::chrono::steady_clock::now() - t < std::chrono::milliseconds(2500));
  close(silent);

  // stop() does not wait for a silent client either.
  const int held = connect_silent();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // accepted, waiting for the request
  t = std::chrono::steady_clock::now();
  server.stop();
  CHECK(std::chrono::steady_clock::now() - t < std::chrono::milliseconds(500));
  close(held);
}

TEST_CASE("MetricsServer: render failure is a 500, busy port is a clear error", "[metrics]") {
  netlatd::MetricsServer failing("127.0.0.1:0", []() -> std::string { throw std::runtime_error("no snapshot yet"); });
  auto res = nltest::http_request("127.0.0.1", failing.port(), "GET", "/metrics");
  REQUIRE(res);
  CHECK(res->status == 500);
  CHECK_THAT(res->body, Catch::Matchers::ContainsSubstring("no snapshot yet"));

  const std::string taken = "127.0.0.1:" + std::to_string(failing.port());
  CHECK_THROWS_AS(netlatd::MetricsServer(taken, [] { return std::string(); }), netlatd::MetricsError);
  CHECK_THROWS_WITH(netlatd::MetricsServer(taken, [] { return std::string(); }),
                    Catch::Matchers::StartsWith("cannot listen on " + taken));
  CHECK_THROWS_AS(netlatd::MetricsServer("127.0.0.1:http", [] { return std::string(); }), std::invalid_argument);
}

namespace {

int connect_to(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(fd >= 0);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0);
  return fd;
}

void send_text(int fd, const std::string &text) {
  REQUIRE(send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
}

// What the server sends until it closes (or resets), within timeout_ms;
// `closed` says whether it did close.
std::string read_until_closed(int fd, int timeout_ms, bool &closed) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  closed = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) != 1)
      return got;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      closed = true;
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("MetricsServer: dozens of slow, huge and malformed clients hold no scrape up", "[metrics][hostile]") {
  std::atomic<int> scrapes{0};
  netlatd::MetricsServer server("127.0.0.1:0", [&] {
    ++scrapes;
    return std::string("netlatd_up 1\n");
  });
  const uint16_t port = server.port();
  const size_t fds_before = open_fds();
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };

  // Refused as soon as the request line is in, headers or not: a wrong
  // method (405), a wrong path (404), a line that is not HTTP (400).
  const std::pair<std::string, std::string> refused[] = {
      {"POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n", "HTTP/1.1 405 "},
      {"DELETE / HTTP/1.0\r\n", "HTTP/1.1 405 "},
      {"GET /admin HTTP/1.1\r\n", "HTTP/1.1 404 "},
      {"GET /metrics%zz HTTP/1.1\r\n", "HTTP/1.1 404 "},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n", 12), "HTTP/1.1 400 "},
      {"GET /metrics SPDY/3\r\n", "HTTP/1.1 400 "},
      {"\r\n", "HTTP/1.1 400 "},
  };
  for (const auto &[request, status] : refused) {
    INFO(request);
    const int fd = connect_to(port);
    const auto t = Clock::now();
    send_text(fd, request);
    bool closed = false;
    const std::string got = read_until_closed(fd, 2000, closed);
    CHECK(got.rfind(status, 0) == 0);
    CHECK(closed);
    CHECK(ms_since(t) < 500);
    close(fd);
  }
  // A head that never ends: 414 without a line end, 431 with one, at 8 KiB.
  for (const auto &[prefix, status] : {std::pair<std::string, std::string>{"GET /", "HTTP/1.1 414 "},
                                       {"GET /metrics HTTP/1.1\r\nX: ", "HTTP/1.1 431 "}}) {
    const int fd = connect_to(port);
    send_text(fd, prefix + std::string(8192, 'a'));
    bool closed = false;
    CHECK(read_until_closed(fd, 2000, closed).rfind(status, 0) == 0);
    CHECK(closed);
    close(fd);
  }
  CHECK(scrapes == 0);

  // 80 clients at once that never finish: silent, trickling, half a huge
  // head. Twice the connections served at once, so old ones are closed for
  // new ones; every real scrape among them is answered in well under the 1 s
  // a slow client may take.
  std::vector<int> hostile;
  for (int i = 0; i < 80; ++i) {
    const int fd = connect_to(port);
    if (i % 3 == 1)
      send_text(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n");  // no end of head, ever
    else if (i % 3 == 2)
      send_text(fd, "GET /" + std::string(4000, 'b'));
    hostile.push_back(fd);
    if (i % 10 == 9) {
      const auto t = Clock::now();
      auto res = nltest::http_request("127.0.0.1", port, "GET", "/metrics", 2000);
      REQUIRE(res);
      CHECK(res->status == 200);
      CHECK(res->body == "netlatd_up 1\n");
      CHECK(ms_since(t) < 300);
    }
  }
  CHECK(scrapes == 8);
  // Every hostile connection is closed by the server within its second.
  for (int fd : hostile) {
    bool closed = false;
    read_until_closed(fd, 2500, closed);
    CHECK(closed);
    close(fd);
  }
  // Nothing kept: the server's descriptors are back to the listening socket
  // and its eventfd, and it still answers.
  CHECK(open_fds() == fds_before);
  auto res = nltest::http_request("127.0.0.1", port, "GET", "/metrics", 2000);
  REQUIRE(res);
  CHECK(res->status == 200);
}
