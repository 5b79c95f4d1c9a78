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

#include "netlatd/breakdown.hpp"
#include "netlatd/histogram.hpp"
#include "netlatd/stages.hpp"

namespace netlatd {

// The port --metrics-listen takes when given an address alone, from the
// Prometheus project's default-port allocations for exporters.
inline constexpr uint16_t kDefaultMetricsPort = 9659;
inline constexpr unsigned kDefaultBucketsPerPowerOfTwo = 4;

// Everything one scrape shows. Counters and histograms are cumulative since
// the daemon started (Prometheus computes rates itself); they never go down.
struct MetricsSnapshot {
  std::string iface;
  std::vector<uint16_t> ports;
  std::string version;  // netlatd version
  std::string kernel;   // uname -r
  // `le` bounds per power of two (--metrics-resolution): 1, 2, 4 or 8.
  unsigned buckets_per_power_of_two = kDefaultBucketsPerPowerOfTwo;

  struct StageMetrics {
    bool applicable = false;  // false: no series in netlatd_stage_latency_seconds
    std::string start_hook;   // e.g. "tp_btf/netif_receive_skb"
    std::string end_hook;
  };
  std::array<StageMetrics, kStageCount> stages;  // indexed by Stage

  // One series of the breakdown (--by): its labels in order, e.g.
  // {{"dport","5000"},{"proto","udp"}}, and its latency per stage in
  // nanoseconds, cumulative. Every applicable stage is rendered for it.
  struct Series {
    std::vector<std::pair<std::string, std::string>> labels;
    std::array<Histogram, kStageCount> latency;
  };
  std::map<SeriesKey, Series> series;

  uint64_t packets_udp = 0;
  uint64_t packets_tcp = 0;
  // Packets the kernel dropped before they reached the socket (stack_dropped):
  // the network's loss, not netlatd's.
  uint64_t kernel_drops = 0;
  // netlatd's own losses, by reason ("ringbuf_full", ...): records or reads it
  // could not measure. Never stack_dropped.
  std::map<std::string, uint64_t> losses;
  // Reads whose datagram no record names, by why: "ambiguous", "untracked".
  std::map<std::string, uint64_t> reads_unnamed;
  uint64_t queue_unseen = 0;                    // records without a socket-queue stamp
  uint64_t reader_stamps_far = 0;               // reader stamps left out: over 4.29 s before the return
  // Records counted in packets but added to no stage: stamps out of path
  // order; and records whose reader is not known (ambiguous or unknown),
  // which add only to the stages before the read. As the JSON's
  // `unordered` and `reader_unknown`.
  uint64_t unordered = 0;
  uint64_t reader_unknown = 0;
  // With the napi_poll hook: the traced devices' NAPI polls, the packets they
  // processed, and the polls that used their whole budget. Empty without it.
  std::map<std::string, uint64_t> napi;
  // --cgroup: records left out, "outside" / "no_reader"; empty without --cgroup.
  std::map<std::string, uint64_t> cgroup_filtered;
  // TCP payload bytes: "read" by receive calls on watched sockets, "reported"
  // in records, "skipped" in gaps no record covers.
  std::map<std::string, uint64_t> tcp_bytes;
  std::map<std::string, uint64_t> hook_misses;  // hook label -> BPF recursion misses
};

// The `le` bounds of netlatd_stage_latency_seconds, in nanoseconds; +Inf
// follows. Each is an edge of the JSON's log-linear buckets: 2^k * (1 + i/n)
// for n = per_power_of_two, from 64 ns up to the first bound of at least
// 10 s (10.7 s). So every Prometheus bucket is exactly a union of JSON
// buckets, and `le` counts the values below its bound in whole nanoseconds.
// Throws std::invalid_argument unless per_power_of_two is 1, 2, 4 or 8.
std::vector<uint64_t> prometheus_bounds_ns(unsigned per_power_of_two);
// A bound in seconds as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it,
// which is what the official client libraries emit: identical label values
// let a query aggregate netlatd's buckets with other exporters' without
// relabelling. 64 -> "6.4e-08", 1'310'720 -> "0.00131072".
std::string prometheus_le_label(uint64_t bound_ns);

// Text exposition format 0.0.4, families in a fixed order, ending with a newline.
std::string render_prometheus(const MetricsSnapshot &snapshot);

// "ADDR:PORT", "[V6ADDR]:PORT", ":PORT" or "PORT", or an address alone
// ("127.0.0.1", "[::1]") for kDefaultMetricsPort; the address defaults to
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
