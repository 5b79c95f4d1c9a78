#include "kernel_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/base/fd.hpp"

namespace netlatd {
namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

Fd open_directory(const std::string &dir) { return Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); }

}  // namespace

void KernelState::hold_cgroups(const std::vector<std::string> &dirs) {
  for (__u32 i = 0; i < dirs.size(); i++) {
    const Fd dir = open_directory(dirs[i]);
    if (dir.get() < 0)
      throw Error(ExitCode::Usage, "--cgroup: cannot open " + dirs[i] + ": " + errno_text(errno));
    struct stat st{};
    const __u32 value = static_cast<__u32>(dir.get());
    const int err =
        ::fstat(dir.get(), &st) != 0 ? -1 : bpf_map_update_elem(bpf_map__fd(skel_.maps.cgroup_filter), &i, &value, BPF_ANY);
    const int saved = errno;
    if (err)
      throw Error(ExitCode::Unavailable, "--cgroup: the kernel refused cgroup " + dirs[i] + ": " + errno_text(saved));
    cgroup_held_.emplace_back(dirs[i], st.st_ino);
  }
}

std::vector<Tracer::CgroupChange> KernelState::refresh_cgroup_filters() {
  std::vector<Tracer::CgroupChange> changes;
  for (__u32 i = 0; i < cgroup_held_.size(); i++) {
    auto &[dir, held] = cgroup_held_[i];
    const Fd fd = open_directory(dir);
    struct stat st{};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
      // Gone: the map keeps the removed cgroup, which no task can join, so
      // nothing is kept until it comes back (a restarted unit's new one).
      if (held != 0)
        changes.push_back({i, Tracer::CgroupChange::Gone});
      held = 0;
      continue;
    }
    if (static_cast<uint64_t>(st.st_ino) == held)
      continue;
    const __u32 value = static_cast<__u32>(fd.get());
    if (bpf_map_update_elem(bpf_map__fd(skel_.maps.cgroup_filter), &i, &value, BPF_ANY) == 0) {
      held = st.st_ino;
      changes.push_back({i, Tracer::CgroupChange::Followed});
    }
  }
  return changes;
}

void KernelState::set_target(const TraceTarget &t) {
  auto *bss = skel_.bss;
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
  const int fd = bpf_map__fd(skel_.maps.watch);
  std::set<std::tuple<uint32_t, uint32_t, uint16_t>> now;
  for (const WatchedDevice &d : t.devices) {
    netlatd_watch v{d.iface_id, static_cast<__u16>(d.upper ? 1 : 0), static_cast<__u16>(d.irq ? 1 : 0)};
    for (uint16_t vlan : {d.vlan, static_cast<uint16_t>(NETLATD_WATCH_NAPI)}) {
      netlatd_watch_key k{};
      k.netns = t.netns_inode;
      k.ifindex = d.ifindex;
      k.vlan = vlan;
      if (bpf_map_update_elem(fd, &k, &v, BPF_ANY) != 0)
        throw Error(ExitCode::Software, fmt::format("cannot watch ifindex {}: {}", d.ifindex, std::strerror(errno)));
      now.emplace(k.netns, k.ifindex, k.vlan);
    }
  }
  for (const auto &old : watching_)
    if (!now.count(old)) {
      netlatd_watch_key k{};
      std::tie(k.netns, k.ifindex, k.vlan) = old;
      bpf_map_delete_elem(fd, &k);
    }
  watching_ = std::move(now);
  // After the map: the filter's per-CPU copies of it are looked up again
  // (bpf/filter/watch.bpf.h watched_here).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  skel_.bss->cfg_watch_gen = skel_.bss->cfg_watch_gen + 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

Tracer::SweepResult KernelState::sweep_stash(uint64_t now, uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns) {
  Tracer::SweepResult r;
  // Datagrams that never reached a socket, or that a read took before their
  // data-ready call; and, where the kernel names reads, datagrams queued and
  // never read: free their stash entries (mapped at load) with the same
  // compare-and-swap the BPF side claims them with, so an entry a CPU
  // refilled meanwhile is left alone.
  for (netlatd_stash_set &set : stash_)
    for (unsigned w = 0; w < NETLATD_STASH_WAYS; w++) {
      __u64 skb = __atomic_load_n(&set.skb[w], __ATOMIC_ACQUIRE);
      if (skb == NETLATD_STASH_FREE || skb == NETLATD_STASH_BUSY)
        continue;
      const uint64_t t = __atomic_load_n(&set.rx[w].receive_ns, __ATOMIC_RELAXED);
      const bool queued = __atomic_load_n(&set.queued_ns[w], __ATOMIC_RELAXED) != 0;
      if (!t || now <= t || now - t <= (queued ? unread_max_age_ns : inflight_max_age_ns))
        continue;
      if (__atomic_compare_exchange_n(&set.skb[w], &skb, __u64{NETLATD_STASH_FREE}, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED))
        (queued ? r.expired_unread : r.expired_inflight)++;
    }
  return r;
}

// TCP segments never queued (dropped by TCP: a duplicate, a full backlog)
// or queued and never read (the socket closed first).
void KernelState::sweep_tcp_segments(uint64_t now, uint64_t inflight_max_age_ns, uint64_t unread_max_age_ns,
                                     Tracer::SweepResult &r) {
  const int fd = bpf_map__fd(skel_.maps.tcp_segs);
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
}

void KernelState::ask_readers_again() {
  skel_.bss->cfg_readers_gen = skel_.bss->cfg_readers_gen + 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

netlatd_cpu_counts KernelState::sum_cpu_counts() const {
  netlatd_cpu_counts out{};
  // A per-CPU value is copied out in 8-byte multiples, CPU after CPU.
  const size_t stride = (bpf_map__value_size(skel_.maps.cpu_states) + 7) / 8 * 8;
  static_assert(sizeof(netlatd_cpu_counts) % sizeof(__u64) == 0);
  if (stride < sizeof(out))
    return out;
  std::vector<__u64> values(static_cast<size_t>(ncpus_) * stride / sizeof(__u64));
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_.maps.cpu_states), &zero, values.data()) != 0)
    return out;
  auto *sum = reinterpret_cast<__u64 *>(&out);
  for (size_t cpu = 0; cpu < static_cast<size_t>(ncpus_); cpu++) {
    const __u64 *counts = values.data() + cpu * stride / sizeof(__u64);
    for (size_t i = 0; i < sizeof(out) / sizeof(__u64); i++)
      sum[i] += counts[i];
  }
  return out;
}

}  // namespace netlatd
