#include "netlatd/kernel/tracer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate_reader.hpp"
#include "bpf_owned.hpp"
#include "kernel_state.hpp"
#include "loader.hpp"
#include "netlatd/base/clock.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/decode/record.hpp"
#include "netlatd/kernel/ring.hpp"

namespace netlatd {

static_assert(sizeof(netlatd_rx) == 40, "netlatd_rx layout (abi.h)");
static_assert(kStashEntryBytes == 56, "a stash set: 56 bytes a way (abi.h)");
static_assert(sizeof(netlatd_watch_key) == 12 && sizeof(netlatd_watch) == 8, "watch layout (abi.h)");
static_assert(sizeof(netlatd_tcp_key) == 16 && sizeof(netlatd_tcp_seg) == 56, "tcp_segs layout (abi.h)");

// Declared in the order they are made; destroyed the other way: the links
// first, so no program runs while the ring and the maps go away.
struct Tracer::Impl {
  Impl(LoadedObject loaded, RecordFn record)
      : object(std::move(loaded)), on_record(std::move(record)), state(*object.skel, object.ncpus, object.stash),
        aggregate(*object.skel, object.ncpus, object.aggregate) {}

  LoadedObject object;
  RecordFn on_record;
  RecordDecoder decoder;  // the ring's records in ring order
  uint64_t last_prune_ns = 0;
  static constexpr uint64_t kReaderIdleNs = 60'000'000'000ull;
  KernelState state;
  AggregateReader aggregate;
  std::unique_ptr<RingBuffer> ring;
  std::vector<Link> links;

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
};

Tracer::Tracer(const HookPlan &plan, const TracerConfig &config, RecordFn on_record)
    : impl_(std::make_unique<Impl>(load_programs(plan, config), std::move(on_record))) {
  // Before any program runs.
  impl_->state.hold_cgroups(config.cgroup_dirs);
  impl_->links = attach_programs(impl_->object);
  netlatd_bpf &skel = *impl_->object.skel;
  impl_->ring = std::make_unique<RingBuffer>(bpf_map__fd(skel.maps.events), bpf_map__max_entries(skel.maps.events));
}

Tracer::~Tracer() {
  // Links first, so no program runs while the maps go away.
  detach();
}

void Tracer::detach() { impl_->links.clear(); }

size_t Tracer::programs_attached() const { return impl_->links.size(); }

const Tracer::VerifierWalk &Tracer::verifier_walk() const { return impl_->object.walk; }

void Tracer::set_aggregate_outliers(std::optional<uint64_t> over_ns) { impl_->aggregate.set_outliers(over_ns); }

uint64_t Tracer::aggregate_bytes() const { return impl_->aggregate.bytes(); }

size_t Tracer::stash_entries() const { return impl_->object.stash.size() * NETLATD_STASH_WAYS; }

bool Tracer::drain_aggregate(std::vector<KernelSeries> &out, int wait_ms) { return impl_->aggregate.drain(out, wait_ms); }

std::vector<Tracer::CgroupChange> Tracer::refresh_cgroup_filters() { return impl_->state.refresh_cgroup_filters(); }

void Tracer::set_target(const TraceTarget &t) { impl_->state.set_target(t); }

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
  const Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const int fd = sock.get();
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
      if ((__atomic_load_n(&impl_->object.skel->bss->armed, __ATOMIC_ACQUIRE) & all) == all) {
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
  return ok;
}

int Tracer::ring_epoll_fd() const { return impl_->ring->epoll_fd(); }

std::map<std::string, uint64_t> Tracer::hook_misses() const {
  std::map<std::string, uint64_t> out;
  for (const auto &[label, prog] : impl_->object.programs) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
      out[label] += info.recursion_misses;
  }
  return out;
}

std::array<uint64_t, NETLATD_DROP_COUNT> Tracer::drop_totals() const {
  std::array<uint64_t, NETLATD_DROP_COUNT> drops{};
  std::copy_n(impl_->state.sum_cpu_counts().drops.v, NETLATD_DROP_COUNT, drops.begin());
  // Records whose reader the kernel side could not name for lack of ring
  // space (RecordDecoder::Kind::Unnamed).
  drops[NETLATD_DROP_RINGBUF_FULL] += impl_->decoder.unnamed();
  // Records of a reader the decoder had forgotten while they were in the ring.
  drops[NETLATD_DROP_READER_FORGOTTEN] += impl_->decoder.forgotten();
  return drops;
}

std::array<uint64_t, NETLATD_CNT_COUNT> Tracer::counter_totals() const {
  std::array<uint64_t, NETLATD_CNT_COUNT> counters{};
  std::copy_n(impl_->state.sum_cpu_counts().counters.v, NETLATD_CNT_COUNT, counters.begin());
  counters[NETLATD_CNT_READER_STAMP_FAR] = impl_->decoder.far();
  return counters;
}

std::optional<std::array<uint64_t, NETLATD_OP_COUNT>> Tracer::op_totals() const {
  const netlatd_bpf &skel = *impl_->object.skel;
  if (!skel.rodata->targ_count_ops)
    return std::nullopt;
  // One global array (.bss, mapped into the daemon): the programs add to it
  // atomically; a plain read of each count here is enough for a report.
  std::array<uint64_t, NETLATD_OP_COUNT> ops{};
  for (size_t i = 0; i < ops.size(); i++)
    ops[i] = __atomic_load_n(&skel.bss->op_counts[i], __ATOMIC_RELAXED);
  return ops;
}

Tracer::SweepResult Tracer::sweep_stash(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns) {
  return impl_->state.sweep_stash(monotonic_ns(), inflight_max_age_ns, unread_max_age_ns);
}

Tracer::SweepResult Tracer::sweep(uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns) {
  const uint64_t now = monotonic_ns();
  // Readers that named no record for a minute: forgotten, and every task
  // told to name itself again. The bump comes first: a task that names
  // itself after it does so in a record decoded after the pruning.
  size_t forgotten = 0;
  if (impl_->last_prune_ns == 0) {
    impl_->last_prune_ns = now;
  } else if (now - impl_->last_prune_ns >= Impl::kReaderIdleNs) {
    impl_->last_prune_ns = now;
    impl_->state.ask_readers_again();
    forgotten = impl_->decoder.prune(now - Impl::kReaderIdleNs);
  }
  SweepResult r = sweep_stash(inflight_max_age_ns, unread_max_age_ns);
  r.readers_forgotten = forgotten;
  impl_->state.sweep_tcp_segments(now, inflight_max_age_ns, unread_max_age_ns, r);
  return r;
}

KernelCounts read_kernel_counts(const Tracer &tracer) {
  KernelCounts k;
  k.drops = tracer.drop_totals();
  k.counters = tracer.counter_totals();
  k.hook_misses = tracer.hook_misses();
  k.ops = tracer.op_totals();
  return k;
}

}  // namespace netlatd
