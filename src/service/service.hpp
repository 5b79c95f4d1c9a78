#pragma once
// The running daemon's parts, wired to one event loop (daemon.cpp starts it;
// service.cpp runs it, service_reload.cpp applies a SIGHUP).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "netlatd/base/clock.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/kernel/hooks.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/model/aggregate_check.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/model/losses.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/net/watch.hpp"
#include "netlatd/output/outliers.hpp"
#include "netlatd/output/publisher.hpp"
#include "netlatd/output/sink.hpp"
#include "netlatd/service/daemon.hpp"
#include "netlatd/service/followed_interfaces.hpp"
#include "netlatd/service/interval_reporter.hpp"
#include "netlatd/service/loop.hpp"
#include "netlatd/service/notify.hpp"
#include "netlatd/service/options.hpp"

namespace netlatd {

inline constexpr int64_t kSecond = 1000000000ll;
// A UDP datagram whose stash entry is older than this never reached its
// socket's data-ready call (or a read took it first): its stamps are lost.
inline constexpr uint64_t kInflightMaxAgeNs = 2000000000ull;
// ... and one queued on its socket this long ago was never read.
inline constexpr uint64_t kUnreadMaxAgeNs = 60000000000ull;

// Blocks the signals the daemon handles and returns a signalfd for them.
int make_signalfd();

// The --cgroup directories; one that names no cgroup is a usage error,
// given before anything is opened or logged.
std::vector<std::string> kept_cgroup_dirs(const Options &opts);

// The daemon from READY=1 to exit: one thread drains the ring buffer, writes
// the interval lines, follows the interface, answers signals and feeds the
// watchdog; the sink and the metrics endpoint have a thread each. Each part
// is a class of its own; this wires them to the loop.
class Service {
public:
  Service(const Options &opts, std::unique_ptr<KernelFeatures> features, HookPlan plan,
          std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids, int netns_fd,
          Companion companion);
  int run();

private:
  void start_tracer(std::vector<std::string> cgroup_dirs);
  void log_ready(bool live, double attach_ms) const;
  void watch_events();
  void start_timers(int64_t now);
  void on_signals();
  void every_second();
  int finish();

  void on_record(const netlatd_packet &p);
  void drain_kernel();  // --aggregate: what the kernel side added, into the interval
  void end_interval(bool final);
  void publish_metrics();
  void set_status();
  uint64_t sink_dropped() const { return retired_sink_dropped_ + sink_->dropped(); }
  // After the interfaces were looked up: the header, in the metrics too.
  void use_interfaces();

  void reload();
  void apply(Options next);
  void apply_output(Options &next, std::vector<std::string> &changed);
  void apply_interfaces(const Options &next, std::vector<std::string> &changed);
  void apply_outliers(const Options &next, std::vector<std::string> &changed);
  void apply_metrics_listen(Options &next, std::vector<std::string> &changed);

  Options opts_;
  HookPlan plan_;
  ReportHeader header_;
  Notifier notifier_;

  // Signals are blocked before any thread starts, so only the signalfd sees them.
  Fd sigfd_{make_signalfd()};

  MetricsPublisher metrics_;  // --metrics-listen
  CgroupNames cgroup_names_;

  std::unique_ptr<LineSink> sink_;
  uint64_t retired_sink_dropped_ = 0;  // drops of sinks replaced by a reload

  IntervalReporter interval_;
  AggregateCheck check_;  // --aggregate-check
  bool drain_late_warned_ = false;
  uint64_t kernel_added_ = 0;  // --aggregate: records the kernel side added, since start
  OutlierLimiter outliers_;
  ClockOffset mono_to_real_;  // see measure_realtime_offset

  std::unique_ptr<Tracer> tracer_;
  FollowedInterfaces interfaces_;
  Companion make_companion_;
  std::shared_ptr<void> companion_;  // e.g. --demo's traffic

  // Drained at least every 100 ms.
  EventLoop loop_{kSecond / 10};
  EventLoop::TimerId report_timer_ = 0;
  Losses losses_;
};

}  // namespace netlatd
