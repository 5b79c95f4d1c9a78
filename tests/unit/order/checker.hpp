// The checker of the queue-order join's rules (bpf/udp/order/: decide.h,
// retire.h, locked.h, slots.h), the very code the BPF object runs under a
// UDP socket's lock, driven through every interleaving of small scenarios:
// producers that queue datagrams and make their slots at data-ready, readers
// that dequeue, look at the queue's head, then take the lock. Every reachable
// state is held to the invariant of docs/JOIN.md (order/invariants.hpp).
// Included by test_order_rules.cpp, test_order_reads.cpp and
// test_order_first_read.cpp (each its own copy, in an anonymous namespace).
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "order/invariants.hpp"

namespace {

struct Checker : Invariants {
  std::vector<std::vector<int>> mine;  // each producer's datagrams
  std::unordered_set<uint64_t> seen;

  explicit Checker(const Scenario &s) : Invariants(s), mine(kProducers) {
    for (int i = 0; i < static_cast<int>(s.dgrams.size()); ++i)
      mine[static_cast<size_t>(s.dgrams[static_cast<size_t>(i)].producer)].push_back(i);
  }

  int address_of(int d) const {
    while (sc.dgrams[static_cast<size_t>(d)].reuses >= 0)
      d = sc.dgrams[static_cast<size_t>(d)].reuses;
    return d;
  }
  static uint64_t skb(int addr) { return 0xffff888000001000ull + static_cast<uint64_t>(addr) * 0x100; }

  bool quiet(const State &s) const { return s.outstanding[0] == 0 && s.outstanding[1] == 0; }

  // Whether a read of datagram `d` waits out a producer mid-batch.
  bool waits(int d) const { return sc.reads_wait_quiet || dgram(d).burst == 1; }

  // The second burst comes once the first is read and its producers are done.
  bool second_burst_may_start(const State &s) const {
    int first = 0;
    for (const Datagram &g : sc.dgrams)
      first += g.burst == 0;
    return s.reads >= first && quiet(s);
  }

  void step(const State &n, const std::string &what) {
    path.push_back(what);
    if (!n.big.empty() && n.st.tail > kBigKept)
      fail("a slot past the " + std::to_string(kBigKept) + " big slots a state keeps");
    if (n.st.spilled > kSpillKept)
      fail("a spilled datagram past the " + std::to_string(kSpillKept) + " a state keeps");
    explore(n);
    path.pop_back();
  }

  void explore(const State &s) {
    if (!failure.empty() || !seen.insert(hash_of(s)).second)
      return;
    ++states;
    if (!stamped_counted(s))
      return;
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
    if (g.burst == 1 && s.burst_settled < 0 && !second_burst_may_start(s))
      return false;
    State n = s;
    if (g.burst == 1 && n.burst_settled < 0)
      n.burst_settled = n.settled;
    n.next[p]++;
    n.outstanding[p]++;
    n.queue.push_back(static_cast<int8_t>(d));
    n.queued_order.push_back(static_cast<int8_t>(d));
    if (g.tracked)
      n.stash[address_of(d)] = static_cast<int8_t>(d);
    step(n, "q" + std::to_string(d));
    return true;
  }

  // A data-ready call makes one slot: for the oldest datagram queued without
  // one. One a read took already gets a gone placeholder, which keeps its
  // stamps when its walk saw it queued before the read took it (the read
  // between the walk and the lock). The checker gives every such datagram
  // that still has its stamps a stamped one: the rules treat both alike
  // but for the record a stamped one gives (always packet-only), which is
  // what is checked; exploring both doubled the states of the larger
  // scenarios to minutes.
  bool try_data_ready(const State &s, int p) {
    if (s.outstanding[p] == 0)
      return false;
    State n = s;
    n.outstanding[p]--;
    n.has_state = 1;  // udp_state_create, before the walk
    n.data_ready++;
    int d = -1;
    for (int8_t q : n.queued_order)
      if (!n.slotted[q]) {
        d = q;
        break;
      }
    n.slotted[d] = 1;
    const Datagram &g = sc.dgrams[static_cast<size_t>(d)];
    const int addr = address_of(d);
    const bool stashed = g.tracked && n.stash[addr] == d;
    netlatd_rx rx{};
    rx.receive_ns = static_cast<uint64_t>(d) + 1;  // names the datagram in its records
    rx.len = g.len;
    push_counts pushes{};
    {
      Whole<udp_slot, UDP_BIG_SLOTS> slots(n.big);  // synced back before the step explores on
      Whole<udp_resync_rec, UDP_SPILL> spill(n.spill);
      udp_big_state *big = slots.as<udp_big_state>();
      udp_spill_state *sp = spill.as<udp_spill_state>();
      if (n.taken_by[d] >= 0)
        n.gone[d] = 1;  // a read took it first
      if (stashed) {
        n.stash[addr] = -1;
        if (n.gone[d])
          order_push_gone(&n.st, big, skb(addr), &rx, &pushes);
        else
          order_push(&n.st, big, sp, skb(addr), &rx, 0, &pushes);
        n.stamped[d] = pushes.pushed + pushes.spilled > 0;
      } else {
        order_push(&n.st, big, sp, n.gone[d] ? 0 : skb(addr), nullptr, n.gone[d] ? 0 : g.len, &pushes);
      }
    }
    step(n, "dr" + std::to_string(d) + (n.gone[d] ? "(gone)" : ""));
    return true;
  }

  bool try_reader(const State &s, int r) {
    switch (s.readers[r].phase) {
    case kIdle:
      return try_take(s, r);
    case kHolding:
      return s.has_state ? try_look(s, r) : no_state(s, r);
    case kLooked: {
      State n = s;
      return finish_read(n, r, "lock");
    }
    default:
      return try_first_read(s, r);
    }
  }

  bool try_take(const State &s, int r) {
    if (s.queue.empty() || s.data_ready < sc.backlog)
      return false;
    State n = s;
    Reader &nr = n.readers[r];
    nr.dgram = n.queue.front();
    n.queue.erase(n.queue.begin());
    n.taken_by[nr.dgram] = static_cast<int8_t>(r);
    nr.phase = kHolding;
    step(n, "R" + std::to_string(r) + "take" + std::to_string(nr.dgram));
    return true;
  }

  bool try_look(const State &s, int r) {
    const int d = s.readers[r].dgram;
    if (waits(d) && !quiet(s))
      return false;
    State n = s;
    Reader &nr = n.readers[r];
    nr.in = udp_read_in{};
    nr.in.tail = n.st.tail;
    nr.in.missing = n.st.missing;
    nr.data_ready_seen = n.data_ready;
    nr.in.head = n.queue.empty() ? 0 : skb(address_of(n.queue.front()));
    // What on_udp_read passes in (read.bpf.h): the length returned, the
    // buffer's size where read_bufsize finds it, MSG_TRUNC.
    const uint32_t len = dgram(d).len;
    nr.in.ret = sc.msg_trunc || len <= sc.buf ? len : sc.buf;
    // read_bufsize is asked only with two slots or more (read.bpf.h).
    nr.in.bufsize = sc.buf_unknown || n.st.tail - n.st.head < 2 ? 0 : sc.buf;
    nr.in.trunc = sc.msg_trunc;
    nr.in.quiet = quiet(s);
    nr.in.tid = static_cast<uint32_t>(r) + 1;
    nr.phase = kLooked;
    if (waits(d))
      return finish_read(n, r, "look+lock");
    step(n, "R" + std::to_string(r) + "look" + std::to_string(d) + (nr.in.quiet ? "" : "(busy)"));
    return true;
  }

  // on_udp_read's lookup of the socket's state finds none: the read goes on
  // in udp_first_read (read.bpf.h), whatever a producer is doing.
  bool no_state(const State &s, int r) {
    State n = s;
    n.readers[r].phase = kNoState;
    step(n, "R" + std::to_string(r) + "nostate" + std::to_string(n.readers[r].dgram));
    return true;
  }

  // udp_first_read: the state created (or found: a data-ready call or
  // another read made it since), producers_quiet asked (a wait, like a
  // look's), then its turn under the lock.
  bool try_first_read(const State &s, int r) {
    const Reader &rd = s.readers[r];
    State n = s;
    Reader &nr = n.readers[r];
    const std::string who = "R" + std::to_string(r);
    if (rd.phase == kNoState) {
      n.has_state = 1;
      nr.phase = kCreated;
      step(n, who + "create" + std::to_string(rd.dgram));
      return true;
    }
    if (rd.phase == kCreated) {
      if (waits(rd.dgram) && !quiet(s))
        return false;
      nr.in.quiet = quiet(s);
      nr.phase = kSampled;
      if (waits(rd.dgram))
        return finish_first_read(n, r);
      step(n, who + (nr.in.quiet ? "quiet" : "busy") + std::to_string(rd.dgram));
      return true;
    }
    return finish_first_read(n, r);
  }

  bool finish_first_read(State &n, int r) {
    const int d = n.readers[r].dgram;
    const std::string label = "R" + std::to_string(r) + "first" + std::to_string(d);
    path.push_back(label);
    const int result = order_first_read(&n.st, n.readers[r].in.quiet);
    ++first_reads;
    count_read(n, r, result, false);
    n.settled = 0;  // a debt, or none, that no look of a drained socket settled
    path.pop_back();
    n.readers[r] = Reader{};
    step(n, label);
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

  // A table the rules index whole (the big slots, the spill), of which a
  // state keeps only the first few: copied in, and back out when done.
  template <typename Elem, size_t kWhole>
  class Whole {
  public:
    explicit Whole(std::vector<Elem> &kept) : kept_(kept) {
      if (kept_.empty())
        return;
      static thread_local std::vector<Elem> whole(kWhole);
      std::copy(kept_.begin(), kept_.end(), whole.begin());
      table_ = whole.data();
    }
    ~Whole() {
      if (table_)
        std::copy(table_, table_ + kept_.size(), kept_.begin());
    }
    Whole(const Whole &) = delete;
    Whole &operator=(const Whole &) = delete;
    template <typename Table>
    Table *as() const {
      return reinterpret_cast<Table *>(table_);
    }

  private:
    std::vector<Elem> &kept_;
    Elem *table_ = nullptr;
  };

  // A read's turn under the lock (order_read), held to what the invariant
  // asks of its records and counts (invariants.hpp).
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
    const udp_read_in &in = n.readers[r].in;
    // What resync_slots needs: the look found the queues empty and no
    // producer mid-batch, and no data-ready call ran since (none made a slot
    // or found none left); with one reader thread, no read in flight.
    const bool drained = in.quiet && in.head == 0 && n.data_ready == n.readers[r].data_ready_seen;
    const bool settles = sc.readers == 1 && drained;
    order_out out{};
    int result;
    const std::vector<int> live_before = stamped_held(n);
    {
      Whole<udp_slot, UDP_BIG_SLOTS> slots(n.big);
      Whole<udp_resync_rec, UDP_SPILL> spill(n.spill);
      result = order_read(&n.st, slots.as<udp_big_state>(), spill.as<udp_spill_state>(), &in, &out);
    }
    const std::string where = where_of(n, r);
    bool own_named = false;
    if (!records_checked(n, d, out, where, own_named))
      return;
    count_read(n, r, result, own_named);
    if (!given_up_counted(n, live_before, out.given_up, where))
      return;
    n.settled = settles;
    if (settles)
      check_settled(n, where);
    if (drained)
      check_drained(n, where);
  }
};

Checker run(const Scenario &sc) {
  Checker c(sc);
  State s;
  s.has_state = !sc.fresh_socket;
  if (sc.big)
    s.big.resize(kBigKept);
  if (sc.spill)
    s.spill.resize(kSpillKept);
  c.explore(s);
  INFO(sc.name << ": " << c.states << " states, " << c.ends << " ends (" << c.settled_ends
               << " with the second burst on a settled socket); " << c.failure);
  CHECK(c.failure.empty());
  CHECK(c.ends > 0);
  // A check that never applied would prove nothing.
  if (sc.fresh_socket)
    CHECK(c.first_reads > 0);
  bool bursts = false;
  for (const Datagram &g : sc.dgrams)
    bursts |= g.burst == 1;
  if (bursts)
    CHECK(c.settled_ends > 0);
  return c;
}

}  // namespace
