#include "netlatd/daemon.hpp"

#include <linux/capability.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "netlatd/demo.hpp"
#include "netlatd/errors.hpp"
#include "netlatd/interface.hpp"
#include "netlatd/sink.hpp"
#include "netlatd/tracer.hpp"
#include "netlatd/version.hpp"

namespace netlatd {
namespace {

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

const char *drop_name(int i) {
  switch (i) {
  case NETLATD_DROP_RINGBUF_FULL: return "ringbuf_full";
  case NETLATD_DROP_INFLIGHT_FULL: return "inflight_full";
  case NETLATD_DROP_SOCK_FIFO_FULL: return "sock_fifo_full";
  case NETLATD_DROP_SOCKETS_FULL: return "sockets_full";
  case NETLATD_DROP_STACK_DROPPED: return "stack_dropped";
  case NETLATD_DROP_UNTRACKED_DEQUEUE: return "untracked_dequeue";
  case NETLATD_DROP_UNJOINED: return "unjoined_reused";
  }
  return "unknown";
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

class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

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

void require_privileges() {
  if (geteuid() == 0)
    return;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) == 0) {
    auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1u; };
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
    if ((has(CAP_BPF) && has(CAP_PERFMON)) || has(CAP_SYS_ADMIN))
      return;
  }
  throw Error(ExitCode::NoPermission, "must run as root or with CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before 5.8)");
}

void fill_stage_hooks(ReportHeader &h, const HookPlan &plan, size_t irq_lines) {
  for (Stage s : kAllStages) {
    auto &sh = h.stages[static_cast<size_t>(s)];
    StageHookLabels l = stage_hooks(plan, s);
    sh.start_hook = l.start;
    sh.end_hook = l.end;
    sh.applicable = !l.start.empty() && !l.end.empty();
    if (!sh.applicable)
      sh.why_not = "no usable hook on this kernel";
    if (s == Stage::Irq && sh.applicable && irq_lines == 0) {
      sh.applicable = false;
      sh.why_not = "the interface has no IRQ lines (lo, veth and tun deliver in software)";
    }
  }
}

int run_check(const Options &opts, const KernelFeatures &features) {
  std::printf("netlatd %s on Linux %s\n", kVersion, features.kernel_release().c_str());
  bool btf = features.has_vmlinux_btf();
  bool ring = features.has_ringbuf();
  std::printf("  %-28s %s\n", "BTF (/sys/kernel/btf/vmlinux)", btf ? "yes" : "NO");
  std::printf("  %-28s %s\n", "BPF ring buffer", ring ? "yes" : "NO");
  HookPlan plan = choose_hooks(features);
  std::printf("\nhook points (first usable candidate wins):\n");
  for (const HookChoice &c : plan.choices) {
    std::string cands;
    for (const HookCandidate &cand : c.point->candidates) {
      bool ok = features.can_attach(cand.kind, cand.target);
      cands += fmt::format("{}{}{}", cands.empty() ? "" : ", ", hook_label(cand), ok ? "" : " (no)");
    }
    std::printf("  %-24s %-36s [%s]%s\n", std::string(c.point->name).c_str(),
                c.chosen ? hook_label(*c.chosen).c_str() : "-", cands.c_str(),
                !c.chosen && c.point->required ? "  REQUIRED" : "");
  }
  size_t irqs = 0;
  if (!opts.iface.empty()) {
    auto info = lookup_interface(opts.iface);
    if (info) {
      irqs = info->irqs.size();
      std::printf("\ninterface %s: ifindex %u, driver %s, IRQ lines [%s]\n", info->name.c_str(), info->ifindex,
                  info->driver.empty() ? "-" : info->driver.c_str(), fmt::format("{}", fmt::join(info->irqs, " ")).c_str());
    } else {
      std::printf("\ninterface %s: NOT FOUND\n", opts.iface.c_str());
    }
  }
  ReportHeader h;
  fill_stage_hooks(h, plan, opts.iface.empty() ? 1 : irqs);
  std::printf("\nstages:\n");
  for (Stage s : kAllStages) {
    const auto &sh = h.stages[static_cast<size_t>(s)];
    if (sh.applicable)
      std::printf("  %-14s %s -> %s\n", std::string(stage_name(s)).c_str(), sh.start_hook.c_str(), sh.end_hook.c_str());
    else
      std::printf("  %-14s not applicable: %s\n", std::string(stage_name(s)).c_str(), sh.why_not.c_str());
  }
  bool ok = btf && ring && plan.runnable();
  if (!ok) {
    std::string why = !btf ? "no kernel BTF" : !ring ? "no BPF ring buffer (5.8+)" : "no hook for " + fmt::format("{}", fmt::join(plan.missing_required, ", "));
    std::printf("\nnetlatd cannot run here: %s\n", why.c_str());
    return static_cast<int>(ExitCode::Unavailable);
  }
  std::printf("\nnetlatd can run here.\n");
  return 0;
}

int run_daemon(const Options &opts) {
  require_privileges();
  auto iface = lookup_interface(opts.iface);
  if (!iface)
    throw Error(ExitCode::NoInterface, "no such interface '" + opts.iface + "'");

  auto features = probe_kernel_features();
  if (!features->has_vmlinux_btf())
    throw Error(ExitCode::Unavailable, "the kernel has no BTF (/sys/kernel/btf/vmlinux); netlatd needs CONFIG_DEBUG_INFO_BTF");
  if (!features->has_ringbuf())
    throw Error(ExitCode::Unavailable, "the kernel has no BPF ring buffer (needs Linux 5.8+)");
  HookPlan plan = choose_hooks(*features);
  if (!plan.runnable())
    throw Error(ExitCode::Unavailable,
                fmt::format("no usable hook for {} on this kernel (see netlatd --check)", fmt::join(plan.missing_required, ", ")));

  ReportHeader header;
  header.host = hostname();
  header.iface = iface->name;
  header.ifindex = static_cast<int>(iface->ifindex);
  header.ports = opts.ports;
  header.kernel = features->kernel_release();
  header.version = kVersion;
  fill_stage_hooks(header, plan, iface->irqs.size());
  for (const HookChoice &c : plan.choices)
    spdlog::info("hook {}: {}", c.point->name, c.chosen ? hook_label(*c.chosen) : "none");

  // Signals are blocked before any thread starts, so only the signalfd sees them.
  Fd sigfd(make_signalfd());
  LineSink sink(opts.output);
  std::unique_ptr<DemoTraffic> demo;

  IntervalAggregator agg;
  RateLimit outlier_limit(opts.outliers_max_per_sec);
  int64_t mono_to_real = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
  uint64_t outliers_suppressed = 0;
  auto on_record = [&](const netlatd_packet &p) {
    agg.add(p);
    if (opts.outliers_over_ns) {
      auto total = stage_duration(p, Stage::Total);
      if (total && *total > *opts.outliers_over_ns) {
        if (outlier_limit.take(clock_ns(CLOCK_MONOTONIC)))
          sink.write(format_outlier_json_line(header, p, mono_to_real));
        else
          outliers_suppressed++;
      }
    }
  };

  const int64_t t_start = clock_ns(CLOCK_MONOTONIC);
  TracerConfig tcfg;
  tcfg.ports = opts.ports;
  tcfg.ringbuf_bytes = opts.ringbuf_mb << 20;
  Tracer tracer(plan, tcfg, on_record);
  TraceTarget target{iface->ifindex, current_netns_inode(), iface->irqs};
  tracer.set_target(target);
  const bool live = tracer.wait_until_live(2000);
  const double attach_ms = static_cast<double>(clock_ns(CLOCK_MONOTONIC) - t_start) / 1e6;

  if (opts.demo)
    demo = std::make_unique<DemoTraffic>(opts.ports.front());

  Fd ep(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = sigfd.get();
  epoll_ctl(ep.get(), EPOLL_CTL_ADD, sigfd.get(), &ev);
  ev.data.fd = tracer.ring_epoll_fd();
  epoll_ctl(ep.get(), EPOLL_CTL_ADD, tracer.ring_epoll_fd(), &ev);

  if (!live)
    spdlog::warn("the hooks did not see a loopback self-test datagram within 2 s; they may not be live yet");
  spdlog::info("tracing {} (ifindex {}, {} IRQ lines) ports {}: {} programs attached in {:.1f} ms; ready", iface->name,
               iface->ifindex, iface->irqs.size(), fmt::join(opts.ports, ","), tracer.programs_attached(), attach_ms);
  sd_notify(0, "READY=1");
  uint64_t watchdog_usec = 0;
  bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;

  const int64_t interval_ns = static_cast<int64_t>(std::llround(opts.interval_s * 1e9));
  // 0 = run until signalled.
  const int64_t stop_at =
      opts.duration_s ? clock_ns(CLOCK_MONOTONIC) + static_cast<int64_t>(*opts.duration_s * 1e9) : 0;
  auto interval_start_wall = std::chrono::system_clock::now();
  int64_t next_report = clock_ns(CLOCK_MONOTONIC) + interval_ns;
  auto prev_drops = tracer.drop_totals();
  uint64_t prev_sink_dropped = 0, prev_outliers_suppressed = 0;
  uint64_t expired_inflight = 0, expired_unread = 0;
  uint64_t total_packets = 0;
  bool iface_present = true;

  auto report = [&](bool final) {
    tracer.poll(0);
    auto sweep = tracer.sweep(2000000000ull, 60000000000ull);
    expired_inflight += sweep.expired_inflight;
    expired_unread += sweep.expired_unread;
    auto drops = tracer.drop_totals();
    IntervalReport r;
    r.start = interval_start_wall;
    r.end = std::chrono::system_clock::now();
    r.data = &agg;
    r.final = final;
    for (int i = 0; i < NETLATD_DROP_COUNT; i++)
      r.drops[drop_name(i)] = drops[i] - prev_drops[i];
    r.drops["unjoined_expired"] = sweep.expired_inflight;
    r.drops["unread_expired"] = sweep.expired_unread;
    uint64_t sd = sink.dropped();
    r.drops["output_dropped"] = sd - prev_sink_dropped;
    r.drops["outliers_rate_limited"] = outliers_suppressed - prev_outliers_suppressed;
    prev_drops = drops;
    prev_sink_dropped = sd;
    prev_outliers_suppressed = outliers_suppressed;
    total_packets += agg.packets();
    sink.write(opts.format == OutputFormat::Json ? format_json_line(header, r) : format_text(header, r));
    agg.reset();
    interval_start_wall = r.end;
    mono_to_real = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
    sd_notify(0, fmt::format("STATUS=tracing {} ports {}: {} packets so far", header.iface, fmt::join(header.ports, ","),
                             total_packets)
                     .c_str());
  };

  // The interface may go away (module unload, veth deleted) and come back
  // with another ifindex: keep tracing without a restart.
  auto check_interface = [&] {
    auto now = lookup_interface(opts.iface);
    if (!now && iface_present) {
      spdlog::warn("interface {} disappeared; waiting for it to come back", opts.iface);
      iface_present = false;
      target.ifindex = 0;
      tracer.set_target(target);
    } else if (now && (!iface_present || now->ifindex != target.ifindex)) {
      spdlog::warn("interface {} is back (ifindex {}); tracing resumes", opts.iface, now->ifindex);
      iface_present = true;
      target.ifindex = now->ifindex;
      target.irqs = now->irqs;
      tracer.set_target(target);
      header.ifindex = static_cast<int>(now->ifindex);
    }
  };

  int64_t next_iface_check = clock_ns(CLOCK_MONOTONIC) + 1000000000ll;
  for (;;) {
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    int64_t wake = std::min<int64_t>(next_report, now + 100000000ll);  // drain at least every 100 ms
    if (stop_at)
      wake = std::min(wake, stop_at);
    int timeout_ms = static_cast<int>(std::max<int64_t>(0, (wake - now + 999999) / 1000000));
    epoll_event events[4];
    int n = epoll_wait(ep.get(), events, 4, timeout_ms);
    if (n < 0 && errno != EINTR)
      throw Error(ExitCode::Software, std::string("epoll_wait: ") + std::strerror(errno));
    tracer.poll(0);

    bool stop = false;
    signalfd_siginfo si{};
    while (read(sigfd.get(), &si, sizeof(si)) == sizeof(si)) {
      if (si.ssi_signo == SIGHUP) {
        spdlog::info("SIGHUP: reopening output");
        sink.reopen();
      } else {
        spdlog::info("{}: flushing and detaching", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        stop = true;
      }
    }
    now = clock_ns(CLOCK_MONOTONIC);
    if (stop_at && now >= stop_at)
      stop = true;
    if (stop) {
      sd_notify(0, "STOPPING=1");
      report(true);
      break;
    }
    if (now >= next_report) {
      report(false);
      next_report += interval_ns;
      if (next_report <= now)
        next_report = now + interval_ns;
    }
    if (now >= next_iface_check) {
      check_interface();
      next_iface_check = now + 1000000000ll;
    }
    if (watchdog)
      sd_notify(0, "WATCHDOG=1");
  }
  demo.reset();
  auto c = tracer.counter_totals();
  auto d = tracer.drop_totals();
  spdlog::info("detaching: {} packets matched, {} queued on a socket, {} returned to a reader and reported; "
               "losses: {}",
               c[NETLATD_CNT_MATCHED], c[NETLATD_CNT_QUEUED], c[NETLATD_CNT_EMITTED], fmt::join(d, " "));
  if (!sink.flush(500))
    spdlog::warn("output did not drain within 500 ms at exit");
  return 0;
}

}  // namespace netlatd
