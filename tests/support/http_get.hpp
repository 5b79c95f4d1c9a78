#pragma once
// A minimal HTTP/1.1 client for the tests' scrapes of /metrics: one request per
// connection, written here rather than taken from a library so that the
// server is checked by code that shares nothing with it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace nltest {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string header(const std::string &lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Sends `method target` to host:port (an IPv4 or IPv6 address) and reads the
// response until the server closes. nullopt when the connection is refused,
// nothing complete arrives within `timeout_ms`, or the response is malformed.
inline std::optional<HttpResponse> http_request(const std::string &host, uint16_t port,
                                                const std::string &method = "GET",
                                                const std::string &target = "/metrics", int timeout_ms = 5000) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto wait = [&](int fd, short events) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0)
        return false;
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0)
        return true;
      if (n < 0 && errno != EINTR)
        return false;
    }
  };

  const bool v6 = host.find(':') != std::string::npos;
  sockaddr_in a4{};
  sockaddr_in6 a6{};
  if (v6) {
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.c_str(), &a6.sin6_addr) != 1)
      return std::nullopt;
  } else {
    a4.sin_family = AF_INET;
    a4.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &a4.sin_addr) != 1)
      return std::nullopt;
  }
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  const int rc = v6 ? ::connect(fd, reinterpret_cast<sockaddr *>(&a6), sizeof(a6))
                    : ::connect(fd, reinterpret_cast<sockaddr *>(&a4), sizeof(a4));
  if (rc != 0) {
    if (errno != EINPROGRESS || !wait(fd, POLLOUT))
      return std::nullopt;
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
      return std::nullopt;
  }

  const std::string shown_host = v6 ? "[" + host + "]" : host;
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: " + shown_host + ":" + std::to_string(port) +
                        "\r\nUser-Agent: netlatd-tests\r\nConnection: close\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0)
      sent += static_cast<size_t>(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR)
      return std::nullopt;
    else if (!wait(fd, POLLOUT))
      return std::nullopt;
  }

  std::string raw;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait(fd, POLLIN))
        return std::nullopt;
    } else {
      return std::nullopt;
    }
  }

  const auto head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || raw.size() < 12)
    return std::nullopt;
  HttpResponse res;
  res.status = std::stoi(raw.substr(9, 3));
  for (size_t at = raw.find("\r\n") + 2; at < head_end;) {
    const size_t eol = raw.find("\r\n", at);
    const std::string line = raw.substr(at, eol - at);
    at = eol + 2;
    const auto colon = line.find(':');
    if (colon == std::string::npos)
      return std::nullopt;
    std::string name = line.substr(0, colon);
    for (char &c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto value_at = line.find_first_not_of(' ', colon + 1);
    res.headers[name] = value_at == std::string::npos ? "" : line.substr(value_at);
  }
  res.body = raw.substr(head_end + 4);
  // A body cut short is a failed request, as for any client.
  if (method != "HEAD" && res.headers.count("content-length") &&
      res.body.size() != std::stoull(res.headers["content-length"]))
    return std::nullopt;
  return res;
}

}  // namespace nltest
