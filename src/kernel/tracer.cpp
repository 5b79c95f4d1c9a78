#include "netlatd/kernel/tracer.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdarg>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include "netlatd.skel.h"
#include "netlatd/stage_math.h"
#include "netlatd/base/clock.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/kernel/ksyms.hpp"
#include "netlatd/decode/record.hpp"
#include "netlatd/kernel/ring.hpp"

namespace netlatd {

static_assert(sizeof(netlatd_rx) == 48, "netlatd_rx layout (abi.h)");
static_assert(sizeof(netlatd_stash_entry) == 64, "a stash entry is one cache line");
static_assert(sizeof(netlatd_watch_key) == 12 && sizeof(netlatd_watch) == 8, "watch layout (abi.h)");
static_assert(sizeof(netlatd_tcp_key) == 16 && sizeof(netlatd_tcp_seg) == 64, "tcp_segs layout (abi.h)");

namespace {

std::mutex g_libbpf_mu;
std::string g_last_warning;
std::string g_verifier_verdict;  // the last verifier log's verdict, with its program


int libbpf_to_spdlog(enum libbpf_print_level level, const char *fmt, va_list args) {
  va_list again;
  va_copy(again, args);
  int n = vsnprintf(nullptr, 0, fmt, args);
  std::string line(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0)
    vsnprintf(line.data(), line.size() + 1, fmt, again);
  va_end(again);
  while (!line.empty() && line.back() == '\n')
    line.pop_back();
  if (level == LIBBPF_WARN) {
    std::lock_guard lock(g_libbpf_mu);
    g_last_warning = line;
    if (std::string verdict = verifier_verdict(line); !verdict.empty())
      g_verifier_verdict = verdict;
  }
  spdlog::debug("{}", line);
  return n;
}

// Highest possible NUMA node + 1 (the kernel's nr_node_ids): how many
// per-node producer queues each UDP socket has on 6.18.
uint32_t numa_nodes() {
  std::FILE *f = std::fopen("/sys/devices/system/node/possible", "r");
  if (!f)
    return 1;
  char buf[128] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // "0", "0-1", "0,2-3": the last number is the highest node.
  long last = 0;
  for (char *p = buf; *p;) {
    char *end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p) {
      p++;
      continue;
    }
    last = v;
    p = end;
  }
  return static_cast<uint32_t>(last + 1);
}

}  // namespace

uint32_t sample_below(uint32_t n) { return n <= 1 ? 0 : static_cast<uint32_t>((uint64_t{1} << 32) / n); }

namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace

void route_libbpf_logs() { libbpf_set_print(libbpf_to_spdlog); }

// A verifier log (libbpf warns it whole: "prog 'x': -- BEGIN PROG LOAD LOG
// --\n...\n-- END PROG LOAD LOG --") says why in the line before its
// "processed N insns" summary, or in its last line.
std::string verifier_verdict(const std::string &log) {
  const size_t begin = log.find("-- BEGIN PROG LOAD LOG --");
  if (begin == std::string::npos)
    return "";
  std::string prog;
  if (const size_t at = log.rfind("prog '", begin); at != std::string::npos) {
    const size_t end = log.find('\'', at + 6);
    if (end != std::string::npos && end < begin)
      prog = log.substr(at + 6, end - at - 6);
  }
  std::string verdict;
  size_t at = log.find('\n', begin);
  while (at != std::string::npos) {
    const size_t next = log.find('\n', at + 1);
    std::string line = log.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (line.rfind("processed ", 0) == 0 || line.rfind("-- END PROG LOAD LOG", 0) == 0)
      break;
    if (!line.empty())
      verdict = line;
    at = next;
  }
  if (verdict.empty())
    return "";
  return prog.empty() ? verdict : "program " + prog + ": " + verdict;
}

std::string last_libbpf_warning() {
  std::lock_guard lock(g_libbpf_mu);
  return g_last_warning;
}

struct Tracer::Impl {
  netlatd_bpf *skel = nullptr;
  std::unique_ptr<RingBuffer> ring;
  RecordFn on_record;
  RecordDecoder decoder;  // the ring's records in ring order
  uint64_t last_prune_ns = 0;
  static constexpr uint64_t kReaderIdleNs = 60'000'000'000ull;
  int ncpus = 1;
  std::vector<std::pair<std::string, bpf_program *>> programs;  // hook label, program
  Tracer::VerifierWalk walk;
  std::set<std::tuple<uint32_t, uint32_t, uint16_t>> watching;   // keys in `watch`: netns, ifindex, vlan
  // --cgroup: each kept directory and the inode of the cgroup the map holds
  // for it (0: the directory was gone when last looked at).
  std::vector<std::pair<std::string, uint64_t>> cgroup_held;
  // --aggregate (0 series: off)
  uint32_t agg_by = 0, agg_nseries = 0;
  std::vector<uint16_t> agg_ports;
  // One block read at a time (55 KiB), and the zeros it is reset with.
  std::unique_ptr<netlatd_agg_block> agg_block, agg_blank;

  ~Impl() {
    ring.reset();
    if (skel)
      netlatd_bpf__destroy(skel);
  }

  // Under a flood the ring fills as fast as it is drained: without a
  // budget (kPollBudget, about 30 ms of records at the daemon's cost per
  // record) the drain loop would not get back to signals, rtnetlink, the
  // report interval or the watchdog for seconds (a SIGHUP waited 3 s in
  // the soak). handle() says false when the budget is spent: the ring
  // stops after that record (already handled).
  int budget_left = kPollBudget;

  bool handle(const void *data, size_t size) {
    netlatd_packet p;
    switch (decoder.decode(data, size, p)) {
    case RecordDecoder::Kind::Packet: on_record(p); break;
    case RecordDecoder::Kind::Reader: break;
    case RecordDecoder::Kind::Unnamed:
      // The kernel side could not name the reader ahead of it (the ring
      // was full): left out rather than guessed, counted as ringbuf_full.
      break;
    case RecordDecoder::Kind::Malformed: break;
    }
    return --budget_left > 0;
  }

  template <size_t N>
  std::array<uint64_t, N> sum_percpu(bpf_map *map) const {
    // One block of N counts per CPU (netlatd_drop_block, netlatd_counter_block).
    std::array<uint64_t, N> out{};
    std::vector<uint64_t> values(static_cast<size_t>(ncpus) * N);
    const uint32_t zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(map), &zero, values.data()) != 0)
      return out;
    for (size_t cpu = 0; cpu < static_cast<size_t>(ncpus); cpu++)
      for (size_t i = 0; i < N; i++)
        out[i] += values[cpu * N + i];
    return out;
  }
};

Tracer::Tracer(const HookPlan &plan, const TracerConfig &config, RecordFn on_record)
    : impl_(std::make_unique<Impl>()) {
  impl_->on_record = std::move(on_record);
  impl_->ncpus = libbpf_num_possible_cpus();
  if (impl_->ncpus <= 0)
    throw Error(ExitCode::Software, "cannot count possible CPUs");

  impl_->skel = netlatd_bpf__open();
  if (!impl_->skel)
    throw Error(ExitCode::Unavailable, "cannot open the BPF object: " + errno_text(errno));
  netlatd_bpf *skel = impl_->skel;

  if (config.ports.size() > NETLATD_MAX_PORTS)
    throw Error(ExitCode::Usage, "too many ports");
  for (size_t i = 0; i < config.ports.size(); i++)
    skel->rodata->targ_ports[i] = config.ports[i];
  skel->rodata->targ_nports = static_cast<__u32>(config.ports.size());
  skel->rodata->targ_sample_below = sample_below(config.sample);
  skel->rodata->targ_wakeup_bytes = config.ringbuf_bytes / 4;
  skel->rodata->targ_reader_cgroup = config.reader_cgroup;
  if (config.cgroup_dirs.size() > NETLATD_MAX_CGROUP_FILTERS)
    throw Error(ExitCode::Usage, "--cgroup: at most " + std::to_string(NETLATD_MAX_CGROUP_FILTERS) + " cgroups");
  skel->rodata->targ_ncgroup_filters = static_cast<__u32>(config.cgroup_dirs.size());
  skel->rodata->targ_udp_join = static_cast<__u32>(plan.udp_join);
  // fentry runs before the datagram is queued: its slot exists before any
  // read can take it.
  skel->rodata->targ_push_before_queue = plan.label(Point::UdpEnqueue).rfind("fentry/", 0) == 0;
  skel->rodata->targ_numa_nodes = numa_nodes();
  skel->rodata->targ_preempt_count = static_cast<__u32>(plan.preempt_count);
  skel->rodata->targ_preempt_count_from_rq = plan.preempt_count_from_rq;
  const std::vector<uint64_t> wake_fns = kernel_text_addresses({"receiver_wake_function", "woken_wake_function"});
  skel->rodata->targ_receiver_wake_fn = wake_fns[0];
  skel->rodata->targ_woken_wake_fn = wake_fns[1];
  if (!skel->rodata->targ_receiver_wake_fn || !skel->rodata->targ_woken_wake_fn)
    spdlog::warn("kernel addresses hidden from netlatd (kernel.kptr_restrict, kernel.perf_event_paranoid; "
                 "CAP_SYSLOG shows them): readers asleep in a receive call are not recognised, so their sock_queue/oncpu split is left out where no hook gives the call's start");
  if (int err = bpf_map__set_max_entries(skel->maps.events, config.ringbuf_bytes))
    throw Error(ExitCode::Software, "cannot size the ring buffer: " + errno_text(err));
  if (config.aggregate) {
    uint32_t by = 0, nseries = 1;
    if (config.agg_by.dport) {
      by |= NETLATD_AGG_BY_DPORT;
      nseries *= static_cast<uint32_t>(std::max<size_t>(config.ports.size(), 1));
    }
    if (config.agg_by.proto) {
      by |= NETLATD_AGG_BY_PROTO;
      nseries *= 2;
    }
    if (config.agg_by.family) {
      by |= NETLATD_AGG_BY_FAMILY;
      nseries *= 2;
    }
    if (config.agg_by.cgroup || config.agg_by.iface)
      throw Error(ExitCode::Usage, "--aggregate: the kernel side splits by dport, proto and family only");
    skel->rodata->targ_aggregate = true;
    skel->rodata->targ_aggregate_check = config.aggregate_check;
    skel->rodata->targ_agg_by = by;
    skel->rodata->targ_agg_nseries = nseries;
    skel->rodata->targ_agg_ncpus = static_cast<__u32>(impl_->ncpus);
    impl_->agg_by = by;
    impl_->agg_nseries = nseries;
    impl_->agg_ports = config.ports;
    if (int err = bpf_map__set_max_entries(skel->maps.agg_blocks, 2 * nseries * static_cast<uint32_t>(impl_->ncpus)))
      throw Error(ExitCode::Software, "cannot size the --aggregate histograms: " + errno_text(err));
  }

  // Keep exactly the programs the plan chose; a chosen one missing from the
  // object is a build that does not match this source, never skipped.
  std::vector<bpf_program *> chosen;
  for (const HookChoice &c : plan.choices) {
    if (!c.chosen)
      continue;
    bpf_program *p = bpf_object__find_program_by_name(skel->obj, std::string(c.chosen->program).c_str());
    if (!p)
      throw Error(ExitCode::Software, "the BPF object has no program " + std::string(c.chosen->program) + " for " +
                                          hook_label(*c.chosen));
    chosen.push_back(p);
    impl_->programs.emplace_back(hook_label(*c.chosen), p);
  }
  bpf_program *prog;
  bpf_object__for_each_program(prog, skel->obj)
    bpf_program__set_autoload(prog, std::find(chosen.begin(), chosen.end(), prog) != chosen.end());

  {
    std::lock_guard lock(g_libbpf_mu);
    g_verifier_verdict.clear();
  }
  const uint64_t load_start = monotonic_ns();
  if (int err = netlatd_bpf__load(skel)) {
    std::string why = last_libbpf_warning();
    {
      std::lock_guard lock(g_libbpf_mu);
      if (!g_verifier_verdict.empty())
        why = "the verifier, " + g_verifier_verdict + "; -v shows its whole log";
    }
    throw Error(ExitCode::Unavailable,
                "the kernel refused netlatd's BPF programs: " + errno_text(err) + (why.empty() ? "" : " (" + why + ")"));
  }

  // What each program cost the verifier (bpf_prog_info.verified_insns,
  // 5.16+): a slow start names its program, and a program near the
  // verifier's budget shows before a kernel whose verifier walks further
  // refuses it.
  impl_->walk.load_ms = static_cast<double>(monotonic_ns() - load_start) / 1e6;
  for (bpf_program *p : chosen) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_prog_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0)
      continue;
    spdlog::debug("verifier: {}: {} instructions walked, {} loaded", bpf_program__name(p), info.verified_insns,
                  info.xlated_prog_len / 8);
    if (info.verified_insns > impl_->walk.most) {
      impl_->walk.most = info.verified_insns;
      impl_->walk.most_program = bpf_program__name(p);
    }
  }

  // Before any program runs: the kept cgroups, each held by the map from
  // its directory's descriptor.
  for (__u32 i = 0; i < config.cgroup_dirs.size(); i++) {
    const int dir = ::open(config.cgroup_dirs[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
      throw Error(ExitCode::Usage, "--cgroup: cannot open " + config.cgroup_dirs[i] + ": " + errno_text(errno));
    struct stat st{};
    const __u32 value = static_cast<__u32>(dir);
    const int err = ::fstat(dir, &st) != 0 ? -1 : bpf_map_update_elem(bpf_map__fd(skel->maps.cgroup_filter), &i, &value, BPF_ANY);
    const int saved = errno;
    ::close(dir);
    if (err)
      throw Error(ExitCode::Unavailable,
                  "--cgroup: the kernel refused cgroup " + config.cgroup_dirs[i] + ": " + errno_text(saved));
    impl_->cgroup_held.emplace_back(config.cgroup_dirs[i], st.st_ino);
  }

  for (bpf_program *p : chosen) {
    bpf_link *link = bpf_program__attach(p);
    if (!link) {
      int err = errno;
      for (bpf_link *l : links_)
        bpf_link__destroy(l);
      links_.clear();
      throw Error(ExitCode::Unavailable,
                  std::string("cannot attach ") + bpf_program__name(p) + ": " + errno_text(err));
    }
    links_.push_back(link);
  }

  try {
    impl_->ring = std::make_unique<RingBuffer>(bpf_map__fd(skel->maps.events), bpf_map__max_entries(skel->maps.events));
  } catch (const Error &) {
    for (bpf_link *l : links_)
      bpf_link__destroy(l);
    links_.clear();
    throw;
  }
}

const Tracer::VerifierWalk &Tracer::verifier_walk() const { return impl_->walk; }

Tracer::~Tracer() {
  // Links first, so no program runs while the maps go away.
  detach();
}

void Tracer::detach() {
  for (bpf_link *l : links_)
    bpf_link__destroy(l);
  links_.clear();
}

void Tracer::set_aggregate_outliers(std::optional<uint64_t> over_ns) {
  if (!impl_->agg_nseries)
    return;
  const uint64_t over1 = !over_ns ? 0 : *over_ns == UINT64_MAX ? UINT64_MAX : *over_ns + 1;
  __atomic_store_n(&impl_->skel->bss->agg_outlier_over1, over1, __ATOMIC_RELAXED);
}

uint64_t Tracer::aggregate_bytes() const {
  if (!impl_->agg_nseries)
    return 0;
  return uint64_t{2} * impl_->agg_nseries * sizeof(netlatd_agg_block) * static_cast<uint64_t>(impl_->ncpus);
}

bool Tracer::drain_aggregate(std::vector<KernelSeries> &out, int wait_ms) {
  out.clear();
  if (!impl_->agg_nseries)
    return true;
  netlatd_bpf *skel = impl_->skel;
  const size_t ncpus = static_cast<size_t>(impl_->ncpus);
  // Writers take the side after they count themselves begun (a full barrier
  // each side): one that saw the old epoch is in `begun` as read below.
  const uint32_t side = __atomic_fetch_add(&skel->bss->agg_epoch, 1, __ATOMIC_SEQ_CST) & 1;
  // The writers' counts lead each CPU's scratch (struct netlatd_agg_seq).
  const size_t stride = (bpf_map__value_size(skel->maps.agg_scratches) + 7) / 8 * 8;
  std::vector<unsigned char> scratch(stride * ncpus);
  const __u32 zero = 0;
  const int scratch_fd = bpf_map__fd(skel->maps.agg_scratches);
  auto seq_of = [&](size_t cpu) {
    netlatd_agg_seq q;
    std::memcpy(&q, scratch.data() + cpu * stride, sizeof q);
    return q;
  };
  if (bpf_map_lookup_elem(scratch_fd, &zero, scratch.data()) != 0)
    return false;
  std::vector<uint64_t> begun(ncpus);
  for (size_t c = 0; c < ncpus; ++c)
    begun[c] = seq_of(c).begun;
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(wait_ms) * 1'000'000;
  for (;;) {
    bool settled = true;
    for (size_t c = 0; c < ncpus && settled; ++c)
      settled = seq_of(c).done >= begun[c];
    if (settled)
      break;
    if (monotonic_ns() > deadline)
      return false;
    ::usleep(50);
    if (bpf_map_lookup_elem(scratch_fd, &zero, scratch.data()) != 0)
      return false;
  }

  const int fd = bpf_map__fd(skel->maps.agg_blocks);
  if (!impl_->agg_block) {
    impl_->agg_block = std::make_unique<netlatd_agg_block>();
    impl_->agg_blank = std::make_unique<netlatd_agg_block>();  // zeroed
  }
  netlatd_agg_block &b = *impl_->agg_block;
  const netlatd_agg_block *blank = impl_->agg_blank.get();
  for (uint32_t s = 0; s < impl_->agg_nseries; ++s) {
    KernelSeries k;
    for (uint32_t c = 0; c < ncpus; ++c) {
      const __u32 key = (side * impl_->agg_nseries + s) * static_cast<uint32_t>(ncpus) + c;
      if (bpf_map_lookup_elem(fd, &key, &b) != 0 || b.packets == 0)
        continue;
      k.data.packets += b.packets;
      k.tcp += b.tcp;
      k.tcp_bytes += b.tcp_bytes;
      for (uint32_t i = 0; i < NETLATD_AGG_STAGES; ++i) {
        const netlatd_agg_stage &st = b.stage[i];
        k.data.stages[i].add_counts(b.buckets[i], NETLATD_AGG_BUCKETS, st.count, st.sum, st.min, st.max);
      }
      bpf_map_update_elem(fd, &key, blank, BPF_ANY);
    }
    if (k.data.packets == 0)
      continue;
    // The series' key, from the index netlatd_series_index() made.
    __u32 port = 0;
    int tcp = 0, ipv6 = 0;
    netlatd_series_parts(impl_->agg_by, s, &port, &tcp, &ipv6);
    if (impl_->agg_by & NETLATD_AGG_BY_FAMILY)
      k.key.family = ipv6 ? 6 : 4;
    if (impl_->agg_by & NETLATD_AGG_BY_PROTO)
      k.key.proto = tcp ? 6 : 17;
    if ((impl_->agg_by & NETLATD_AGG_BY_DPORT) && port < impl_->agg_ports.size())
      k.key.dport = impl_->agg_ports[port];
    out.push_back(std::move(k));
  }
  return true;
}

std::vector<Tracer::CgroupChange> Tracer::refresh_cgroup_filters() {
  std::vector<CgroupChange> changes;
  for (__u32 i = 0; i < impl_->cgroup_held.size(); i++) {
    auto &[dir, held] = impl_->cgroup_held[i];
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st{};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      // Gone: the map keeps the removed cgroup, which no task can join, so
      // nothing is kept until it comes back (a restarted unit's new one).
      if (fd >= 0)
        ::close(fd);
      if (held != 0)
        changes.push_back({i, CgroupChange::Gone});
      held = 0;
      continue;
    }
    if (static_cast<uint64_t>(st.st_ino) == held) {
      ::close(fd);
      continue;
    }
    const __u32 value = static_cast<__u32>(fd);
    const int err = bpf_map_update_elem(bpf_map__fd(impl_->skel->maps.cgroup_filter), &i, &value, BPF_ANY);
    ::close(fd);
    if (err == 0) {
      held = st.st_ino;
      changes.push_back({i, CgroupChange::Followed});
    }
  }
  return changes;
}

void Tracer::set_target(const TraceTarget &t) {
  auto *bss = impl_->skel->bss;
  for (auto &w : bss->cfg_irq_bitmap)
    w = 0;
  for (int irq : t.irqs) {
    if (irq >= 0 && irq < NETLATD_IRQ_BITMAP_WORDS * 64)
      bss->cfg_irq_bitmap[irq / 64] |= 1ull << (irq % 64);
    else
      spdlog::warn("IRQ {} is beyond netlatd's IRQ bitmap; its interrupts are not traced", irq);
  }
  // New and changed devices first, then the ones gone: a device that stays
  // never stops matching.
  const int fd = bpf_map__fd(impl_->skel->maps.watch);
  auto key_of = [&](const WatchedDevice &d, uint16_t vlan) {
    netlatd_watch_key k{};
    k.netns = t.netns_inode;
    k.ifindex = d.ifindex;
    k.vlan = vlan;
    return k;
  };
  std::set<std::tuple<uint32_t, uint32_t, uint16_t>> now;
  for (const WatchedDevice &d : t.devices) {
    netlatd_watch v{d.iface_id, static_cast<__u16>(d.upper ? 1 : 0), static_cast<__u16>(d.irq ? 1 : 0)};
    for (uint16_t vlan : {d.vlan, static_cast<uint16_t>(NETLATD_WATCH_NAPI)}) {
      netlatd_watch_key k = key_of(d, vlan);
      if (bpf_map_update_elem(fd, &k, &v, BPF_ANY) != 0)
        throw Error(ExitCode::Software, fmt::format("cannot watch ifindex {}: {}", d.ifindex, std::strerror(errno)));
      now.emplace(k.netns, k.ifindex, k.vlan);
    }
  }
  for (const auto &old : impl_->watching)
    if (!now.count(old)) {
      netlatd_watch_key k{};
      std::tie(k.netns, k.ifindex, k.vlan) = old;
      bpf_map_delete_elem(fd, &k);
    }
  impl_->watching = std::move(now);
}

int Tracer::poll(int timeout_ms) {
  impl_->budget_left = kPollBudget;
  if (timeout_ms != 0)
    impl_->ring->wait(timeout_ms);
  Impl &impl = *impl_;
  const size_t n = impl.ring->view().consume([&impl](const void *data, size_t size) { return impl.handle(data, size); });
  return impl.budget_left <= 0 ? kPollBudget : static_cast<int>(n);
}

bool Tracer::wait_until_live(int timeout_ms) {
  // One datagram at a time over 127.0.0.1, from an ephemeral port to itself,
  // until the receive, enqueue and receive-return hooks have all run once.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok = false;
  if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0) {
    // Looked at every millisecond (the hooks usually have it within one),
    // sent again every 10 ms, until the deadline.
    const uint32_t all = 7;
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
    for (int look = 0;; ++look) {
      if ((__atomic_load_n(&impl_->skel->bss->armed, __ATOMIC_ACQUIRE) & all) == all) {
        ok = true;
        break;
      }
      if (monotonic_ns() > deadline)
        break;
      char b = 0;
      if (look % 10 == 0)
        (void)sendto(fd, &b, 1, 0, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
      usleep(1000);
      while (recv(fd, &b, 1, 0) >= 0) {
      }
    }
  }
  close(fd);
  return ok;
}

int Tracer::ring_epoll_fd() const { return impl_->ring->epoll_fd(); }

std::map<std::string, uint64_t> Tracer::hook_misses() const {
  std::map<std::string, uint64_t> out;
  for (const auto &[label, prog] : impl_->programs) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
      out[label] += info.recursion_misses;
  }
  return out;
}

std::array<uint64_t, NETLATD_DROP_COUNT> Tracer::drop_totals() const {
  auto drops = impl_->sum_percpu<NETLATD_DROP_COUNT>(impl_->skel->maps.drops);
  // Records whose reader the kernel side could not name for lack of ring
  // space (RecordDecoder::Kind::Unnamed).
  drops[NETLATD_DROP_RINGBUF_FULL] += impl_->decoder.unnamed();
  // Records of a reader the decoder had forgotten while they were in the ring.
  drops[NETLATD_DROP_READER_FORGOTTEN] += impl_->decoder.forgotten();
  return drops;
}

std::array<uint64_t, NETLATD_CNT_COUNT> Tracer::counter_totals() const {
  auto counters = impl_->sum_percpu<NETLATD_CNT_COUNT>(impl_->skel->maps.counters);
  counters[NETLATD_CNT_READER_STAMP_FAR] = impl_->decoder.far();
  return counters;
}

Tracer::SweepResult Tracer::sweep_stash(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns) {
  const uint64_t now = monotonic_ns();
  SweepResult r;
  // Datagrams that never reached a socket, or that a read took before their
  // data-ready call; and, where the kernel names reads, datagrams queued and
  // never read: free their stash entries (mapped with .bss) with the same
  // compare-and-swap the BPF side claims them with, so an entry a CPU
  // refilled meanwhile is left alone.
  for (netlatd_stash_entry &e : impl_->skel->bss->stash) {
    __u64 skb = __atomic_load_n(&e.skb, __ATOMIC_ACQUIRE);
    if (skb == NETLATD_STASH_FREE || skb == NETLATD_STASH_BUSY)
      continue;
    const uint64_t t = __atomic_load_n(&e.rx.receive_ns, __ATOMIC_RELAXED);
    const bool queued = __atomic_load_n(&e.queued_ns, __ATOMIC_RELAXED) != 0;
    if (!t || now <= t || now - t <= (queued ? unread_max_age_ns : inflight_max_age_ns))
      continue;
    if (__atomic_compare_exchange_n(&e.skb, &skb, __u64{NETLATD_STASH_FREE}, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      (queued ? r.expired_unread : r.expired_inflight)++;
  }
  return r;
}

Tracer::SweepResult Tracer::sweep(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns) {
  SweepResult r;
  const uint64_t now = monotonic_ns();

  // Readers that named no record for a minute: forgotten, and every task
  // told to name itself again. The bump comes first: a task that names
  // itself after it does so in a record decoded after the pruning.
  if (impl_->last_prune_ns == 0) {
    impl_->last_prune_ns = now;
  } else if (now - impl_->last_prune_ns >= Impl::kReaderIdleNs) {
    impl_->last_prune_ns = now;
    impl_->skel->bss->cfg_readers_gen = impl_->skel->bss->cfg_readers_gen + 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    r.readers_forgotten = impl_->decoder.prune(now - Impl::kReaderIdleNs);
  }

  const SweepResult stash = sweep_stash(inflight_max_age_ns, unread_max_age_ns);
  r.expired_inflight = stash.expired_inflight;
  r.expired_unread = stash.expired_unread;

  // TCP segments never queued (dropped by TCP: a duplicate, a full backlog)
  // or queued and never read (the socket closed first).
  int fd = bpf_map__fd(impl_->skel->maps.tcp_segs);
  std::vector<netlatd_tcp_key> stale;
  netlatd_tcp_key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    netlatd_tcp_seg seg{};
    if (bpf_map_lookup_elem(fd, &key, &seg) != 0)
      continue;
    const uint64_t t = seg.rx.receive_ns;
    if (!t || now <= t)
      continue;
    if (!seg.queue_after && now - t > inflight_max_age_ns) {
      stale.push_back(key);
      r.expired_inflight++;
    } else if (seg.queue_after && now - t > unread_max_age_ns) {
      stale.push_back(key);
      r.expired_unread++;
    }
  }
  for (const netlatd_tcp_key &k : stale)
    bpf_map_delete_elem(fd, &k);
  return r;
}

KernelCounts read_kernel_counts(const Tracer &tracer) {
  KernelCounts k;
  k.drops = tracer.drop_totals();
  k.counters = tracer.counter_totals();
  k.hook_misses = tracer.hook_misses();
  return k;
}

}  // namespace netlatd
