#pragma once
// The stages of the receive path, each the span between two instants of one
// packet's record (include/netlatd/abi.h). Named after the kernel event each
// starts at. docs/OUTPUT.md documents them for users.
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
  SockQueue,     // queued on the socket       -> read start (see read_start())
  OnCpu,         // read start                 -> the receive call returns
  InSocket,      // queued on the socket       -> the receive call returns
  Total,         // first stamp of the packet  -> the receive call returns
};
inline constexpr std::array<Stage, 7> kAllStages{Stage::Irq,      Stage::Softirq, Stage::NetifReceive, Stage::SockQueue,
                                                 Stage::OnCpu,    Stage::InSocket, Stage::Total};
inline constexpr size_t kStageCount = kAllStages.size();

std::string_view stage_name(Stage s) noexcept;         // "irq", ..., "in_socket", "total"
std::string_view stage_description(Stage s) noexcept;  // one line for --help, --check and text output
std::optional<Stage> stage_from_name(std::string_view name) noexcept;

// Where the `oncpu` stage starts: the moment the receive call that returned
// the packet was running for it (netlatd_read_start, netlatd/stage_math.h,
// says how); nullopt when not known. Never guessed.
std::optional<uint64_t> read_start(const netlatd_packet &p) noexcept;

// Duration of a stage for one packet; nullopt when an instant is missing or
// the end is before the start. Never a made-up zero.
std::optional<uint64_t> stage_duration(const netlatd_packet &p, Stage s) noexcept;

// True when the instants along the path are in order: irq, softirq_raise,
// softirq_entry, netif_receive_skb, sock_queue, wakeup, read start, copy,
// recv_return (missing ones skipped; netlatd_path_ordered). The reader's
// switch-in and call start are not on the path: they may come before the
// packet. syscall_exit is not either: no hook writes it.
bool stamps_ordered(const netlatd_packet &p) noexcept;

// Every stage's duration of one record and whether its stamps are in order,
// all at once (stage_duration() and stamps_ordered() ask it for one): the
// daemon adds each record to two aggregates and checks it for an outlier;
// asked stage by stage, that was 17 read_start()s a record and half the
// daemon's CPU at 100k records/s.
struct StageDurations {
  bool ordered = false;
  std::array<std::optional<uint64_t>, kStageCount> of{};
  std::optional<uint64_t> operator[](Stage s) const noexcept { return of[static_cast<size_t>(s)]; }
};
StageDurations stage_durations(const netlatd_packet &p) noexcept;

std::string_view stamp_name(netlatd_stamp s) noexcept;  // "irq", "softirq_raise", ..., "syscall_exit"

}  // namespace netlatd
