#include "netlatd/decode/record.hpp"

#include <algorithm>
#include <cstring>

namespace netlatd {

static_assert(sizeof(netlatd_wire_packet) == 64, "a packet record is one cache line (abi.h)");
static_assert(sizeof(netlatd_wire_reader) == 40, "reader record layout (abi.h)");
static_assert(sizeof(netlatd_wire_packet) != sizeof(netlatd_wire_reader), "the two records are told apart by size");
static_assert(NETLATD_MAX_IFACES == NETLATD_WIRE_IFACE_MASK + 1, "iface_id 1..64 fits the record's 6 bits");

namespace {

constexpr uint32_t kFlagBits = 10;  // enum netlatd_packet_flags (6), NETLATD_WIRE_AMBIGUOUS, _RX_UNKNOWN, _FAR, _AGG_CHECKED
constexpr uint32_t kWireFlags = NETLATD_WIRE_AMBIGUOUS - 1;  // of enum netlatd_packet_flags, as flag bits
constexpr uint32_t kPacketFlags = kWireFlags | NETLATD_PKT_ON_CPU_BEFORE_CALL;
constexpr uint8_t kUdp = 17, kTcp = 6;

constexpr netlatd_stamp kReaderStamps[NETLATD_WIRE_READER_STAMPS] = {
    NETLATD_STAMP_SWITCH_IN, NETLATD_STAMP_CALL_START, NETLATD_STAMP_WAKEUP, NETLATD_STAMP_COPY};

// What a packet record says of the packet itself (its reader aside).
void decode_packet_fields(const netlatd_wire_packet &w, uint32_t flags, netlatd_packet &out) {
  out = netlatd_packet{};
  const uint64_t rcv = w.receive_ns;
  if (!(flags & NETLATD_WIRE_RX_UNKNOWN)) {
    out.stamp_ns[NETLATD_STAMP_IRQ] = w.irq_before ? rcv - w.irq_before : 0;
    out.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = w.raise_before ? rcv - w.raise_before : 0;
    out.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = w.softirq_before ? rcv - w.softirq_before : 0;
    out.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = rcv;
  }
  out.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = w.queue_after ? rcv + w.queue_after : 0;
  out.flags = static_cast<__u16>(flags & kWireFlags);
  out.l4proto = (flags & NETLATD_PKT_TCP) ? kTcp : kUdp;
  out.reader_unknown = (flags & NETLATD_WIRE_AMBIGUOUS) ? NETLATD_READER_AMBIGUOUS : NETLATD_READER_KNOWN;
  out.agg_checked = (flags & NETLATD_WIRE_AGG_CHECKED) ? 1 : 0;
  out.len = w.len;
  out.rx_cpu = static_cast<__u16>(w.cpus_iface & NETLATD_WIRE_CPU_MASK);
  const uint32_t iface = (w.cpus_iface >> (2 * NETLATD_WIRE_CPU_BITS)) & NETLATD_WIRE_IFACE_MASK;
  out.iface_id = iface ? iface : NETLATD_MAX_IFACES;
  out.dport = w.dport;
  out.sport = w.sport;
}

// Fields a record cannot carry, or values beyond its bits.
bool encodable(const netlatd_packet &p) noexcept {
  return !(p.stamp_ns[NETLATD_STAMP_SYSCALL_EXIT] || (p.flags & ~kPacketFlags) ||
           p.l4proto != ((p.flags & NETLATD_PKT_TCP) ? kTcp : kUdp) || p.reader_unknown >= NETLATD_READER_UNKNOWN_COUNT ||
           p.agg_checked > 1 || p.iface_id < 1 || p.iface_id > NETLATD_MAX_IFACES || p.rx_cpu > NETLATD_WIRE_CPU_MASK ||
           p.reader_cpu > NETLATD_WIRE_CPU_MASK || p._pad[0] || p._pad[1] || p._pad[2]);
}

// The packet's stamps, as distances from netif_receive_skb; false when they
// do not fit.
bool encode_packet_stamps(const __u64 *t, netlatd_wire_packet &w, uint32_t &flags) noexcept {
  auto before = [](uint64_t base, uint64_t at, __u32 &field) {
    if (!at)
      return true;
    if (at >= base || base - at > UINT32_MAX)
      return false;
    field = static_cast<__u32>(base - at);
    return true;
  };
  const uint64_t queued = t[NETLATD_STAMP_SOCK_QUEUE];
  if (t[NETLATD_STAMP_RECEIVE_SKB]) {
    w.receive_ns = t[NETLATD_STAMP_RECEIVE_SKB];
    if (!before(w.receive_ns, t[NETLATD_STAMP_IRQ], w.irq_before) ||
        !before(w.receive_ns, t[NETLATD_STAMP_SOFTIRQ_RAISE], w.raise_before) ||
        !before(w.receive_ns, t[NETLATD_STAMP_SOFTIRQ_ENTRY], w.softirq_before))
      return false;
  } else {
    // A TCP segment whose earlier stamps may be another copy's: the queueing
    // stamp stays, its base not shown.
    if (t[NETLATD_STAMP_IRQ] || t[NETLATD_STAMP_SOFTIRQ_RAISE] || t[NETLATD_STAMP_SOFTIRQ_ENTRY])
      return false;
    flags |= NETLATD_WIRE_RX_UNKNOWN;
    w.receive_ns = queued ? queued - 1 : 0;
  }
  if (queued) {
    if (queued <= w.receive_ns || queued - w.receive_ns > UINT32_MAX)
      return false;
    w.queue_after = static_cast<__u32>(queued - w.receive_ns);
  }
  return true;
}

// The reader's stamps, as distances from the receive return; a record
// without a return has no reader at all. False when they do not fit.
bool encode_reader_stamps(const netlatd_packet &p, netlatd_wire_packet &w, uint32_t &tid) noexcept {
  const __u64 *t = p.stamp_ns;
  const uint64_t ret = t[NETLATD_STAMP_RECV_RETURN];
  if (!ret) {
    for (netlatd_stamp s : kReaderStamps)
      if (t[s])
        return false;
    return !(p.reader_tid || p.reader_tgid || p.reader_cpu || p.reader_cgroup || p.reader_comm[0] ||
             (p.flags & NETLATD_PKT_ON_CPU_BEFORE_CALL));
  }
  if (p.reader_tid == 0 || p.reader_tid > NETLATD_WIRE_TID_MASK)
    return false;
  tid = p.reader_tid;
  w.recv_return_ns = ret;
  for (unsigned i = 0; i < NETLATD_WIRE_READER_STAMPS; ++i) {
    const uint64_t at = t[kReaderStamps[i]];
    if (!at)
      continue;
    if (at > ret || ret - at + 1 >= NETLATD_WIRE_BEFORE_MAX)
      return false;
    w.reader_before[i] = static_cast<__u32>(ret - at + 1);
  }
  // Said by the switch-in's slot, which then holds no stamp; only of a
  // call whose start is known (fill_reader).
  if (p.flags & NETLATD_PKT_ON_CPU_BEFORE_CALL) {
    if (t[NETLATD_STAMP_SWITCH_IN] || !t[NETLATD_STAMP_CALL_START])
      return false;
    w.reader_before[NETLATD_WIRE_SWITCH_IN] = NETLATD_WIRE_BEFORE_CALL;
  }
  return true;
}

}  // namespace

RecordDecoder::Kind RecordDecoder::decode(const void *data, size_t size, netlatd_packet &out) {
  if (size == sizeof(netlatd_wire_reader)) {
    netlatd_wire_reader r;
    std::memcpy(&r, data, sizeof r);
    // Kept until the tid names another task, which names itself ahead of
    // its records: a task's exit is not in the ring, and a record of the
    // exiting task may still be behind in it.
    Reader &named = readers_[r.tid];
    named.tgid = r.tgid;
    std::memcpy(named.comm, r.comm, sizeof named.comm);
    named.cgroup = r.cgroup;
    named.used_ns = latest_ns_;
    return Kind::Reader;
  }
  if (size != sizeof(netlatd_wire_packet))
    return Kind::Malformed;
  netlatd_wire_packet w;
  std::memcpy(&w, data, sizeof w);
  const uint32_t flags = (w.tid_flags >> NETLATD_WIRE_TID_BITS) & ((1u << kFlagBits) - 1);
  decode_packet_fields(w, flags, out);
  if (w.recv_return_ns == 0)
    return Kind::Packet;

  // tid 0: the kernel side could not name the reader (ring full).
  const uint32_t tid = w.tid_flags & NETLATD_WIRE_TID_MASK;
  const auto named = tid ? readers_.find(tid) : readers_.end();
  if (named == readers_.end()) {
    // A tid the table lacks was named once (a reader record comes ahead of
    // its packets) and forgotten by prune() since.
    ++(tid ? forgotten_ : unnamed_);
    return Kind::Unnamed;
  }
  const uint64_t ret = w.recv_return_ns;
  if (flags & NETLATD_WIRE_FAR)
    ++far_;
  out.stamp_ns[NETLATD_STAMP_RECV_RETURN] = ret;
  for (unsigned i = 0; i < NETLATD_WIRE_READER_STAMPS; ++i)
    if (i == NETLATD_WIRE_SWITCH_IN && w.reader_before[i] == NETLATD_WIRE_BEFORE_CALL)
      out.flags |= NETLATD_PKT_ON_CPU_BEFORE_CALL;
    else if (w.reader_before[i])
      out.stamp_ns[kReaderStamps[i]] = ret - (w.reader_before[i] - 1);
  out.reader_cpu = static_cast<__u16>((w.cpus_iface >> NETLATD_WIRE_CPU_BITS) & NETLATD_WIRE_CPU_MASK);
  out.reader_tid = tid;
  latest_ns_ = std::max(latest_ns_, ret);
  named->second.used_ns = std::max(named->second.used_ns, ret);
  out.reader_tgid = named->second.tgid;
  std::memcpy(out.reader_comm, named->second.comm, sizeof out.reader_comm);
  out.reader_cgroup = named->second.cgroup;
  return Kind::Packet;
}

std::optional<netlatd_wire_packet> encode_packet(const netlatd_packet &p) noexcept {
  if (!encodable(p))
    return std::nullopt;
  netlatd_wire_packet w{};
  uint32_t flags = p.flags & kWireFlags;
  if (!encode_packet_stamps(p.stamp_ns, w, flags))
    return std::nullopt;
  if (p.reader_unknown == NETLATD_READER_AMBIGUOUS)
    flags |= NETLATD_WIRE_AMBIGUOUS;
  if (p.agg_checked)
    flags |= NETLATD_WIRE_AGG_CHECKED;
  uint32_t tid = 0;
  if (!encode_reader_stamps(p, w, tid))
    return std::nullopt;
  w.tid_flags = tid | flags << NETLATD_WIRE_TID_BITS;
  w.len = p.len;
  w.cpus_iface = p.rx_cpu | static_cast<uint32_t>(p.reader_cpu) << NETLATD_WIRE_CPU_BITS |
                 (p.iface_id & NETLATD_WIRE_IFACE_MASK) << (2 * NETLATD_WIRE_CPU_BITS);
  w.dport = p.dport;
  w.sport = p.sport;
  return w;
}

netlatd_wire_reader encode_reader(const netlatd_packet &p) noexcept {
  netlatd_wire_reader r{};
  r.tid = p.reader_tid;
  r.tgid = p.reader_tgid;
  std::memcpy(r.comm, p.reader_comm, sizeof r.comm);
  r.cgroup = p.reader_cgroup;
  return r;
}

size_t RecordDecoder::prune(uint64_t before_ns) {
  return std::erase_if(readers_, [before_ns](const auto &e) { return e.second.used_ns < before_ns; });
}

}  // namespace netlatd
