#include "netlatd/output/publisher.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/output/labels.hpp"
#include "netlatd/output/prometheus.hpp"

namespace netlatd {
namespace {

bool is_loopback(const std::string &host) { return host.rfind("127.", 0) == 0 || host == "::1"; }

}  // namespace

MetricsPublisher::MetricsPublisher(const std::string &version, const std::string &kernel,
                                   unsigned buckets_per_power_of_two, BreakdownSpec by)
    : delta_(by) {
  snapshot_.version = version;
  snapshot_.kernel = kernel;
  snapshot_.buckets_per_power_of_two = buckets_per_power_of_two;
}

void MetricsPublisher::serve(const std::string &listen) {
  auto render_now = [this] { return render(); };
  try {
    const int activated = take_activated_socket();
    if (activated >= 0) {
      activated_ = true;
      server_ = std::make_unique<MetricsServer>(activated, render_now);
      if (!listen.empty())
        spdlog::info("metrics: serving on the socket systemd passed; --metrics-listen {} is not used", listen);
    } else if (!listen.empty()) {
      server_ = std::make_unique<MetricsServer>(listen, render_now);
    } else {
      return;
    }
  } catch (const std::invalid_argument &e) {
    throw Error(ExitCode::Usage, std::string("--metrics-listen: ") + e.what());
  } catch (const MetricsError &e) {
    throw Error(ExitCode::Software, std::string("metrics endpoint: ") + e.what());
  }
  spdlog::info("Prometheus metrics on http://{}/metrics", shown_address(server_->address()));
  if (!is_loopback(server_->host()))
    spdlog::warn("the metrics endpoint listens on {}, beyond loopback; it has no authentication", server_->host());
}

void MetricsPublisher::set_header(const ReportHeader &h) {
  std::lock_guard lock(mu_);
  snapshot_.iface = h.iface;
  snapshot_.ports = h.ports;
  snapshot_.sample = h.sample;
  for (Stage s : kAllStages) {
    const auto &from = h.stages[static_cast<size_t>(s)];
    auto &m = snapshot_.stages[static_cast<size_t>(s)];
    m.applicable = from.applicable;
    m.start_hook = from.start_hook;
    m.end_hook = from.end_hook;
  }
}

void MetricsPublisher::set_buckets_per_power_of_two(unsigned n) {
  std::lock_guard lock(mu_);
  snapshot_.buckets_per_power_of_two = n;
}

void MetricsPublisher::publish(const Losses &losses, CgroupNames &cgroup_names, const IfaceNames &iface_names) {
  {
    std::lock_guard lock(mu_);
    for (const auto &[key, delta] : delta_.series()) {
      if (delta.packets == 0)
        continue;
      SeriesKey into = key;
      into.cgroup = cgroups_.map(key.cgroup);
      auto [it, added] = snapshot_.series.try_emplace(into);
      if (added)
        it->second.labels = series_labels(delta_.breakdown(), into, cgroup_names, &iface_names);
      for (size_t i = 0; i < kStageCount; ++i)
        it->second.latency[i].merge(delta.stages[i]);
    }
    snapshot_.packets_udp += delta_.packets_udp();
    snapshot_.packets_tcp += delta_.packets_tcp();
    snapshot_.unordered += delta_.unordered();
    snapshot_.reader_unknown += delta_.reader_unknown();
    snapshot_.tcp_bytes["reported"] += delta_.tcp_bytes();
    losses.publish(snapshot_);
  }
  delta_.reset();
}

std::string MetricsPublisher::render() {
  std::lock_guard lock(mu_);
  return render_prometheus(snapshot_);
}

}  // namespace netlatd
