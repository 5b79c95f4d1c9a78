#pragma once
// Opt-in Prometheus endpoint (--metrics-listen ADDR:PORT): the text exposition
// format 0.0.4 of the daemon's cumulative counters and per-stage histograms.
// The JSON lines stay the primary output; this is for dashboards and alerts.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "netlatd/histogram.hpp"
#include "netlatd/stages.hpp"

namespace netlatd {

// Everything one scrape shows. Counters and histograms are cumulative since
// the daemon started (Prometheus computes rates itself); they never go down.
struct MetricsSnapshot {
  std::string iface;
  std::vector<uint16_t> ports;
  std::string version;  // netlatd version
  std::string kernel;   // uname -r

  struct StageMetrics {
    bool applicable = false;  // false: no series in netlatd_stage_latency_seconds
    std::string start_hook;   // e.g. "tp_btf/netif_receive_skb"
    std::string end_hook;
    Histogram latency;        // nanoseconds, cumulative
  };
  std::array<StageMetrics, kStageCount> stages;  // indexed by Stage

  uint64_t packets_udp = 0;
  uint64_t packets_tcp = 0;
  std::map<std::string, uint64_t> drops;  // reason -> total, e.g. "ringbuf_full"
  // Reads whose datagram no record names, by why: "ambiguous", "untracked".
  std::map<std::string, uint64_t> reads_unnamed;
  uint64_t queue_unseen = 0;                    // records without a socket-queue stamp
  // TCP payload bytes: "read" by receive calls on watched sockets, "reported"
  // in records, "skipped" in gaps no record covers.
  std::map<std::string, uint64_t> tcp_bytes;
  std::map<std::string, uint64_t> hook_misses;  // hook label -> BPF recursion misses
};

// The `le` bounds of netlatd_stage_latency_seconds, in nanoseconds; +Inf follows.
// A fine bucket of the Histogram is counted under the first bound its (exclusive)
// upper edge does not exceed, so a bound's count never includes a value above it;
// a value at most 1.6 % below a bound may be counted under the next one.
inline constexpr std::array<uint64_t, 19> kPrometheusBoundsNs{
    1'000,      2'500,      5'000,       10'000,      25'000,      50'000,     100'000,
    250'000,    500'000,    1'000'000,   2'500'000,   5'000'000,   10'000'000, 25'000'000,
    50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000};

// Text exposition format 0.0.4, families in a fixed order, ending with a newline.
std::string render_prometheus(const MetricsSnapshot &snapshot);

// "ADDR:PORT", "[V6ADDR]:PORT", ":PORT" or "PORT"; the address defaults to
// 127.0.0.1 so nothing is exposed beyond the host unless asked. Port 0 picks a
// free port (tests). Throws std::invalid_argument with a one-line message.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};
ListenAddress parse_listen_address(std::string_view text);

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
  ~MetricsServer();
  MetricsServer(const MetricsServer &) = delete;
  MetricsServer &operator=(const MetricsServer &) = delete;

  // Stops accepting, abandons a connection still waiting on its client, joins
  // the thread, releases the port. Idempotent.
  void stop();

  const std::string &host() const noexcept { return address_.host; }
  uint16_t port() const noexcept { return address_.port; }  // the bound port, also for port 0

private:
  void serve();

  ListenAddress address_;
  Render render_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: stop() wakes the thread from any wait
  std::thread thread_;
};

}  // namespace netlatd
