#include "service.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/version.hpp"

namespace netlatd {
namespace {

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

TracerConfig tracer_config(const Options &opts, std::vector<std::string> cgroup_dirs) {
  TracerConfig c;
  c.ports = opts.ports;
  c.sample = opts.sample;
  c.count_ops = opts.count_ops;
  c.ringbuf_bytes = opts.ringbuf_mb << 20;
  c.stash_entries = opts.stash_entries;
  c.reader_cgroup = opts.by.cgroup;
  c.cgroup_dirs = std::move(cgroup_dirs);
  c.aggregate = opts.aggregate;
  c.aggregate_check = opts.aggregate_check;
  c.agg_by = opts.by;
  return c;
}

// --aggregate-check adds every record in the kernel and writes it too; the
// daemon picks the outliers among them.
std::optional<uint64_t> kernel_outliers(const Options &opts) {
  return opts.aggregate_check ? std::nullopt : opts.outliers_over_ns;
}

// The verifier's share of the start, and the program nearest its budget.
std::string verifier_text(const Tracer::VerifierWalk &walk) {
  if (!walk.most)
    return "";
  return fmt::format(" (verifier {:.0f} ms; most walked: {}, {} instructions, {:.0f}% of its budget)", walk.load_ms,
                     walk.most_program, walk.most,
                     100.0 * static_cast<double>(walk.most) / static_cast<double>(Tracer::kVerifierBudget));
}

}  // namespace

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

Service::Service(const Options &opts, std::unique_ptr<KernelFeatures> features, HookPlan plan,
                 std::vector<TracedInterface> traced, std::map<std::string, uint32_t> ids, int netns_fd,
                 Companion companion)
    : opts_(opts), plan_(std::move(plan)),
      metrics_(kVersion, features->kernel_release(), opts.metrics_resolution, opts.by),
      interval_(opts.interval_s, opts.by), outliers_(opts.outliers_over_ns, opts.outliers_max_per_sec),
      interfaces_(InterfaceFollower(std::move(traced), std::move(ids), netns_fd), plan_),
      make_companion_(std::move(companion)), losses_(!opts.cgroups.empty(), plan_.has(Point::NapiPoll)) {
  header_.host = hostname();
  header_.ports = opts_.ports;
  header_.sample = opts_.sample;
  header_.kernel = features->kernel_release();
  // The probe holds the kernel's whole BTF (~5 MiB on 6.18); nothing needs it
  // once the plan is made.
  features.reset();
  header_.version = kVersion;
  for (const HookChoice &c : plan_.choices) {
    if (const std::string_view why = plan_.stood_in(c.point->point); !why.empty())
      spdlog::info("hook {}: none ({})", c.point->name, why);
    else
      spdlog::info("hook {}: {}", c.point->name, c.chosen ? hook_label(*c.chosen) : "none");
  }
  check_.set_breakdown(opts_.by);
  use_interfaces();
  interfaces_.log_start();
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
    interval_.aggregate().add(k);
    metrics_.delta().add(k);
    if (opts_.aggregate_check)
      check_.add(k);
  }
}

void Service::on_record(const netlatd_packet &p) {
  const StageDurations d = stage_durations(p);
  if (p.agg_checked) {
    // --aggregate-check: the kernel side added it to the interval; kept to
    // check that, and shown as an outlier like any record.
    check_.add(p, d);
  } else {
    interval_.aggregate().add(p, d);
    metrics_.delta().add(p, d);
  }
  // A stalled consumer's full queue: the line is counted as dropped, not made.
  if (outliers_.is_outlier(d) && outliers_.admit(clock_ns(CLOCK_MONOTONIC)) && !sink_->drop_if_full())
    sink_->write(format_outlier_json_line(header_, p, mono_to_real_.offset_ns, d));
}

void Service::publish_metrics() {
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_.rate_limited());
  metrics_.publish(losses_, cgroup_names_, header_.iface_names);
}

void Service::set_status() {
  notifier_.status(interval_.status(header_, interfaces_.present(), traces_several_ifaces(opts_.ifaces),
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
  // The last line counts every packet still held, whatever its age: one
  // whose read, or whose queueing, netlatd will not see. Not counted, a
  // datagram whose stamps a read could not take (6.18: a reader dequeued it
  // before its data-ready call) would leave that read untracked with its
  // loss counted nowhere (docs/OUTPUT.md, Drop reasons).
  const auto sweep = final ? tracer_->sweep(0, 0) : tracer_->sweep(kInflightMaxAgeNs, kUnreadMaxAgeNs);
  losses_.add_expired(sweep.expired_inflight, sweep.expired_unread);
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_.rate_limited());
  // Kept through a stalled consumer: outlier lines queued before it make room.
  sink_->write_kept(
      interval_.finish(header_, losses_, opts_.format, cgroup_names_, final, std::chrono::system_clock::now()));
  publish_metrics();
  mono_to_real_ = choose_realtime_offset(mono_to_real_, measure_realtime_offset(clock_ns));
  loop_.set_due(report_timer_, clock_ns(CLOCK_MONOTONIC) + interval_.length_ns());
  if (!final)
    set_status();
}

void Service::use_interfaces() {
  interfaces_.update(header_, opts_.ifaces);
  metrics_.set_header(header_);
}

int Service::run() {
  std::vector<std::string> cgroup_dirs = kept_cgroup_dirs(opts_);
  // Bound before anything is attached: a busy port fails the start with
  // nothing to undo.
  metrics_.serve(opts_.metrics_listen);
  sink_ = std::make_unique<LineSink>(opts_.output, opts_.output_group);
  mono_to_real_ = measure_realtime_offset(clock_ns);
  start_tracer(std::move(cgroup_dirs));
  notifier_.ready();
  set_status();

  interval_.start(std::chrono::system_clock::now());
  losses_.start(read_kernel_counts(*tracer_));
  watch_events();
  start_timers(clock_ns(CLOCK_MONOTONIC));
  loop_.run();
  return finish();
}

void Service::start_tracer(std::vector<std::string> cgroup_dirs) {
  const int64_t t_start = clock_ns(CLOCK_MONOTONIC);
  tracer_ = std::make_unique<Tracer>(plan_, tracer_config(opts_, std::move(cgroup_dirs)),
                                     [this](const netlatd_packet &p) { on_record(p); });
  tracer_->set_aggregate_outliers(kernel_outliers(opts_));
  tracer_->set_target(interfaces_.target());
  interfaces_.on_retarget([this](const TraceTarget &t) { tracer_->set_target(t); });
  const bool live = tracer_->wait_until_live(2000);
  const double attach_ms = static_cast<double>(clock_ns(CLOCK_MONOTONIC) - t_start) / 1e6;

  interfaces_.watch_links();
  if (make_companion_)
    companion_ = make_companion_();
  log_ready(live, attach_ms);
}

void Service::log_ready(bool live, double attach_ms) const {
  if (!live)
    spdlog::warn("the hooks did not see a loopback self-test datagram within 2 s; they may not be live yet");
  const std::string verifier = verifier_text(tracer_->verifier_walk());
  const TraceTarget &target = interfaces_.target();
  if (traces_several_ifaces(opts_.ifaces))
    spdlog::info("tracing {} ({} interfaces, {} devices, {} IRQ lines) ports {}: {} programs attached in {:.1f} ms{}; "
                 "ready",
                 header_.iface, interfaces_.present(), target.devices.size(), target.irqs.size(),
                 fmt::join(opts_.ports, ","), tracer_->programs_attached(), attach_ms, verifier);
  else
    spdlog::info("tracing {} (ifindex {}, {} IRQ lines) ports {}: {} programs attached in {:.1f} ms{}; ready",
                 header_.iface, header_.ifindex, target.irqs.size(), fmt::join(opts_.ports, ","),
                 tracer_->programs_attached(), attach_ms, verifier);
  spdlog::info("UDP stash: {}", stash_description(static_cast<uint32_t>(tracer_->stash_entries()), plan_.udp_join));
  if (const SlotsDescription slots = slots_description(plan_.udp_join, read_optmem_max()); !slots.text.empty()) {
    if (slots.room)
      spdlog::info("UDP slots by queue order: {}", slots.text);
    else
      spdlog::warn("UDP slots by queue order: {}", slots.text);
  }
  if (opts_.aggregate)
    spdlog::info("--aggregate{}: the kernel side keeps the histograms ({} KiB of kernel memory); records only for "
                 "outliers and what it cannot add",
                 opts_.aggregate_check ? "-check" : "", tracer_->aggregate_bytes() / 1024);
}

// What is watched, and what each event does. The ring is drained after every
// wait; a poll that spent its budget (Tracer::kPollBudget) leaves the next
// wait no time, so a flood cannot hold off signals and timers.
void Service::watch_events() {
  loop_.drain([this] { return tracer_->poll(0) >= Tracer::kPollBudget; });
  loop_.watch(tracer_->ring_epoll_fd(), nullptr);
  if (interfaces_.link_fd() >= 0)
    loop_.watch(interfaces_.link_fd(), [this] {
      if (interfaces_.on_link_events(header_, opts_.ifaces, opts_.irqs)) {
        metrics_.set_header(header_);
        set_status();
      }
    });
  loop_.watch(sigfd_.get(), [this] { on_signals(); });
}

void Service::on_signals() {
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
}

void Service::start_timers(int64_t now) {
  if (opts_.duration_s)  // without: until signalled
    loop_.at(now + static_cast<int64_t>(*opts_.duration_s * 1e9), [this](int64_t) { loop_.stop(); });
  report_timer_ = loop_.at(now + interval_.length_ns(), [this](int64_t) { end_interval(false); });
  loop_.every(kSecond, now + kSecond, [this] { every_second(); });
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
}

// The fallback for link events rtnetlink did not deliver; and the kept
// cgroups, one of which a restarted unit may have made again.
void Service::every_second() {
  if (interfaces_.check(header_, opts_.ifaces, opts_.irqs)) {
    metrics_.set_header(header_);
    set_status();
  }
  for (const Tracer::CgroupChange &c : tracer_->refresh_cgroup_filters()) {
    const std::string &path = opts_.cgroups.at(c.index);  // a reload cannot change them
    if (c.what == Tracer::CgroupChange::Gone)
      spdlog::warn("--cgroup {}: removed; no reader's records are kept for it until it is made again", path);
    else
      spdlog::info("--cgroup {}: made again, following the new cgroup", path);
  }
}

int Service::finish() {
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
  std::thread stop_metrics([server = metrics_.release_server()]() mutable { server.reset(); });
  companion_.reset();
  losses_.read(read_kernel_counts(*tracer_), sink_dropped(), outliers_.rate_limited());
  // Each record is written or added, but both under --aggregate-check.
  const uint64_t reported = losses_.counter(NETLATD_CNT_EMITTED) + (opts_.aggregate_check ? 0 : kernel_added_);
  spdlog::info("detaching: {} packets matched, {} queued on a socket, {} returned to a reader and reported; "
               "losses: {}",
               losses_.counter(NETLATD_CNT_MATCHED), losses_.counter(NETLATD_CNT_QUEUED), reported,
               losses_.summary());
  const int status = opts_.aggregate_check ? check_.log_verdict(tracer_->drop_totals()[NETLATD_DROP_RINGBUF_FULL]) : 0;
  tracer_.reset();
  // The last lines (the final interval line among them) wait for a
  // consumer that still reads, however slowly; one that takes nothing for
  // 500 ms does not hold the exit longer.
  if (!sink_->flush_while_taken(500))
    spdlog::warn("output {} took no line for 500 ms; the last lines are dropped, {} in all",
                 opts_.output == "-" ? "(standard output)" : opts_.output, sink_dropped());
  sink_.reset();
  stop_metrics.join();
  return status;
}

}  // namespace netlatd
