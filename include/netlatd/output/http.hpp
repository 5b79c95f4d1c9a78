#pragma once
// The opt-in metrics endpoint (--metrics-listen ADDR:PORT): its address and
// the HTTP server that answers GET /metrics.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace netlatd {

// The port --metrics-listen takes when given an address alone, from the
// Prometheus project's default-port allocations for exporters.
inline constexpr uint16_t kDefaultMetricsPort = 9659;

// "ADDR:PORT", "[V6ADDR]:PORT", ":PORT" or "PORT", or an address alone
// ("127.0.0.1", "[::1]") for kDefaultMetricsPort; the address defaults to
// 127.0.0.1 so nothing is exposed beyond the host unless asked. Port 0 picks a
// free port (tests). Throws std::invalid_argument with a one-line message.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};
ListenAddress parse_listen_address(std::string_view text);
// "127.0.0.1:9659", "[::1]:9659": an address as logs and errors show it.
std::string shown_address(const ListenAddress &a);

class MetricsError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Serves GET (and HEAD) /metrics, 404 for anything else, on its own thread.
// A plain HTTP/1.1 responder of our own rather than a library: the endpoint
// needs one route and no TLS, and the HTTP libraries Debian ships either link
// OpenSSL (cpp-httplib: +3.4 MiB of RSS, a sixth of the daemon's budget) or
// lack IPv6 (civetweb). One thread polls up to 32 connections at once (a new
// one past that closes the oldest), one request per connection
// (`Connection: close`), a request head of at most 8 KiB that must arrive
// within a second, a response the client must take within a second. Anything
// but GET or HEAD of /metrics is refused (405, 404) as soon as its request
// line is in. A slow, huge or malformed request costs its own connection
// only: other scrapes are answered meanwhile, and the drain loop never waits
// on a client (only on `render`'s mutex, for one render).
//
// `render` is called on the server's thread, one scrape at a time,
// concurrently with the daemon's main loop. It must not touch live
// aggregation state: the daemon keeps a MetricsSnapshot under a mutex, updates
// it once per interval, and `render` copies/renders it under that mutex.
// An exception from `render` becomes a 500 response.
class MetricsServer {
public:
  using Render = std::function<std::string()>;

  // Binds before returning; throws std::invalid_argument for a malformed
  // address and MetricsError ("cannot listen on 127.0.0.1:9464: Address already
  // in use") when the socket cannot be bound. SO_REUSEADDR (a restart while old
  // connections sit in TIME_WAIT) but not SO_REUSEPORT: a second daemon on the
  // same port fails instead of silently getting half of the scrapes.
  MetricsServer(std::string_view listen, Render render);
  // Serves on a socket already listening, passed by the service manager
  // (systemd socket activation); owns it from now on. Throws MetricsError
  // when `fd` is not a listening TCP socket.
  MetricsServer(int listening_fd, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer &) = delete;
  MetricsServer &operator=(const MetricsServer &) = delete;

  // Stops accepting, abandons a connection still waiting on its client, joins
  // the thread, releases the port. Idempotent.
  void stop();

  const std::string &host() const noexcept { return address_.host; }
  uint16_t port() const noexcept { return address_.port; }  // the bound port, also for port 0
  const ListenAddress &address() const noexcept { return address_; }

private:
  void serve();

  ListenAddress address_;
  Render render_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: stop() wakes the thread from any wait
  std::thread thread_;
  void start_thread();
};

// The listening socket systemd passed (LISTEN_FDS, a .socket unit), or -1
// when none was. Takes it out of the environment, so that it is used once.
// Throws MetricsError when more than one was passed.
int take_activated_socket();
}  // namespace netlatd
