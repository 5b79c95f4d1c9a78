#include "netlatd/model/stages.hpp"

#include "netlatd/stage_math.h"

namespace netlatd {

// The stage math numbers the stages as Stage does.
static_assert(NETLATD_STAGE_TOTAL == static_cast<int>(Stage::Total));
static_assert(kStageCount == NETLATD_AGG_STAGES);

namespace {

// A record's stamps as the stage math takes them (include/netlatd/stage_math.h),
// the read start worked out from them.
struct PathStamps {
  __u64 t[NETLATD_PATH_STAMPS];
};

PathStamps path_stamps(const netlatd_packet &p) noexcept {
  PathStamps s{};
  __u64 *t = s.t;
  t[NETLATD_PATH_IRQ] = p.stamp_ns[NETLATD_STAMP_IRQ];
  t[NETLATD_PATH_RAISE] = p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE];
  t[NETLATD_PATH_ENTRY] = p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY];
  t[NETLATD_PATH_RECEIVE] = p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB];
  t[NETLATD_PATH_QUEUED] = p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE];
  t[NETLATD_PATH_WAKEUP] = p.stamp_ns[NETLATD_STAMP_WAKEUP];
  t[NETLATD_PATH_COPY] = p.stamp_ns[NETLATD_STAMP_COPY];
  t[NETLATD_PATH_RETURN] = p.stamp_ns[NETLATD_STAMP_RECV_RETURN];
  t[NETLATD_PATH_SWITCH_IN] = p.stamp_ns[NETLATD_STAMP_SWITCH_IN];
  t[NETLATD_PATH_CALL_START] = p.stamp_ns[NETLATD_STAMP_CALL_START];
  t[NETLATD_PATH_READ_START] = netlatd_read_start(t[NETLATD_PATH_QUEUED], t[NETLATD_PATH_WAKEUP],
                                                  t[NETLATD_PATH_SWITCH_IN], t[NETLATD_PATH_CALL_START], p.flags);
  return s;
}

std::optional<uint64_t> known(__u64 v) noexcept { return v ? std::optional<uint64_t>(v) : std::nullopt; }

std::optional<uint64_t> span(__u64 start, __u64 end) noexcept {
  const __u64 d = netlatd_span(start, end);
  return d == NETLATD_SPAN_NONE ? std::nullopt : std::optional<uint64_t>(d);
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
  return known(path_stamps(p).t[NETLATD_PATH_READ_START]);
}

StageDurations stage_durations(const netlatd_packet &p) noexcept {
  StageDurations d;
  const PathStamps s = path_stamps(p);
  const __u64 *t = s.t;
#define NETLATD_STAGE_SPAN(stage, from, to) d.of[stage] = span(t[from], t[to]);
  NETLATD_STAGE_BOUNDS(NETLATD_STAGE_SPAN)
#undef NETLATD_STAGE_SPAN
  d.of[NETLATD_STAGE_TOTAL] = span(netlatd_total_start(t), t[NETLATD_PATH_RETURN]);
  d.ordered = netlatd_path_ordered(t) != 0;
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
