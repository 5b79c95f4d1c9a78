// What the checker of the queue-order join (order/checker.hpp) models: the
// scenarios it is given (datagrams, producers, readers) and the state it
// explores, the socket's slots as the rules keep them beside the queue as the
// kernel keeps it. Included by invariants.hpp only.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "order/rules_host.h"

namespace {

struct Datagram {
  int producer = 0;   // the CPU that queues it
  uint32_t len = 100;
  bool tracked = true;  // false: netlatd has no stamps (another interface's, a fragment)
  int reuses = -1;      // takes the skb address of this earlier datagram, once a read has taken it
  int burst = 0;        // 1: the second burst, queued once every read of the first is done and
                        // the producers are quiet (the sender's pause); its reads wait for quiet
};

struct Scenario {
  const char *name;
  std::vector<Datagram> dgrams;  // each producer queues its own in this order
  int readers = 1;
  int batch = 1;              // datagrams a producer may queue before their data-ready calls
  bool big = false;           // the socket may take its big slots (UDP_BIG_SLOTS); else its 8 inline only
  bool reads_wait_quiet = false;  // a read's look waits out a producer mid-batch (the kernel's
                                  // wait, when no vCPU stalls past it), and nothing is queued
                                  // between its look and its lock (microseconds apart)
  bool every_read_named = false;  // then every read of a tracked datagram is named
  uint32_t buf = 65536;       // the reads' buffer: a longer datagram is truncated to it
  bool buf_unknown = false;   // its size unknown to the rules (recvmmsg, readv): bufsize 0
  bool msg_trunc = false;     // MSG_TRUNC: a read returns its datagram's whole length
  // The socket has no state yet: a read can return before any data-ready
  // call of ours ran for it (read.bpf.h udp_first_read). Otherwise an
  // earlier data-ready call made it, and every datagram before was read.
  bool fresh_socket = false;
  // Datagrams whose data-ready calls run before any read takes one: the
  // reader away while a backlog builds (an overflow without exploring
  // every way to reach it).
  int backlog = 0;
  // A datagram that finds the (inline) slots full keeps its stamps in the
  // socket's spill (slots.h push_full), as one that finds the big slots full
  // does in the kernel; written out when the socket is found drained.
  bool spill = false;
};

// A reader's read: it dequeues (holding), looks, then takes the lock. A read
// that finds no state looks that up first (no_state), creates the state,
// asks whether the producers are quiet (sampled), then takes the lock.
enum Phase : uint8_t { kIdle, kHolding, kLooked, kNoState, kCreated, kSampled };

struct Reader {
  Phase phase = kIdle;
  int8_t dgram = -1;
  int8_t data_ready_seen = 0;  // data-ready calls run by its look
  udp_read_in in{};
};

constexpr int kMaxDatagrams = 12;
constexpr int kMaxReaders = 3;
constexpr int kProducers = 2;
// A scenario makes a few dozen slots at most, so a state keeps only the
// first big slots (copied per state: all UDP_BIG_SLOTS, 56 KiB, made the
// sanitizer tiers' checker minutes slower); the rules get a whole table
// (checker.hpp Whole), and a slot past these fails the scenario.
constexpr uint32_t kBigKept = 64;
constexpr uint32_t kSpillKept = 16;  // likewise of the spill's UDP_SPILL records

struct State {
  udp_sock_state st{};
  std::vector<udp_slot> big;  // the first kBigKept of the socket's big slots, when the scenario allows them
  std::vector<udp_resync_rec> spill;  // the first kSpillKept of its spill, when the scenario has one
  std::vector<int8_t> queue;  // datagrams queued, oldest first
  std::vector<int8_t> queued_order;
  int8_t next[kProducers] = {};        // of each producer's datagrams, the next to queue
  int8_t outstanding[kProducers] = {};  // queued, data-ready call still to come
  int8_t slotted[kMaxDatagrams] = {};
  int8_t gone[kMaxDatagrams] = {};  // a read took it before its slot was made
  int8_t taken_by[kMaxDatagrams];  // the reader that dequeued it, -1
  int8_t written[kMaxDatagrams] = {};
  int8_t stamped[kMaxDatagrams] = {};   // it got a slot with its stamps
  int8_t given_up[kMaxDatagrams] = {};  // a resync gave its stamped slot up, counted (order_given_up)
  int8_t stash[kMaxDatagrams] = {};  // by address (the first datagram's index): who holds it, -1
  Reader readers[kMaxReaders];
  int reads = 0, named = 0, ambiguous = 0, untracked = 0, early = 0;
  int8_t has_state = 1;      // the socket's state exists (fresh_socket: not at first)
  int8_t settled = 0;        // the last read's look found the socket drained and quiet, and
                             // no data-ready call ran before its turn (invariants.hpp check_settled)
  int8_t burst_settled = -1;  // `settled` when the second burst began; -1: not begun
  int8_t data_ready = 0;      // data-ready calls run

  State() {
    std::memset(taken_by, -1, sizeof(taken_by));
    std::memset(stash, -1, sizeof(stash));
  }
};

// The state as explored: two with equal hashes are one.
uint64_t hash_of(const State &s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      h = (h ^ static_cast<const uint8_t *>(p)[i]) * 1099511628211ull;
  };
  mix(&s.st, sizeof(s.st));
  for (uint32_t i = s.st.head; i != s.st.tail && !s.big.empty(); ++i)
    mix(&s.big[i % kBigKept], sizeof(udp_slot));
  for (uint32_t i = 0; i < s.st.spilled && i < s.spill.size(); ++i)
    mix(&s.spill[i], sizeof(udp_resync_rec));
  mix(s.queue.data(), s.queue.size());
  mix(s.queued_order.data(), s.queued_order.size());
  mix(s.next, sizeof(s.next) + sizeof(s.outstanding) + sizeof(s.slotted) + sizeof(s.gone) + sizeof(s.taken_by) +
                  sizeof(s.written) + sizeof(s.stamped) + sizeof(s.given_up) + sizeof(s.stash));
  const int8_t flags[4] = {s.has_state, s.settled, s.burst_settled, s.data_ready};
  mix(flags, sizeof(flags));
  for (const Reader &r : s.readers)
    mix(&r, sizeof(r));
  int counts[5] = {s.reads, s.named, s.ambiguous, s.untracked, s.early};
  mix(counts, sizeof(counts));
  return h;
}

std::vector<Datagram> lengths(std::initializer_list<uint32_t> lens, int producers = 1) {
  std::vector<Datagram> v;
  int i = 0;
  for (uint32_t len : lens)
    v.push_back({i++ % producers, len, true, -1});
  return v;
}

}  // namespace
