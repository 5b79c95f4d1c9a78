#pragma once
// The cumulative figures of --metrics-listen and the endpoint that serves
// them. The drain loop adds each record to a delta and merges it into the
// snapshot (publish); the endpoint's thread renders the snapshot. Only the
// snapshot is shared, under a mutex.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/model/losses.hpp"
#include "netlatd/model/snapshot.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/output/http.hpp"

namespace netlatd {

class MetricsPublisher {
public:
  MetricsPublisher(const std::string &version, const std::string &kernel, unsigned buckets_per_power_of_two,
                   BreakdownSpec by);
  MetricsPublisher(const MetricsPublisher &) = delete;
  MetricsPublisher &operator=(const MetricsPublisher &) = delete;

  // Serves on the socket systemd passed, else on `listen` ("": no endpoint).
  // Throws Error (Usage: a malformed address; Software: it cannot be bound).
  void serve(const std::string &listen);
  // Releases the endpoint and its port (a reload that moves it).
  void stop_serving() { server_.reset(); }
  // The endpoint, to stop on a thread of its own at exit.
  std::unique_ptr<MetricsServer> release_server() { return std::move(server_); }
  bool serving() const { return server_ != nullptr; }
  uint16_t port() const { return server_ ? server_->port() : 0; }  // the bound port (also for port 0)
  // The endpoint's socket came from systemd: a reload does not move it.
  bool socket_activated() const { return activated_; }

  // What the drain loop read since the last publish.
  IntervalAggregator &delta() { return delta_; }
  // The interfaces, ports and stage hooks the header names now.
  void set_header(const ReportHeader &h);
  void set_buckets_per_power_of_two(unsigned n);
  // The delta into the snapshot, with the losses' totals; empties the delta.
  void publish(const Losses &losses, CgroupNames &cgroup_names, const IfaceNames &iface_names);
  // The Prometheus text of the snapshot (what the endpoint serves).
  std::string render();

private:
  std::mutex mu_;  // guards snapshot_, which the endpoint's thread renders
  MetricsSnapshot snapshot_;
  IntervalAggregator delta_;
  StickyCgroups cgroups_;
  std::unique_ptr<MetricsServer> server_;
  bool activated_ = false;
};

}  // namespace netlatd
