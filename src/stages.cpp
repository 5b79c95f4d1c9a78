#include "netlatd/stages.hpp"

namespace netlatd {

namespace {

// Total starts at whichever of these the packet has first: lo and veth have
// no IRQ, and a softirq started by another device's IRQ leaves only the later ones.
constexpr std::array<netlatd_stamp, 4> kTotalStartCandidates{
    NETLATD_STAMP_IRQ, NETLATD_STAMP_SOFTIRQ_RAISE, NETLATD_STAMP_SOFTIRQ_ENTRY,
    NETLATD_STAMP_RECEIVE_SKB};

}  // namespace

std::string_view stage_name(Stage s) noexcept {
  switch (s) {
  case Stage::Irq: return "irq";
  case Stage::Softirq: return "softirq";
  case Stage::NetifReceive: return "netif_receive";
  case Stage::SockQueue: return "sock_queue";
  case Stage::OnCpu: return "oncpu";
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
    return "queued on the socket until the reader is on CPU (wakeup, run-queue wait)";
  case Stage::OnCpu:
    return "reader on CPU until its receive call returns the data (syscall, copy)";
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

netlatd_stamp start_stamp(Stage s) noexcept {
  switch (s) {
  case Stage::Irq: return NETLATD_STAMP_IRQ;
  case Stage::Softirq: return NETLATD_STAMP_SOFTIRQ_ENTRY;
  case Stage::NetifReceive: return NETLATD_STAMP_RECEIVE_SKB;
  case Stage::SockQueue: return NETLATD_STAMP_SOCK_QUEUE;
  case Stage::OnCpu: return NETLATD_STAMP_ONCPU;
  case Stage::Total: return NETLATD_STAMP_IRQ;
  }
  return NETLATD_STAMP_IRQ;
}

netlatd_stamp end_stamp(Stage s) noexcept {
  switch (s) {
  case Stage::Irq: return NETLATD_STAMP_SOFTIRQ_ENTRY;
  case Stage::Softirq: return NETLATD_STAMP_RECEIVE_SKB;
  case Stage::NetifReceive: return NETLATD_STAMP_SOCK_QUEUE;
  case Stage::SockQueue: return NETLATD_STAMP_ONCPU;
  case Stage::OnCpu: return NETLATD_STAMP_RECV_RETURN;
  case Stage::Total: return NETLATD_STAMP_RECV_RETURN;
  }
  return NETLATD_STAMP_RECV_RETURN;
}

std::optional<uint64_t> stage_duration(const netlatd_packet &p, Stage s) noexcept {
  uint64_t start = 0;
  if (s == Stage::Total) {
    for (netlatd_stamp c : kTotalStartCandidates) {
      if (p.stamp_ns[c] != 0) {
        start = p.stamp_ns[c];
        break;
      }
    }
  } else {
    start = p.stamp_ns[start_stamp(s)];
  }
  const uint64_t end = p.stamp_ns[end_stamp(s)];
  if (start == 0 || end == 0 || end < start)
    return std::nullopt;
  return end - start;
}

bool stamps_ordered(const netlatd_packet &p) noexcept {
  uint64_t latest = 0;
  for (unsigned i = 0; i < NETLATD_STAMP_COUNT; ++i) {
    const uint64_t t = p.stamp_ns[i];
    if (t == 0)
      continue;
    if (t < latest)
      return false;
    latest = t;
  }
  return true;
}

std::string_view stamp_name(netlatd_stamp s) noexcept {
  switch (s) {
  case NETLATD_STAMP_IRQ: return "irq";
  case NETLATD_STAMP_SOFTIRQ_RAISE: return "softirq_raise";
  case NETLATD_STAMP_SOFTIRQ_ENTRY: return "softirq_entry";
  case NETLATD_STAMP_RECEIVE_SKB: return "netif_receive_skb";
  case NETLATD_STAMP_SOCK_QUEUE: return "sock_queue";
  case NETLATD_STAMP_WAKEUP: return "wakeup";
  case NETLATD_STAMP_ONCPU: return "oncpu";
  case NETLATD_STAMP_COPY: return "copy";
  case NETLATD_STAMP_RECV_RETURN: return "recv_return";
  case NETLATD_STAMP_COUNT: break;
  }
  return "unknown";
}

}  // namespace netlatd
