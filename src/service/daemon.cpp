#include "netlatd/service/daemon.hpp"

#include <sched.h>
#include <net/if.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/clock.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/kernel/privileges.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/output/labels.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/net/follow.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/service/loop.hpp"
#include "netlatd/model/losses.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/service/notify.hpp"
#include "netlatd/service/reload.hpp"
#include "netlatd/output/sink.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/version.hpp"
#include "netlatd/net/watch.hpp"

namespace netlatd {
namespace {

// The --cgroup directories; one that names no cgroup is a usage error,
// given before anything is opened or logged.
std::vector<std::string> kept_cgroup_dirs(const Options &opts) {
  std::vector<std::string> dirs;
  for (const std::string &c : opts.cgroups) {
    try {
      dirs.push_back(cgroup_directory(c, cgroup2_root()).string());
    } catch (const std::invalid_argument &e) {
      throw Error(ExitCode::Usage, std::string("--cgroup: ") + e.what());
    }
  }
  return dirs;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Blocks the signals we handle and returns a signalfd for them.
int make_signalfd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
    throw Error(ExitCode::Software, "cannot block signals");
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0)
    throw Error(ExitCode::Software, std::string("signalfd: ") + std::strerror(errno));
  return fd;
}

// Outlier lines are rate-limited with a token bucket refilled each second.
class RateLimit {
public:
  explicit RateLimit(uint32_t per_sec) : per_sec_(per_sec), tokens_(per_sec) {}
  bool take(int64_t now_ns) {
    if (now_ns - last_refill_ >= 1000000000ll) {
      tokens_ = per_sec_;
      last_refill_ = now_ns;
    }
    if (tokens_ == 0)
      return false;
    tokens_--;
    return true;
  }

private:
  uint32_t per_sec_;
  uint32_t tokens_;
  int64_t last_refill_ = 0;
};

}  // namespace

namespace {

constexpr int64_t kSecond = 1000000000ll;
// A UDP datagram whose stash entry is older than this never reached its
// socket's data-ready call (or a read took it first): its stamps are lost.
constexpr uint64_t kInflightMaxAgeNs = 2000000000ull;
// ... and one queued on its socket this long ago was never read.
constexpr uint64_t kUnreadMaxAgeNs = 60000000000ull;

bool is_loopback(const std::string &host) { return host.rfind("127.", 0) == 0 || host == "::1"; }

// The daemon from READY=1 to exit: one thread drains the ring buffer, writes
// the interval lines, follows the interface, answers signals and feeds the
// watchdog; the sink and the metrics endpoint have a thread each.
class Service {
public:
  Service(const Options &opts, std::unique_ptr<KernelFeatures> features, HookPlan plan,
          std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids, int netns_fd,
          Companion companion);
  int run();

private:
  void on_record(const netlatd_packet &p);
  void drain_kernel();  // --aggregate: what the kernel side added, into the interval
  void end_interval(bool final);
  void publish_metrics();
  void update_metrics_header();
  void set_status();
  std::unique_ptr<MetricsServer> start_metrics(const std::string &listen);
  uint64_t sink_dropped() const { return retired_sink_dropped_ + sink_->dropped(); }

  // After the follower looked the interfaces up: the kernel filter (when
  // its target changed) and the headers.
  void use_interfaces();

  void reload();
  void apply(Options next);

  Options opts_;
  std::unique_ptr<KernelFeatures> features_;
  HookPlan plan_;
  ReportHeader header_;
  Notifier notifier_;

  // Signals are blocked before any thread starts, so only the signalfd sees them.
  Fd sigfd_{make_signalfd()};

  // Cumulative figures for --metrics-listen. The drain loop merges what it
  // read since the last publish; the HTTP thread renders under the mutex.
  std::mutex metrics_mu_;
  MetricsSnapshot metrics_;
  IntervalAggregator metrics_delta_;
  StickyCgroups metrics_cgroups_;
  std::unique_ptr<MetricsServer> metrics_server_;
  bool metrics_activated_ = false;  // the endpoint's socket came from systemd
  CgroupNames cgroup_names_;

  std::unique_ptr<LineSink> sink_;
  uint64_t retired_sink_dropped_ = 0;  // drops of sinks replaced by a reload

  IntervalAggregator agg_;
  // --aggregate-check: since start, what the kernel side added and the
  // records it also wrote; compared at exit.
  IntervalAggregator check_kernel_, check_ring_;
  bool drain_late_warned_ = false;
  uint64_t kernel_added_ = 0;  // --aggregate: records the kernel side added, since start
  RateLimit outlier_limit_;
  uint64_t outliers_suppressed_ = 0;
  ClockOffset mono_to_real_;  // see measure_realtime_offset

  std::unique_ptr<Tracer> tracer_;
  InterfaceFollower follower_;
  TraceTarget target_;  // what the loaded programs filter on
  Companion make_companion_;
  std::shared_ptr<void> companion_;  // e.g. --demo's traffic

  // Drained at least every 100 ms.
  EventLoop loop_{kSecond / 10};
  EventLoop::TimerId report_timer_ = 0;
  int64_t interval_ns_ = 0;
  std::chrono::system_clock::time_point interval_start_wall_;
  Losses losses_;
  uint64_t total_packets_ = 0, total_lost_ = 0;
  double last_rate_ = 0;
  uint64_t last_p99_total_ = 0;
};

Service::Service(const Options &opts, std::unique_ptr<KernelFeatures> features, HookPlan plan,
                 std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids, int netns_fd,
                 Companion companion)
    : opts_(opts), features_(std::move(features)), plan_(std::move(plan)), outlier_limit_(opts.outliers_max_per_sec),
      follower_(std::move(traced), std::move(ids), netns_fd),
      losses_(!opts.cgroups.empty(), plan_.has(Point::NapiPoll)) {
  make_companion_ = std::move(companion);
  header_.host = hostname();
  header_.ports = opts_.ports;
  header_.sample = opts_.sample;
  header_.kernel = features_->kernel_release();
  // The probe holds the kernel's whole BTF (~5 MiB on 6.18); nothing needs it
  // once the plan is made.
  features_.reset();
  header_.version = kVersion;
  for (const HookChoice &c : plan_.choices) {
    if (const std::string_view why = plan_.stood_in(c.point->point); !why.empty())
      spdlog::info("hook {}: none ({})", c.point->name, why);
    else
      spdlog::info("hook {}: {}", c.point->name, c.chosen ? hook_label(*c.chosen) : "none");
  }
  metrics_.version = kVersion;
  metrics_.kernel = header_.kernel;
  metrics_.buckets_per_power_of_two = opts_.metrics_resolution;
  agg_.set_breakdown(opts_.by);
  metrics_delta_.set_breakdown(opts_.by);
  check_kernel_.set_breakdown(opts_.by);
  check_ring_.set_breakdown(opts_.by);
  use_interfaces();
  follower_.log_start();
}

std::unique_ptr<MetricsServer> Service::start_metrics(const std::string &listen) {
  std::unique_ptr<MetricsServer> server;
  auto render = [this] {
    std::lock_guard lock(metrics_mu_);
    return render_prometheus(metrics_);
  };
  try {
    const int activated = take_activated_socket();
    if (activated >= 0) {
      metrics_activated_ = true;
      server = std::make_unique<MetricsServer>(activated, render);
      if (!listen.empty())
        spdlog::info("metrics: serving on the socket systemd passed; --metrics-listen {} is not used", listen);
    } else if (!listen.empty()) {
      server = std::make_unique<MetricsServer>(listen, render);
    } else {
      return server;
    }
  } catch (const std::invalid_argument &e) {
    throw Error(ExitCode::Usage, std::string("--metrics-listen: ") + e.what());
  } catch (const MetricsError &e) {
    throw Error(ExitCode::Software, std::string("metrics endpoint: ") + e.what());
  }
  spdlog::info("Prometheus metrics on http://{}/metrics", shown_address(server->address()));
  if (!is_loopback(server->host()))
    spdlog::warn("the metrics endpoint listens on {}, beyond loopback; it has no authentication", server->host());
  return server;
}

void Service::update_metrics_header() {
  std::lock_guard lock(metrics_mu_);
  metrics_.iface = header_.iface;
  metrics_.ports = header_.ports;
  metrics_.sample = header_.sample;
  for (Stage s : kAllStages) {
    const auto &h = header_.stages[static_cast<size_t>(s)];
    auto &m = metrics_.stages[static_cast<size_t>(s)];
    m.applicable = h.applicable;
    m.start_hook = h.start_hook;
    m.end_hook = h.end_hook;
  }
}

void Service::drain_kernel() {
  if (!opts_.aggregate)
    return;
  std::vector<KernelSeries> added;
  if (!tracer_->drain_aggregate(added) && !drain_late_warned_) {
    drain_late_warned_ = true;
    spdlog::warn("--aggregate: a writer of the kernel's histograms did not finish within 100 ms (a stalled CPU?); "
                 "its side is read later, nothing is lost");
  }
  for (const KernelSeries &k : added) {
    kernel_added_ += k.data.packets;
    agg_.add(k);
    metrics_delta_.add(k);
    if (opts_.aggregate_check)
      check_kernel_.add(k);
  }
}

void Service::on_record(const netlatd_packet &p) {
  const StageDurations d = stage_durations(p);
  if (p.agg_checked) {
    // --aggregate-check: the kernel side added it to the interval; kept to
    // check that, and shown as an outlier like any record.
    check_ring_.add(p, d);
  } else {
    agg_.add(p, d);
    metrics_delta_.add(p, d);
  }
  if (opts_.outliers_over_ns) {
    // A record without a total (no reader named, or stamps left out because
    // they could be another copy's) is shown only when every record is asked
    // for (--outliers-over 0).
    auto total = d[Stage::Total];
    const bool all = *opts_.outliers_over_ns == 0;
    if (all || (total && *total > *opts_.outliers_over_ns)) {
      if (!outlier_limit_.take(clock_ns(CLOCK_MONOTONIC)))
        outliers_suppressed_++;
      else if (!sink_->drop_if_full())  // a stalled consumer's full queue: counted as dropped, not made
        sink_->write(format_outlier_json_line(header_, p, mono_to_real_.offset_ns, d));
    }
  }
}

void Service::publish_metrics() {
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_suppressed_);
  {
    std::lock_guard lock(metrics_mu_);
    for (const auto &[key, delta] : metrics_delta_.series()) {
      if (delta.packets == 0)
        continue;
      SeriesKey into = key;
      into.cgroup = metrics_cgroups_.map(key.cgroup);
      auto [it, added] = metrics_.series.try_emplace(into);
      if (added)
        it->second.labels = series_labels(opts_.by, into, cgroup_names_, &header_.iface_names);
      for (size_t i = 0; i < kStageCount; ++i)
        it->second.latency[i].merge(delta.stages[i]);
    }
    metrics_.packets_udp += metrics_delta_.packets_udp();
    metrics_.packets_tcp += metrics_delta_.packets_tcp();
    metrics_.unordered += metrics_delta_.unordered();
    metrics_.reader_unknown += metrics_delta_.reader_unknown();
    metrics_.tcp_bytes["reported"] += metrics_delta_.tcp_bytes();
    losses_.publish(metrics_);
  }
  metrics_delta_.reset();
}

void Service::set_status() {
  const size_t present = follower_.present();
  const bool several = traces_several_ifaces(opts_.ifaces);
  if (present == 0) {
    notifier_.status(fmt::format("interface {} is gone, waiting for it to come back; {} packets measured so far",
                                 header_.iface, total_packets_));
    return;
  }
  std::string p99 = last_p99_total_ ? format_duration(last_p99_total_) : std::string("-");
  const std::string where = several ? fmt::format("{} interfaces of {}", present, header_.iface)
                                    : fmt::format("{} (ifindex {})", header_.iface, header_.ifindex);
  notifier_.status(fmt::format("tracing {} ports {}: {} packets measured, {:.1f}/s and total p99 {} "
                               "last interval; {} lost, {} output lines dropped",
                               where, fmt::join(header_.ports, ","), total_packets_, last_rate_, p99, total_lost_,
                               sink_dropped()));
}

void Service::end_interval(bool final) {
  // The last interval takes what the ring holds (within a bound: a flood
  // may still be filling it).
  for (int polls = 0; tracer_->poll(0) >= Tracer::kPollBudget && final && polls < 64; polls++)
    continue;
  drain_kernel();
  if (final)  // detached: the other side too, in case a drain found a writer late and left it
    drain_kernel();
  const auto sweep = tracer_->sweep(kInflightMaxAgeNs, kUnreadMaxAgeNs);
  losses_.add_expired(sweep.expired_inflight, sweep.expired_unread);
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_suppressed_);
  IntervalReport r;
  r.start = interval_start_wall_;
  r.end = std::chrono::system_clock::now();
  r.data = &agg_;
  r.final = final;
  losses_.end_interval(r);
  total_packets_ += agg_.packets();
  total_lost_ = losses_.total_lost();
  const double seconds = std::chrono::duration<double>(r.end - r.start).count();
  last_rate_ = seconds > 0 ? static_cast<double>(agg_.packets()) / seconds : 0;
  last_p99_total_ = agg_.stage(Stage::Total).percentile(99);
  // Kept through a stalled consumer: outlier lines queued before it make room.
  sink_->write_kept(opts_.format == OutputFormat::Json ? format_json_line(header_, r, &cgroup_names_) : format_text(header_, r));
  agg_.reset();
  publish_metrics();
  interval_start_wall_ = r.end;
  mono_to_real_ = choose_realtime_offset(mono_to_real_, measure_realtime_offset(clock_ns));
  loop_.set_due(report_timer_, clock_ns(CLOCK_MONOTONIC) + interval_ns_);
  if (!final)
    set_status();
}

void Service::use_interfaces() {
  const TraceTarget &next = follower_.target();
  if (tracer_ && (next.devices != target_.devices || next.irqs != target_.irqs))
    tracer_->set_target(next);
  target_ = next;
  const auto &traced = follower_.traced();
  header_.iface = fmt::format("{}", fmt::join(opts_.ifaces, ","));
  header_.ifindex = !traces_several_ifaces(opts_.ifaces) && !traced.empty() && traced[0].info
                        ? static_cast<int>(traced[0].info->ifindex)
                        : 0;
  remember_names(header_.iface_names, traced);
  fill_stage_hooks(header_, plan_, target_.irqs.size());
  update_metrics_header();
}

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
    std::lock_guard lock(metrics_mu_);
    metrics_.buckets_per_power_of_two = next.metrics_resolution;
  }
  if (next.output != opts_.output || next.output_group != opts_.output_group) {
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
  if (next.ifaces != opts_.ifaces || next.irqs != opts_.irqs) {
    if (next.ifaces != opts_.ifaces) {
      end_interval(false);  // that interval belongs to the old interfaces
      changed.push_back(fmt::format("iface {} -> {}", fmt::join(opts_.ifaces, ","), fmt::join(next.ifaces, ",")));
    }
    if (next.irqs != opts_.irqs)
      changed.push_back(next.irqs.empty() ? "irq lines found by netlatd again"
                                          : fmt::format("irq [{}]", fmt::join(next.irqs, ",")));
    opts_.ifaces = next.ifaces;
    opts_.irqs = next.irqs;
    follower_.refresh(opts_.ifaces, opts_.irqs);
    use_interfaces();
    if (follower_.present() == 0)
      spdlog::warn("reload: no interface of {} is there; waiting for one", fmt::join(opts_.ifaces, ","));
  }
  if (next.interval_s != opts_.interval_s) {
    changed.push_back(fmt::format("interval {} s -> {} s", opts_.interval_s, next.interval_s));
    const int64_t old_ns = interval_ns_;
    interval_ns_ = static_cast<int64_t>(std::llround(next.interval_s * 1e9));
    // The running interval ends at its start plus the new length, or now.
    loop_.set_due(report_timer_, std::max(clock_ns(CLOCK_MONOTONIC), loop_.due(report_timer_) - old_ns + interval_ns_));
  }
  if (next.format != opts_.format)
    changed.push_back(std::string("format ") + (next.format == OutputFormat::Json ? "json" : "text"));
  if (next.outliers_over_ns != opts_.outliers_over_ns || next.outliers_max_per_sec != opts_.outliers_max_per_sec) {
    changed.push_back(fmt::format("outliers over {} at most {}/s",
                                  next.outliers_over_ns ? format_duration(*next.outliers_over_ns) : "off",
                                  next.outliers_max_per_sec));
    outlier_limit_ = RateLimit(next.outliers_max_per_sec);
    tracer_->set_aggregate_outliers(opts_.aggregate_check ? std::nullopt : next.outliers_over_ns);
  }
  if (next.verbose != opts_.verbose) {
    spdlog::set_level(next.verbose ? spdlog::level::debug : spdlog::level::info);
    changed.push_back(next.verbose ? "log level debug" : "log level info");
  }
  if (next.metrics_listen != opts_.metrics_listen && metrics_activated_) {
    spdlog::info("reload: metrics_listen is not used: the endpoint serves on the socket systemd passed");
  } else if (next.metrics_listen != opts_.metrics_listen) {
    // Released first: the new address may be the old port on another host.
    metrics_server_.reset();
    try {
      if (!next.metrics_listen.empty())
        metrics_server_ = start_metrics(next.metrics_listen);
      changed.push_back("metrics_listen " + (next.metrics_listen.empty() ? "off" : next.metrics_listen));
    } catch (const Error &e) {
      spdlog::error("reload: {}; keeping metrics on {}", e.what(),
                    opts_.metrics_listen.empty() ? "off" : opts_.metrics_listen);
      next.metrics_listen = opts_.metrics_listen;
      if (!next.metrics_listen.empty()) {
        try {
          metrics_server_ = start_metrics(next.metrics_listen);
        } catch (const Error &again) {
          spdlog::error("reload: {}; the metrics endpoint is off", again.what());
          next.metrics_listen.clear();
        }
      }
    }
  }
  opts_ = std::move(next);
  if (changed.empty())
    spdlog::info("reloaded {}: nothing changed", opts_.config);
  else
    spdlog::info("reloaded {}: {}", opts_.config, fmt::join(changed, "; "));
}

int Service::run() {
  std::vector<std::string> cgroup_dirs = kept_cgroup_dirs(opts_);
  // Bound before anything is attached: a busy port fails the start with
  // nothing to undo.
  metrics_server_ = start_metrics(opts_.metrics_listen);
  sink_ = std::make_unique<LineSink>(opts_.output, opts_.output_group);
  mono_to_real_ = measure_realtime_offset(clock_ns);

  const int64_t t_start = clock_ns(CLOCK_MONOTONIC);
  TracerConfig tcfg;
  tcfg.ports = opts_.ports;
  tcfg.sample = opts_.sample;
  tcfg.ringbuf_bytes = opts_.ringbuf_mb << 20;
  tcfg.reader_cgroup = opts_.by.cgroup;
  tcfg.cgroup_dirs = std::move(cgroup_dirs);
  tcfg.aggregate = opts_.aggregate;
  tcfg.aggregate_check = opts_.aggregate_check;
  tcfg.agg_by = opts_.by;
  tracer_ = std::make_unique<Tracer>(plan_, tcfg, [this](const netlatd_packet &p) { on_record(p); });
  // --aggregate-check adds every record in the kernel and writes it too;
  // the daemon picks the outliers among them.
  tracer_->set_aggregate_outliers(opts_.aggregate_check ? std::nullopt : opts_.outliers_over_ns);
  tracer_->set_target(target_);
  const bool live = tracer_->wait_until_live(2000);
  const double attach_ms = static_cast<double>(clock_ns(CLOCK_MONOTONIC) - t_start) / 1e6;

  follower_.watch_links();
  if (make_companion_)
    companion_ = make_companion_();

  if (!live)
    spdlog::warn("the hooks did not see a loopback self-test datagram within 2 s; they may not be live yet");
  // The verifier's share of the start, and the program nearest its budget.
  const Tracer::VerifierWalk &walk = tracer_->verifier_walk();
  const std::string verifier =
      walk.most ? fmt::format(" (verifier {:.0f} ms; most walked: {}, {} instructions, {:.0f}% of its budget)",
                              walk.load_ms, walk.most_program, walk.most,
                              100.0 * static_cast<double>(walk.most) / static_cast<double>(Tracer::kVerifierBudget))
                : "";
  if (traces_several_ifaces(opts_.ifaces))
    spdlog::info("tracing {} ({} interfaces, {} devices, {} IRQ lines) ports {}: {} programs attached in {:.1f} ms{}; "
                 "ready",
                 header_.iface, follower_.present(), target_.devices.size(), target_.irqs.size(),
                 fmt::join(opts_.ports, ","), tracer_->programs_attached(), attach_ms, verifier);
  else
    spdlog::info("tracing {} (ifindex {}, {} IRQ lines) ports {}: {} programs attached in {:.1f} ms{}; ready",
                 header_.iface, header_.ifindex, target_.irqs.size(), fmt::join(opts_.ports, ","),
                 tracer_->programs_attached(), attach_ms, verifier);
  if (opts_.aggregate)
    spdlog::info("--aggregate{}: the kernel side keeps the histograms ({} KiB of kernel memory); records only for "
                 "outliers and what it cannot add",
                 opts_.aggregate_check ? "-check" : "", tracer_->aggregate_bytes() / 1024);
  notifier_.ready();
  set_status();

  interval_ns_ = static_cast<int64_t>(std::llround(opts_.interval_s * 1e9));
  interval_start_wall_ = std::chrono::system_clock::now();
  losses_.start(read_kernel_counts(*tracer_));
  const int64_t now = clock_ns(CLOCK_MONOTONIC);

  // What is watched, and what each event does. The ring is drained after
  // every wait; a poll that spent its budget (Tracer::kPollBudget) leaves
  // the next wait no time, so a flood cannot hold off signals and timers.
  loop_.drain([this] { return tracer_->poll(0) >= Tracer::kPollBudget; });
  loop_.watch(tracer_->ring_epoll_fd(), nullptr);
  if (follower_.link_fd() >= 0)
    loop_.watch(follower_.link_fd(), [this] {
      if (follower_.on_link_events(opts_.ifaces, opts_.irqs)) {
        use_interfaces();
        set_status();
      }
    });
  loop_.watch(sigfd_.get(), [this] {
    signalfd_siginfo si{};
    bool stop = false;
    while (read(sigfd_.get(), &si, sizeof(si)) == sizeof(si)) {
      if (si.ssi_signo == SIGHUP) {
        reload();
      } else {
        spdlog::info("{}: flushing and detaching", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        stop = true;
      }
    }
    if (stop)
      loop_.stop();
  });
  if (opts_.duration_s)  // without: until signalled
    loop_.at(now + static_cast<int64_t>(*opts_.duration_s * 1e9), [this](int64_t) { loop_.stop(); });
  report_timer_ = loop_.at(now + interval_ns_, [this](int64_t) { end_interval(false); });
  // The fallback for link events rtnetlink did not deliver; and the kept
  // cgroups, one of which a restarted unit may have made again.
  loop_.every(kSecond, now + kSecond, [this] {
    if (follower_.check(opts_.ifaces, opts_.irqs)) {
      use_interfaces();
      set_status();
    }
    for (const Tracer::CgroupChange &c : tracer_->refresh_cgroup_filters()) {
      const std::string &path = opts_.cgroups.at(c.index);  // a reload cannot change them
      if (c.what == Tracer::CgroupChange::Gone)
        spdlog::warn("--cgroup {}: removed; no reader's records are kept for it until it is made again", path);
      else
        spdlog::info("--cgroup {}: made again, following the new cgroup", path);
    }
  });
  loop_.every(kSecond / 10, 0, [this] { publish_metrics(); });
  // Expired stash entries are losses (unjoined_expired): counted within
  // seconds, so that the metrics add up soon after traffic stops.
  loop_.every(kSecond, now + kSecond, [this] {
    const auto swept = tracer_->sweep_stash(kInflightMaxAgeNs, kUnreadMaxAgeNs);
    losses_.add_expired(swept.expired_inflight, swept.expired_unread);
  });
  // A side of the kernel's histograms holds a second at most: its 32-bit
  // buckets cannot fill.
  if (opts_.aggregate)
    loop_.every(kSecond, now + kSecond, [this] { drain_kernel(); });
  // Fed from this loop, so a stuck drain loop is what the watchdog catches.
  const int64_t watchdog_period = notifier_.watchdog_interval().count() * 1000 / 2;
  if (watchdog_period > 0) {
    spdlog::info("systemd watchdog: fed every {}", format_duration(static_cast<uint64_t>(watchdog_period)));
    loop_.every(watchdog_period, now, [this] { notifier_.watchdog(); });
  }
  loop_.run();
  notifier_.stopping();
  // The kernel side's histograms are read to the end only once nothing
  // writes them.
  if (opts_.aggregate)
    tracer_->detach();
  end_interval(true);

  // The endpoint answers one request per connection (`Connection: close`)
  // and its thread watches the stop eventfd in every wait, so stopping waits
  // at most for a render in progress; on a thread of its own, even that
  // overlaps with the detach below.
  std::thread stop_metrics([server = std::move(metrics_server_)]() mutable { server.reset(); });
  companion_.reset();
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_suppressed_);
  // Each record is written or added, but both under --aggregate-check.
  const uint64_t reported = losses_.counter(NETLATD_CNT_EMITTED) + (opts_.aggregate_check ? 0 : kernel_added_);
  spdlog::info("detaching: {} packets matched, {} queued on a socket, {} returned to a reader and reported; "
               "losses: {}",
               losses_.counter(NETLATD_CNT_MATCHED), losses_.counter(NETLATD_CNT_QUEUED), reported,
               losses_.summary());
  int status = 0;
  if (opts_.aggregate_check) {
    const uint64_t ring_full = tracer_->drop_totals()[NETLATD_DROP_RINGBUF_FULL];
    const std::string diff = compare_aggregates(check_kernel_, check_ring_);
    if (!diff.empty() && ring_full) {
      spdlog::warn("aggregate check: not decided, {} records did not fit the ring ({})", ring_full, diff);
    } else if (!diff.empty()) {
      spdlog::error("aggregate check failed: {}", diff);
      status = static_cast<int>(ExitCode::Software);
    } else {
      spdlog::info("aggregate check: the kernel side's histograms equal its {} records' ({} added)",
                   check_ring_.packets(), check_kernel_.packets());
    }
  }
  tracer_.reset();
  if (!sink_->flush(500))
    spdlog::warn("output {} did not take the last lines within 500 ms; {} lines dropped in all",
                 opts_.output == "-" ? "(standard output)" : opts_.output, sink_dropped());
  sink_.reset();
  stop_metrics.join();
  return status;
}

}  // namespace

int run_daemon(const Options &opts, Companion companion) {
  kept_cgroup_dirs(opts);
  require_privileges();
  Fd netns(open_netns(opts.netns));
  std::map<std::string, uint32_t> ids;
  std::vector<std::string> left_out;
  auto traced = look_up_interfaces(opts.ifaces, opts.irqs, ids, left_out, netns.get());
  for (const TracedInterface &t : traced)
    if (!t.info)
      throw Error(ExitCode::NoInterface, "no such interface '" + t.name + "'" +
                                             (opts.netns.empty() ? "" : " in network namespace " + opts.netns));
  if (netns.get() >= 0)
    spdlog::info("tracing in network namespace {} ({}); its interfaces and the devices below them are looked up "
                 "there (rtnetlink), their IRQ lines {}",
                 opts.netns, netns_path(opts.netns), opts.irqs.empty() ? "through their PCI devices" : "as --irq gives");
  if (traced.empty())
    throw Error(ExitCode::NoInterface, opts.ifaces.front() == "irq" ? "--iface irq: no interface has IRQ lines"
                                                                     : "--iface all: no interface");
  for (const std::string &name : left_out)
    spdlog::warn("interface {} is not traced: netlatd traces at most {} interfaces in a run", name, kMaxIfaces);

  auto features = probe_kernel_features();
  if (!features->has_vmlinux_btf())
    throw Error(ExitCode::Unavailable, "the kernel has no BTF (/sys/kernel/btf/vmlinux); netlatd needs CONFIG_DEBUG_INFO_BTF");
  if (!features->has_ringbuf())
    throw Error(ExitCode::Unavailable, "the kernel has no BPF ring buffer (needs Linux 5.8+)");
  HookPlan plan = choose_hooks(*features);
  if (!plan.runnable())
    throw Error(ExitCode::Unavailable,
                fmt::format("no usable hook for {} on this kernel (see netlatd --check)", fmt::join(plan.missing_required, ", ")));

  Service service(opts, std::move(features), std::move(plan), std::move(traced), std::move(ids), netns.get(),
                  std::move(companion));
  return service.run();
}

}  // namespace netlatd
