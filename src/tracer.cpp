#include "netlatd/tracer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdarg>
#include <cstring>
#include <mutex>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include "netlatd.skel.h"
#include "netlatd/errors.hpp"

namespace netlatd {

static_assert(sizeof(netlatd_packet) == 128, "ring-buffer record must stay 128 bytes");
static_assert(sizeof(netlatd_stash_entry) == 64, "a stash entry is one cache line");
static_assert(sizeof(netlatd_fifo_hdr) == 128 && offsetof(netlatd_fifo_hdr, head) == 64,
              "producers and readers of a FIFO write separate cache lines");

namespace {

std::mutex g_libbpf_mu;
std::string g_last_warning;

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
  }
  spdlog::debug("{}", line);
  return n;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace

void route_libbpf_logs() { libbpf_set_print(libbpf_to_spdlog); }

std::string last_libbpf_warning() {
  std::lock_guard lock(g_libbpf_mu);
  return g_last_warning;
}

struct Tracer::Impl {
  netlatd_bpf *skel = nullptr;
  ring_buffer *ring = nullptr;
  RecordFn on_record;
  int ncpus = 1;

  netlatd_stash_entry *stash = nullptr;  // the `stash` map, mapped
  size_t stash_entries = 0;

  ~Impl() {
    if (stash)
      munmap(stash, stash_entries * sizeof(netlatd_stash_entry));
    if (ring)
      ring_buffer__free(ring);
    if (skel)
      netlatd_bpf__destroy(skel);
  }

  static int handle(void *ctx, void *data, size_t size) {
    auto *self = static_cast<Impl *>(ctx);
    if (size >= sizeof(netlatd_packet))
      self->on_record(*static_cast<const netlatd_packet *>(data));
    return 0;
  }

  template <size_t N>
  std::array<uint64_t, N> sum_percpu(bpf_map *map) const {
    std::array<uint64_t, N> out{};
    std::vector<uint64_t> values(static_cast<size_t>(ncpus));
    for (uint32_t i = 0; i < N; i++) {
      if (bpf_map_lookup_elem(bpf_map__fd(map), &i, values.data()) != 0)
        continue;
      for (uint64_t v : values)
        out[i] += v;
    }
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
  skel->rodata->targ_wakeup_bytes = config.ringbuf_bytes / 4;
  // fentry runs before the datagram is queued: a published slot may then be
  // one not yet on the queue.
  skel->rodata->targ_push_after_queue = plan.label(Point::UdpEnqueue).rfind("fentry/", 0) != 0;
  if (int err = bpf_map__set_max_entries(skel->maps.events, config.ringbuf_bytes))
    throw Error(ExitCode::Software, "cannot size the ring buffer: " + errno_text(err));

  // Keep only the chosen variant of each hook point.
  // Where the receive return is an fexit, skb_consume_udp names the datagram
  // each UDP receive call dequeued.
  std::vector<bpf_program *> chosen;
  bpf_program *prog;
  bpf_object__for_each_program(prog, skel->obj) {
    const std::string_view name = bpf_program__name(prog);
    bool keep = plan.label(Point::RecvReturn) == "fexit/sock_recvmsg" && name == "udp_consume_fentry";
    for (const HookChoice &c : plan.choices)
      if (c.chosen && c.chosen->program == bpf_program__name(prog))
        keep = true;
    bpf_program__set_autoload(prog, keep);
    if (keep)
      chosen.push_back(prog);
  }

  if (int err = netlatd_bpf__load(skel)) {
    std::string why = last_libbpf_warning();
    throw Error(ExitCode::Unavailable,
                "the kernel refused netlatd's BPF programs: " + errno_text(err) + (why.empty() ? "" : " (" + why + ")"));
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

  {
    size_t n = bpf_map__max_entries(skel->maps.stash);
    void *p = mmap(nullptr, n * sizeof(netlatd_stash_entry), PROT_READ | PROT_WRITE, MAP_SHARED,
                   bpf_map__fd(skel->maps.stash), 0);
    if (p == MAP_FAILED) {
      int err = errno;
      for (bpf_link *l : links_)
        bpf_link__destroy(l);
      links_.clear();
      throw Error(ExitCode::Unavailable, "cannot map the BPF stash table: " + errno_text(err));
    }
    impl_->stash = static_cast<netlatd_stash_entry *>(p);
    impl_->stash_entries = n;
  }

  impl_->ring = ring_buffer__new(bpf_map__fd(skel->maps.events), &Impl::handle, impl_.get(), nullptr);
  if (!impl_->ring) {
    int err = errno;
    for (bpf_link *l : links_)
      bpf_link__destroy(l);
    links_.clear();
    throw Error(ExitCode::Unavailable, "cannot map the BPF ring buffer: " + errno_text(err));
  }
}

Tracer::~Tracer() {
  // Links first, so no program runs while the maps go away.
  for (bpf_link *l : links_)
    bpf_link__destroy(l);
  links_.clear();
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
  bss->cfg_netns = t.netns_inode;
  // The interface index last: it is what makes packets match.
  __atomic_store_n(&bss->cfg_ifindex, t.ifindex, __ATOMIC_RELEASE);
}

int Tracer::poll(int timeout_ms) {
  int n = ring_buffer__poll(impl_->ring, timeout_ms);
  if (n < 0 && n != -EINTR)
    throw Error(ExitCode::Software, "ring buffer poll failed: " + errno_text(n));
  int m = ring_buffer__consume(impl_->ring);
  if (m < 0 && m != -EINTR)
    throw Error(ExitCode::Software, "ring buffer consume failed: " + errno_text(m));
  return std::max(n, 0) + std::max(m, 0);
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
    const uint32_t all = 7;
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
      if ((__atomic_load_n(&impl_->skel->bss->armed, __ATOMIC_ACQUIRE) & all) == all) {
        ok = true;
        break;
      }
      char b = 0;
      (void)sendto(fd, &b, 1, 0, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
      usleep(10000);
      while (recv(fd, &b, 1, 0) >= 0) {
      }
    }
  }
  close(fd);
  return ok;
}

int Tracer::ring_epoll_fd() const { return ring_buffer__epoll_fd(impl_->ring); }

std::array<uint64_t, NETLATD_DROP_COUNT> Tracer::drop_totals() const {
  return impl_->sum_percpu<NETLATD_DROP_COUNT>(impl_->skel->maps.drops);
}

std::array<uint64_t, NETLATD_CNT_COUNT> Tracer::counter_totals() const {
  return impl_->sum_percpu<NETLATD_CNT_COUNT>(impl_->skel->maps.counters);
}

Tracer::SweepResult Tracer::sweep(uint64_t inflight_max_age_ns, uint64_t socket_max_age_ns) {
  SweepResult r;
  const uint64_t now = monotonic_ns();

  // Packets that never reached a socket: free their stash entries with the
  // same compare-and-swap the BPF side claims them with, so an entry a CPU
  // refilled meanwhile is left alone.
  for (size_t i = 0; i < impl_->stash_entries; i++) {
    netlatd_stash_entry &e = impl_->stash[i];
    __u64 skb = __atomic_load_n(&e.skb, __ATOMIC_ACQUIRE);
    if (skb == NETLATD_STASH_FREE || skb == NETLATD_STASH_BUSY)
      continue;
    uint64_t t = __atomic_load_n(&e.rx.receive_ns, __ATOMIC_RELAXED);
    if (!t || now <= t || now - t <= inflight_max_age_ns)
      continue;
    if (__atomic_compare_exchange_n(&e.skb, &skb, __u64{NETLATD_STASH_FREE}, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      r.expired_inflight++;
  }

  int fd = bpf_map__fd(impl_->skel->maps.sockets);
  std::vector<uint64_t> stale;
  uint64_t key = 0, next = 0;
  bool first = true;
  std::vector<uint8_t> value(bpf_map__value_size(impl_->skel->maps.sockets));
  stale.clear();
  first = true;
  while (bpf_map_get_next_key(fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    if (bpf_map_lookup_elem(fd, &key, value.data()) != 0)
      continue;
    // The value says where its FIFO (struct netlatd_fifo_hdr first) starts.
    uint32_t off = 0;
    std::memcpy(&off, value.data(), sizeof(off));
    if (off < NETLATD_FIFO_OFF_MIN || off + sizeof(netlatd_fifo_hdr) > value.size())
      continue;  // created this instant, offset not written yet
    netlatd_fifo_hdr hdr;
    std::memcpy(&hdr, value.data() + off, sizeof(hdr));
    const uint32_t head = hdr.head, tail = hdr.tail;
    const uint64_t last = std::max(hdr.queued_ns, hdr.read_ns);
    if (last && now > last && now - last > socket_max_age_ns) {
      stale.push_back(key);
      r.expired_unread += tail - head;
    }
  }
  for (uint64_t k : stale)
    bpf_map_delete_elem(fd, &k);
  return r;
}

}  // namespace netlatd
