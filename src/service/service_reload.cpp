#include "service.hpp"

#include <time.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/service/reload.hpp"

namespace netlatd {

void Service::reload() {
  notifier_.reloading();
  sink_->reopen();  // logrotate renamed the file: a new one by the old name
  if (opts_.config.empty()) {
    spdlog::info("SIGHUP: reopening the output (no --config to reload)");
  } else {
    spdlog::info("SIGHUP: reopening the output and reloading {}", opts_.config);
    try {
      apply(reload_options(opts_));
    } catch (const Error &e) {
      spdlog::error("{}; configuration not reloaded, the running one is kept", e.what());
    }
  }
  notifier_.ready();
  set_status();
}

// Applies what can change while running; what is built into the loaded BPF
// programs or read once at start keeps its running value (keep_start_only).
void Service::apply(Options next) {
  std::vector<std::string> changed;
  for (const std::string &w : keep_start_only(opts_, next))
    spdlog::warn("reload: {}", w);
  if (next.metrics_resolution != opts_.metrics_resolution) {
    changed.push_back(fmt::format("metrics_resolution {} -> {}", opts_.metrics_resolution, next.metrics_resolution));
    metrics_.set_buckets_per_power_of_two(next.metrics_resolution);
  }
  apply_output(next, changed);
  apply_interfaces(next, changed);
  if (next.interval_s != opts_.interval_s) {
    changed.push_back(fmt::format("interval {} s -> {} s", opts_.interval_s, next.interval_s));
    loop_.set_due(report_timer_,
                  interval_.relength(next.interval_s, loop_.due(report_timer_), clock_ns(CLOCK_MONOTONIC)));
  }
  if (next.format != opts_.format)
    changed.push_back(std::string("format ") + (next.format == OutputFormat::Json ? "json" : "text"));
  apply_outliers(next, changed);
  if (next.verbose != opts_.verbose) {
    spdlog::set_level(next.verbose ? spdlog::level::debug : spdlog::level::info);
    changed.push_back(next.verbose ? "log level debug" : "log level info");
  }
  apply_metrics_listen(next, changed);
  opts_ = std::move(next);
  if (changed.empty())
    spdlog::info("reloaded {}: nothing changed", opts_.config);
  else
    spdlog::info("reloaded {}: {}", opts_.config, fmt::join(changed, "; "));
}

void Service::apply_output(Options &next, std::vector<std::string> &changed) {
  if (next.output == opts_.output && next.output_group == opts_.output_group)
    return;
  try {
    auto fresh = std::make_unique<LineSink>(next.output, next.output_group);
    // The partial interval still goes to the old output.
    end_interval(false);
    sink_->flush(200);
    retired_sink_dropped_ += sink_->dropped();
    sink_ = std::move(fresh);
    changed.push_back(next.output != opts_.output
                          ? fmt::format("output {} -> {}", opts_.output, next.output)
                          : fmt::format("output_group '{}' -> '{}'", opts_.output_group, next.output_group));
  } catch (const Error &e) {
    spdlog::error("reload: {}; still writing to '{}'", e.what(), opts_.output);
    next.output = opts_.output;
    next.output_group = opts_.output_group;
  }
}

void Service::apply_interfaces(const Options &next, std::vector<std::string> &changed) {
  if (next.ifaces == opts_.ifaces && next.irqs == opts_.irqs)
    return;
  if (next.ifaces != opts_.ifaces) {
    end_interval(false);  // that interval belongs to the old interfaces
    changed.push_back(fmt::format("iface {} -> {}", fmt::join(opts_.ifaces, ","), fmt::join(next.ifaces, ",")));
  }
  if (next.irqs != opts_.irqs)
    changed.push_back(next.irqs.empty() ? "irq lines found by netlatd again"
                                        : fmt::format("irq [{}]", fmt::join(next.irqs, ",")));
  opts_.ifaces = next.ifaces;
  opts_.irqs = next.irqs;
  interfaces_.refresh(header_, opts_.ifaces, opts_.irqs);
  metrics_.set_header(header_);
  if (interfaces_.present() == 0)
    spdlog::warn("reload: no interface of {} is there; waiting for one", fmt::join(opts_.ifaces, ","));
}

void Service::apply_outliers(const Options &next, std::vector<std::string> &changed) {
  if (next.outliers_over_ns == opts_.outliers_over_ns && next.outliers_max_per_sec == opts_.outliers_max_per_sec)
    return;
  changed.push_back(fmt::format("outliers over {} at most {}/s",
                                next.outliers_over_ns ? format_duration(*next.outliers_over_ns) : "off",
                                next.outliers_max_per_sec));
  outliers_.reconfigure(next.outliers_over_ns, next.outliers_max_per_sec);
  tracer_->set_aggregate_outliers(opts_.aggregate_check ? std::nullopt : next.outliers_over_ns);
}

void Service::apply_metrics_listen(Options &next, std::vector<std::string> &changed) {
  if (next.metrics_listen == opts_.metrics_listen)
    return;
  if (metrics_.socket_activated()) {
    spdlog::info("reload: metrics_listen is not used: the endpoint serves on the socket systemd passed");
    return;
  }
  // Released first: the new address may be the old port on another host.
  metrics_.stop_serving();
  try {
    if (!next.metrics_listen.empty())
      metrics_.serve(next.metrics_listen);
    changed.push_back("metrics_listen " + (next.metrics_listen.empty() ? "off" : next.metrics_listen));
  } catch (const Error &e) {
    spdlog::error("reload: {}; keeping metrics on {}", e.what(),
                  opts_.metrics_listen.empty() ? "off" : opts_.metrics_listen);
    next.metrics_listen = opts_.metrics_listen;
    if (!next.metrics_listen.empty()) {
      try {
        metrics_.serve(next.metrics_listen);
      } catch (const Error &again) {
        spdlog::error("reload: {}; the metrics endpoint is off", again.what());
        next.metrics_listen.clear();
      }
    }
  }
}

}  // namespace netlatd
