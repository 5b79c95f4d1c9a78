// The checker of the queue-order join's rules (bpf/udp/order/: decide.h,
// retire.h, locked.h, slots.h), the very code the BPF object runs under a
// UDP socket's lock, driven through every interleaving of small scenarios:
// producers that queue datagrams and make their slots at data-ready, readers
// that dequeue, look at the queue's head, then take the lock. In every
// reachable state the invariant of docs/JOIN.md holds: a record names its
// read's own datagram or no reader, each datagram is written at most once and
// only once a read has taken it, and each read is counted once (named,
// ambiguous or untracked). Included by test_order_rules.cpp and
// test_order_reads.cpp (each its own copy, in an anonymous namespace).
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "order/rules_host.h"

namespace {

struct Datagram {
  int producer = 0;   // the CPU that queues it
  uint32_t len = 100;
  bool tracked = true;  // false: netlatd has no stamps (another interface's, a fragment)
  int reuses = -1;      // takes the skb address of this earlier datagram, once a read has taken it
};

struct Scenario {
  const char *name;
  std::vector<Datagram> dgrams;  // each producer queues its own in this order
  int readers = 1;
  int batch = 1;              // datagrams a producer may queue before their data-ready calls
  bool big = false;           // the socket may take its 256 slots; else its 8 inline only
  bool reads_wait_quiet = false;  // a read's look waits out a producer mid-batch (the kernel's
                                  // wait, when no vCPU stalls past it), and nothing is queued
                                  // between its look and its lock (microseconds apart)
  bool every_read_named = false;  // then every read of a tracked datagram is named
  uint32_t buf = 65536;       // the reads' buffer: a longer datagram is truncated to it
  bool buf_unknown = false;   // its size unknown to the rules (recvmmsg, readv): bufsize 0
  bool msg_trunc = false;     // MSG_TRUNC: a read returns its datagram's whole length
};

enum Phase : uint8_t { kIdle, kHolding, kLooked };

struct Reader {
  Phase phase = kIdle;
  int8_t dgram = -1;
  udp_read_in in{};
};

constexpr int kMaxDatagrams = 12;
constexpr int kMaxReaders = 3;
constexpr int kProducers = 2;

struct State {
  udp_sock_state st{};
  std::vector<udp_slot> big;  // the socket's big slots, when the scenario allows them
  std::vector<int8_t> queue;  // datagrams queued, oldest first
  std::vector<int8_t> queued_order;
  int8_t next[kProducers] = {};        // of each producer's datagrams, the next to queue
  int8_t outstanding[kProducers] = {};  // queued, data-ready call still to come
  int8_t slotted[kMaxDatagrams] = {};
  int8_t gone[kMaxDatagrams] = {};  // a read took it before its slot was made
  int8_t taken_by[kMaxDatagrams];  // the reader that dequeued it, -1
  int8_t written[kMaxDatagrams] = {};
  int8_t stash[kMaxDatagrams] = {};  // by address (the first datagram's index): who holds it, -1
  Reader readers[kMaxReaders];
  int reads = 0, named = 0, ambiguous = 0, untracked = 0;

  State() {
    std::memset(taken_by, -1, sizeof(taken_by));
    std::memset(stash, -1, sizeof(stash));
  }
};

struct Checker {
  const Scenario &sc;
  std::vector<std::vector<int>> mine;  // each producer's datagrams
  std::unordered_set<uint64_t> seen;
  uint64_t states = 0, ends = 0;
  std::string failure;
  std::vector<std::string> path;  // the steps to the state explored now

  explicit Checker(const Scenario &s) : sc(s), mine(kProducers) {
    for (int i = 0; i < static_cast<int>(s.dgrams.size()); ++i)
      mine[static_cast<size_t>(s.dgrams[static_cast<size_t>(i)].producer)].push_back(i);
  }

  int address_of(int d) const {
    while (sc.dgrams[static_cast<size_t>(d)].reuses >= 0)
      d = sc.dgrams[static_cast<size_t>(d)].reuses;
    return d;
  }
  static uint64_t skb(int addr) { return 0xffff888000001000ull + static_cast<uint64_t>(addr) * 0x100; }

  static uint64_t hash_of(const State &s) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void *p, size_t n) {
      for (size_t i = 0; i < n; ++i)
        h = (h ^ static_cast<const uint8_t *>(p)[i]) * 1099511628211ull;
    };
    mix(&s.st, sizeof(s.st));
    for (uint32_t i = s.st.head; i != s.st.tail && !s.big.empty(); ++i)
      mix(&s.big[i & (UDP_BIG_SLOTS - 1)], sizeof(udp_slot));
    mix(s.queue.data(), s.queue.size());
    mix(s.queued_order.data(), s.queued_order.size());
    mix(s.next, sizeof(s.next) + sizeof(s.outstanding) + sizeof(s.slotted) + sizeof(s.gone) +
                    sizeof(s.taken_by) + sizeof(s.written) + sizeof(s.stash));
    for (const Reader &r : s.readers)
      mix(&r, sizeof(r));
    int counts[4] = {s.reads, s.named, s.ambiguous, s.untracked};
    mix(counts, sizeof(counts));
    return h;
  }

  bool quiet(const State &s) const { return s.outstanding[0] == 0 && s.outstanding[1] == 0; }

  void fail(const std::string &why) {
    if (!failure.empty())
      return;
    failure = why + "\n  after:";
    for (const std::string &step : path)
      failure += " " + step;
  }

  void step(const State &n, const std::string &what) {
    path.push_back(what);
    explore(n);
    path.pop_back();
  }

  void explore(const State &s) {
    if (!failure.empty() || !seen.insert(hash_of(s)).second)
      return;
    ++states;
    bool moved = false;
    for (int p = 0; p < kProducers; ++p) {
      moved |= try_queue(s, p);
      moved |= try_data_ready(s, p);
    }
    for (int r = 0; r < sc.readers; ++r)
      moved |= try_reader(s, r);
    if (!moved)
      at_end(s);
  }

  bool try_queue(const State &s, int p) {
    const auto &list = mine[static_cast<size_t>(p)];
    if (s.next[p] >= static_cast<int>(list.size()) || s.outstanding[p] >= sc.batch)
      return false;
    const int d = list[static_cast<size_t>(s.next[p])];
    const Datagram &g = sc.dgrams[static_cast<size_t>(d)];
    // An address comes back only once the skb that had it was freed: taken by a read.
    if (g.reuses >= 0 && s.taken_by[g.reuses] < 0)
      return false;
    State n = s;
    n.next[p]++;
    n.outstanding[p]++;
    n.queue.push_back(static_cast<int8_t>(d));
    n.queued_order.push_back(static_cast<int8_t>(d));
    if (g.tracked)
      n.stash[address_of(d)] = static_cast<int8_t>(d);
    step(n, "q" + std::to_string(d));
    return true;
  }

  // A data-ready call makes one slot: for the oldest datagram queued without one.
  bool try_data_ready(const State &s, int p) {
    if (s.outstanding[p] == 0)
      return false;
    State n = s;
    n.outstanding[p]--;
    int d = -1;
    for (int8_t q : n.queued_order)
      if (!n.slotted[q]) {
        d = q;
        break;
      }
    n.slotted[d] = 1;
    const Datagram &g = sc.dgrams[static_cast<size_t>(d)];
    const int addr = address_of(d);
    push_counts pushes{};
    udp_big_state *big = big_of(n);
    if (n.taken_by[d] >= 0) {
      n.gone[d] = 1;
      order_push(&n.st, big, 0, nullptr, 0, &pushes);  // a read took it first: gone
    } else if (g.tracked && n.stash[addr] == d) {
      netlatd_rx rx{};
      rx.receive_ns = static_cast<uint64_t>(d) + 1;  // names the datagram in its records
      rx.len = g.len;
      n.stash[addr] = -1;
      order_push(&n.st, big, skb(addr), &rx, 0, &pushes);
    } else {
      order_push(&n.st, big, skb(addr), nullptr, g.len, &pushes);
    }
    step(n, "dr" + std::to_string(d) + (n.gone[d] ? "(gone)" : ""));
    return true;
  }

  bool try_reader(const State &s, int r) {
    const Reader &rd = s.readers[r];
    State n = s;
    Reader &nr = n.readers[r];
    if (rd.phase == kIdle) {
      if (s.queue.empty())
        return false;
      nr.dgram = n.queue.front();
      n.queue.erase(n.queue.begin());
      n.taken_by[nr.dgram] = static_cast<int8_t>(r);
      nr.phase = kHolding;
    } else if (rd.phase == kHolding) {
      if (sc.reads_wait_quiet && !quiet(s))
        return false;
      nr.in = udp_read_in{};
      nr.in.tail = n.st.tail;
      nr.in.head = n.queue.empty() ? 0 : skb(address_of(n.queue.front()));
      // What on_udp_read passes in (read.bpf.h): the length returned, the
      // buffer's size where read_bufsize finds it, MSG_TRUNC.
      const uint32_t len = sc.dgrams[static_cast<size_t>(nr.dgram)].len;
      nr.in.ret = sc.msg_trunc || len <= sc.buf ? len : sc.buf;
      // read_bufsize is asked only with two slots or more (read.bpf.h).
      nr.in.bufsize = sc.buf_unknown || n.st.tail - n.st.head < 2 ? 0 : sc.buf;
      nr.in.trunc = sc.msg_trunc;
      nr.in.quiet = quiet(s);
      nr.in.tid = static_cast<uint32_t>(r) + 1;
      nr.phase = kLooked;
      if (sc.reads_wait_quiet)
        return finish_read(n, r, "look+lock");
    } else {
      return finish_read(n, r, "lock");
    }
    step(n, "R" + std::to_string(r) + (nr.phase == kHolding ? "take" : "look") + std::to_string(nr.dgram) +
                (nr.phase == kLooked && !nr.in.quiet ? "(busy)" : ""));
    return true;
  }

  // The read's turn under the lock, then the reader is free for its next read.
  bool finish_read(State &n, int r, const char *what) {
    const std::string label = "R" + std::to_string(r) + what + std::to_string(n.readers[r].dgram);
    path.push_back(label);
    locked_turn(n, r);
    path.pop_back();
    n.readers[r] = Reader{};
    step(n, label);
    return true;
  }

  udp_big_state *big_of(State &n) {
    if (n.big.empty())
      return nullptr;
    return reinterpret_cast<udp_big_state *>(n.big.data());
  }

  void locked_turn(State &n, int r) {
    static thread_local const State *current;
    current = &n;
    order_stash_has = [](__u64 addr_skb) {
      for (int a = 0; a < kMaxDatagrams; ++a)
        if (skb(a) == addr_skb)
          return current->stash[a] >= 0;
      return false;
    };
    const int d = n.readers[r].dgram;
    order_out out{};
    const int result = order_read(&n.st, big_of(n), &n.readers[r].in, &out);
    const std::string where = std::string(sc.name) + ": reader " + std::to_string(r) + ", datagram " +
                              std::to_string(d) + ", state " + std::to_string(states);
    bool own_named = false;
    for (uint32_t i = 0; i < out.n; ++i) {
      const int id = static_cast<int>(out.out[i].rx.receive_ns) - 1;
      if (id < 0 || id >= static_cast<int>(sc.dgrams.size()))
        return fail(where + ": a record of no datagram");
      if (!out.ambiguous[i] && id != d)
        return fail(where + ": WRONG record, names this read for datagram " + std::to_string(id));
      if (n.taken_by[id] < 0)
        return fail(where + ": datagram " + std::to_string(id) + " written while still queued");
      if (n.written[id]++)
        return fail(where + ": datagram " + std::to_string(id) + " written twice");
      own_named |= !out.ambiguous[i];
    }
    // A datagram a read took before its slot was made has no stamps to
    // join (they expire, counted as unjoined_expired): its read is untracked.
    const bool tracked = sc.dgrams[static_cast<size_t>(d)].tracked && !n.gone[d];
    n.reads++;
    if (result == READ_MATCH && tracked && own_named)
      n.named++;
    else if (result == READ_AMBIGUOUS)
      n.ambiguous++;
    else if (result == READ_UNTRACKED && (!tracked || !own_named))
      n.untracked++;
    else
      fail(where + ": decision " + std::to_string(result) + " for a " + (tracked ? "tracked" : "untracked") +
           " datagram, own record " + (own_named ? "written" : "not written"));
  }

  void at_end(const State &s) {
    ++ends;
    const int total = static_cast<int>(sc.dgrams.size());
    if (s.reads != total)
      return fail(std::string(sc.name) + ": stuck with " + std::to_string(s.reads) + " of " +
                  std::to_string(total) + " reads done");
    if (s.named + s.ambiguous + s.untracked != s.reads)
      fail(std::string(sc.name) + ": a read counted twice or not at all");
    if (sc.every_read_named && s.ambiguous != 0)
      fail(std::string(sc.name) + ": " + std::to_string(s.ambiguous) + " reads not named");
  }
};

Checker run(const Scenario &sc) {
  Checker c(sc);
  State s;
  if (sc.big)
    s.big.resize(UDP_BIG_SLOTS);
  c.explore(s);
  INFO(sc.name << ": " << c.states << " states, " << c.ends << " ends; " << c.failure);
  CHECK(c.failure.empty());
  CHECK(c.ends > 0);
  return c;
}

std::vector<Datagram> lengths(std::initializer_list<uint32_t> lens, int producers = 1) {
  std::vector<Datagram> v;
  int i = 0;
  for (uint32_t len : lens)
    v.push_back({i++ % producers, len, true, -1});
  return v;
}

}  // namespace
