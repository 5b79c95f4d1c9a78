#pragma once
// The stages of the receive path, each the span between two stamps of
// struct netlatd_packet (include/netlatd/abi.h). Named after the kernel event
// each starts at. docs/OUTPUT.md documents them for users.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include <linux/types.h>
#include "netlatd/abi.h"

namespace netlatd {

enum class Stage : uint8_t {
  Irq,           // irq_handler_entry (NIC)    -> softirq_entry (NET_RX)
  Softirq,       // softirq_entry (NET_RX)     -> netif_receive_skb
  NetifReceive,  // netif_receive_skb          -> queued on the socket
  SockQueue,     // queued on the socket       -> the reader on CPU
  OnCpu,         // the reader on CPU          -> the receive call returns
  Total,         // first stamp of the packet  -> the receive call returns
};
inline constexpr std::array<Stage, 6> kAllStages{Stage::Irq, Stage::Softirq, Stage::NetifReceive,
                                                 Stage::SockQueue, Stage::OnCpu, Stage::Total};
inline constexpr size_t kStageCount = kAllStages.size();

std::string_view stage_name(Stage s) noexcept;         // "irq", "softirq", "netif_receive", "sock_queue", "oncpu", "total"
std::string_view stage_description(Stage s) noexcept;  // one line for --help, --check and text output
std::optional<Stage> stage_from_name(std::string_view name) noexcept;

// The stamp a stage starts and ends at (Total starts at the first non-zero of
// IRQ, SOFTIRQ_RAISE, SOFTIRQ_ENTRY, RECEIVE_SKB; start_stamp() returns IRQ for it).
netlatd_stamp start_stamp(Stage s) noexcept;
netlatd_stamp end_stamp(Stage s) noexcept;

// Duration of a stage for one packet; nullopt when a stamp is missing (0) or
// the end is before the start. Never a made-up zero.
std::optional<uint64_t> stage_duration(const netlatd_packet &p, Stage s) noexcept;

// True when every non-zero stamp is >= the non-zero stamps before it in
// enum netlatd_stamp order.
bool stamps_ordered(const netlatd_packet &p) noexcept;

std::string_view stamp_name(netlatd_stamp s) noexcept;  // "irq", "softirq_raise", ..., "recv_return"

}  // namespace netlatd
