#include "aggregate_reader.hpp"

#include <unistd.h>

#include <cstring>

#include <bpf/bpf.h>

#include "netlatd/stage_math.h"
#include "netlatd/base/clock.hpp"

namespace netlatd {

void AggregateReader::set_outliers(std::optional<uint64_t> over_ns) {
  if (!on())
    return;
  const uint64_t over1 = !over_ns ? 0 : *over_ns == UINT64_MAX ? UINT64_MAX : *over_ns + 1;
  __atomic_store_n(&skel_.bss->agg_outlier_over1, over1, __ATOMIC_RELAXED);
}

uint64_t AggregateReader::bytes() const {
  if (!on())
    return 0;
  return uint64_t{2} * layout_.nseries * sizeof(netlatd_agg_block) * static_cast<uint64_t>(ncpus_);
}

bool AggregateReader::drain(std::vector<KernelSeries> &out, int wait_ms) {
  out.clear();
  if (!on())
    return true;
  uint32_t side = 0;
  if (!switch_side(side, wait_ms))
    return false;
  read_side(side, out);
  return true;
}

bool AggregateReader::switch_side(uint32_t &side, int wait_ms) {
  // Writers take the side after they count themselves begun (a full barrier
  // each side): one that saw the old epoch is in `begun` as read below.
  side = __atomic_fetch_add(&skel_.bss->agg_epoch, 1, __ATOMIC_SEQ_CST) & 1;
  // The writers' counts lead each CPU's scratch (struct netlatd_agg_seq).
  const size_t stride = (bpf_map__value_size(skel_.maps.agg_scratches) + 7) / 8 * 8;
  std::vector<unsigned char> scratch(stride * ncpus_);
  const __u32 zero = 0;
  const int scratch_fd = bpf_map__fd(skel_.maps.agg_scratches);
  auto seq_of = [&](size_t cpu) {
    netlatd_agg_seq q;
    std::memcpy(&q, scratch.data() + cpu * stride, sizeof q);
    return q;
  };
  if (bpf_map_lookup_elem(scratch_fd, &zero, scratch.data()) != 0)
    return false;
  std::vector<uint64_t> begun(ncpus_);
  for (size_t c = 0; c < ncpus_; ++c)
    begun[c] = seq_of(c).begun;
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(wait_ms) * 1'000'000;
  for (;;) {
    bool settled = true;
    for (size_t c = 0; c < ncpus_ && settled; ++c)
      settled = seq_of(c).done >= begun[c];
    if (settled)
      return true;
    if (monotonic_ns() > deadline)
      return false;
    ::usleep(50);
    if (bpf_map_lookup_elem(scratch_fd, &zero, scratch.data()) != 0)
      return false;
  }
}

void AggregateReader::read_side(uint32_t side, std::vector<KernelSeries> &out) {
  const int fd = bpf_map__fd(skel_.maps.agg_blocks);
  if (!block_) {
    block_ = std::make_unique<netlatd_agg_block>();
    blank_ = std::make_unique<netlatd_agg_block>();  // zeroed
  }
  netlatd_agg_block &b = *block_;
  for (uint32_t s = 0; s < layout_.nseries; ++s) {
    KernelSeries k;
    for (uint32_t c = 0; c < ncpus_; ++c) {
      const __u32 key = (side * layout_.nseries + s) * static_cast<uint32_t>(ncpus_) + c;
      if (bpf_map_lookup_elem(fd, &key, &b) != 0 || b.packets == 0)
        continue;
      k.data.packets += b.packets;
      k.tcp += b.tcp;
      k.tcp_bytes += b.tcp_bytes;
      for (uint32_t i = 0; i < NETLATD_AGG_STAGES; ++i) {
        const netlatd_agg_stage &st = b.stage[i];
        k.data.stages[i].add_counts(b.buckets[i], NETLATD_AGG_BUCKETS, st.count, st.sum, st.min, st.max);
      }
      bpf_map_update_elem(fd, &key, blank_.get(), BPF_ANY);
    }
    if (k.data.packets == 0)
      continue;
    k.key = key_of(s);
    out.push_back(std::move(k));
  }
}

// The series' key, from the index netlatd_series_index() made.
SeriesKey AggregateReader::key_of(uint32_t series) const {
  SeriesKey key;
  __u32 port = 0;
  int tcp = 0, ipv6 = 0;
  netlatd_series_parts(layout_.by, series, &port, &tcp, &ipv6);
  if (layout_.by & NETLATD_AGG_BY_FAMILY)
    key.family = ipv6 ? 6 : 4;
  if (layout_.by & NETLATD_AGG_BY_PROTO)
    key.proto = tcp ? 6 : 17;
  if ((layout_.by & NETLATD_AGG_BY_DPORT) && port < layout_.ports.size())
    key.dport = layout_.ports[port];
  return key;
}

}  // namespace netlatd
