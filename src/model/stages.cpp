#include "netlatd/model/stages.hpp"

#include <algorithm>

namespace netlatd {

namespace {

// Total starts at whichever of these the packet has first: lo and veth have
// no IRQ, and a softirq started by another device's IRQ leaves only the later ones.
constexpr std::array<netlatd_stamp, 4> kTotalStartCandidates{
    NETLATD_STAMP_IRQ, NETLATD_STAMP_SOFTIRQ_RAISE, NETLATD_STAMP_SOFTIRQ_ENTRY,
    NETLATD_STAMP_RECEIVE_SKB};

std::optional<uint64_t> stamp(const netlatd_packet &p, netlatd_stamp s) noexcept {
  return p.stamp_ns[s] ? std::optional<uint64_t>(p.stamp_ns[s]) : std::nullopt;
}

std::optional<uint64_t> span(std::optional<uint64_t> start, std::optional<uint64_t> end) noexcept {
  if (!start || !end || *end < *start)
    return std::nullopt;
  return *end - *start;
}

}  // namespace

std::string_view stage_name(Stage s) noexcept {
  switch (s) {
  case Stage::Irq: return "irq";
  case Stage::Softirq: return "softirq";
  case Stage::NetifReceive: return "netif_receive";
  case Stage::SockQueue: return "sock_queue";
  case Stage::OnCpu: return "oncpu";
  case Stage::InSocket: return "in_socket";
  case Stage::Total: return "total";
  }
  return "unknown";
}

std::string_view stage_description(Stage s) noexcept {
  switch (s) {
  case Stage::Irq:
    return "NIC hard IRQ until the NET_RX softirq that handles the packet starts";
  case Stage::Softirq:
    return "NET_RX softirq start until netif_receive_skb of the packet (driver poll, GRO)";
  case Stage::NetifReceive:
    return "netif_receive_skb until the packet is queued on the socket (IP, UDP/TCP)";
  case Stage::SockQueue:
    return "queued on the socket until the read that takes it runs (wakeup, run queue, application busy)";
  case Stage::OnCpu:
    return "the read running until it returns the data (syscall, copy)";
  case Stage::InSocket:
    return "queued on the socket until the read returns it (sock_queue + oncpu)";
  case Stage::Total:
    return "first kernel stamp (IRQ or softirq) until the receive call returns";
  }
  return "unknown stage";
}

std::optional<Stage> stage_from_name(std::string_view name) noexcept {
  for (Stage s : kAllStages)
    if (stage_name(s) == name)
      return s;
  return std::nullopt;
}

std::optional<uint64_t> read_start(const netlatd_packet &p) noexcept {
  const auto queued = stamp(p, NETLATD_STAMP_SOCK_QUEUE);
  const auto sw = stamp(p, NETLATD_STAMP_SWITCH_IN);
  const auto woke = stamp(p, NETLATD_STAMP_WAKEUP);
  const auto call = stamp(p, NETLATD_STAMP_CALL_START);
  if (!queued)
    return std::nullopt;
  // Woken by the socket during this call: the call was waiting for data
  // (even one that began after the enqueue stamp, which on some kernels is
  // taken just before the datagram is queued), and reads at its switch-in.
  if (woke && (!call || *woke >= *call) && ((p.flags & NETLATD_PKT_SLEPT_IN_CALL) || call)) {
    if (sw && *sw >= *woke)
      return sw;
    return std::nullopt;
  }
  if (call) {
    if (*call >= *queued)
      return call;
    // Waiting in the call when the packet came: on CPU again at its switch-in,
    // or at once if it never switched out during the call.
    if (!sw)
      return std::nullopt;
    return *sw >= *call ? std::max(*queued, *sw) : *queued;
  }
  return std::nullopt;
}

StageDurations stage_durations(const netlatd_packet &p) noexcept {
  StageDurations d;
  const auto rs = read_start(p);
  const auto irq = stamp(p, NETLATD_STAMP_IRQ), entry = stamp(p, NETLATD_STAMP_SOFTIRQ_ENTRY),
             rcv = stamp(p, NETLATD_STAMP_RECEIVE_SKB), queued = stamp(p, NETLATD_STAMP_SOCK_QUEUE),
             ret = stamp(p, NETLATD_STAMP_RECV_RETURN);
  auto &of = d.of;
  of[static_cast<size_t>(Stage::Irq)] = span(irq, entry);
  of[static_cast<size_t>(Stage::Softirq)] = span(entry, rcv);
  of[static_cast<size_t>(Stage::NetifReceive)] = span(rcv, queued);
  of[static_cast<size_t>(Stage::SockQueue)] = span(queued, rs);
  of[static_cast<size_t>(Stage::OnCpu)] = span(rs, ret);
  of[static_cast<size_t>(Stage::InSocket)] = span(queued, ret);
  for (netlatd_stamp c : kTotalStartCandidates)
    if (p.stamp_ns[c] != 0) {
      of[static_cast<size_t>(Stage::Total)] = span(stamp(p, c), ret);
      break;
    }
  const std::array<std::optional<uint64_t>, 10> path{
      irq,    stamp(p, NETLATD_STAMP_SOFTIRQ_RAISE), entry, rcv, queued, stamp(p, NETLATD_STAMP_WAKEUP),
      rs,     stamp(p, NETLATD_STAMP_COPY),          ret,   stamp(p, NETLATD_STAMP_SYSCALL_EXIT)};
  uint64_t latest = 0;
  d.ordered = true;
  for (const auto &t : path) {
    if (!t)
      continue;
    if (*t < latest) {
      d.ordered = false;
      break;
    }
    latest = *t;
  }
  return d;
}

std::optional<uint64_t> stage_duration(const netlatd_packet &p, Stage s) noexcept { return stage_durations(p)[s]; }

bool stamps_ordered(const netlatd_packet &p) noexcept { return stage_durations(p).ordered; }

std::string_view stamp_name(netlatd_stamp s) noexcept {
  switch (s) {
  case NETLATD_STAMP_IRQ: return "irq";
  case NETLATD_STAMP_SOFTIRQ_RAISE: return "softirq_raise";
  case NETLATD_STAMP_SOFTIRQ_ENTRY: return "softirq_entry";
  case NETLATD_STAMP_RECEIVE_SKB: return "netif_receive_skb";
  case NETLATD_STAMP_SOCK_QUEUE: return "sock_queue";
  case NETLATD_STAMP_WAKEUP: return "wakeup";
  case NETLATD_STAMP_SWITCH_IN: return "switch_in";
  case NETLATD_STAMP_CALL_START: return "call_start";
  case NETLATD_STAMP_COPY: return "copy";
  case NETLATD_STAMP_RECV_RETURN: return "recv_return";
  case NETLATD_STAMP_SYSCALL_EXIT: return "syscall_exit";
  case NETLATD_STAMP_COUNT: break;
  }
  return "unknown";
}

}  // namespace netlatd
