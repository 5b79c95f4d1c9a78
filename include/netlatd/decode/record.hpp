#pragma once
// The ring buffer's records (struct netlatd_wire_packet and
// netlatd_wire_reader, include/netlatd/abi.h) decoded into the form the rest
// of the daemon works on (struct netlatd_packet): every stamp absolute, the
// reader named. The one place that knows the wire layout on this side.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include <linux/types.h>
#include "netlatd/abi.h"

namespace netlatd {

class RecordDecoder {
 public:
  enum class Kind {
    Packet,    // `out` holds the packet
    Reader,    // a reader was named: nothing to report
    Unnamed,   // a packet whose reader is not named: left out, counted by unnamed() (tid 0: the kernel side
               // could not name it, ring full) or forgotten() (a reader prune() forgot while it was in the ring)
    Malformed  // neither size: left out
  };

  // One record as the ring hands it over. Records must come in ring order:
  // a reader's name comes ahead of its packets.
  Kind decode(const void *data, size_t size, netlatd_packet &out);

  size_t readers() const noexcept { return readers_.size(); }
  uint64_t unnamed() const noexcept { return unnamed_; }
  uint64_t forgotten() const noexcept { return forgotten_; }
  // Packets decoded with a reader stamp the kernel side left out for lying
  // over 4.29 s before the return (NETLATD_WIRE_FAR).
  uint64_t far() const noexcept { return far_; }
  // Forgets the readers that named no record since `before_ns` (their
  // return stamps' clock, CLOCK_MONOTONIC): a task's exit is not in the
  // ring, and without this the table would grow with every thread that
  // ever read. The kernel side must then be told to name each reader
  // again (cfg_readers_gen) before it writes its next record; one whose
  // record was already in the ring is counted unnamed, never guessed.
  // Returns how many were forgotten.
  size_t prune(uint64_t before_ns);
  uint64_t latest_ns() const noexcept { return latest_ns_; }

 private:
  struct Reader {
    uint32_t tgid = 0;
    char comm[NETLATD_COMM_LEN] = {};
    uint64_t cgroup = 0;
    uint64_t used_ns = 0;  // the latest return stamp seen when it was named or named a record
  };
  uint64_t latest_ns_ = 0;  // the latest return stamp decoded
  std::unordered_map<uint32_t, Reader> readers_;
  uint64_t unnamed_ = 0;
  uint64_t forgotten_ = 0;
  uint64_t far_ = 0;
};

// A packet as the kernel side would write it, for tests and the fuzz seed
// corpus: nullopt when the kernel side could not write it (a field too wide,
// a reader stamp after the return or more than 4.29 s before it, a stamp the
// kernel side never writes, ...). The reader part goes in a second record.
std::optional<netlatd_wire_packet> encode_packet(const netlatd_packet &p) noexcept;
netlatd_wire_reader encode_reader(const netlatd_packet &p) noexcept;

}  // namespace netlatd
