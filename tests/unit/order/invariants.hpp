// What the checker of the queue-order join (order/checker.hpp) requires of
// every state it explores, the invariant of docs/JOIN.md: a record names its
// read's own datagram or no reader, each datagram is written at most once and
// only once a read has taken it, each read is counted once (named, ambiguous
// or untracked), and each datagram that got its stamps is written, given up
// or still held, once. And with one reader, liveness: once a read's look
// found the socket drained and quiet, with no slot made since (what
// retire.h's resync needs), the socket is left with nothing in doubt, and
// the second burst's reads are named. With the exploration's tallies and its
// first failure. Included by checker.hpp only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "order/model.hpp"

namespace {

struct Invariants {
  const Scenario &sc;
  uint64_t states = 0, ends = 0;
  uint64_t settled_ends = 0;  // ends whose second burst began on a settled socket
  uint64_t first_reads = 0;   // turns of reads that found no state
  std::string failure;
  std::vector<std::string> path;  // the steps to the state explored now

  explicit Invariants(const Scenario &s) : sc(s) {}

  const Datagram &dgram(int d) const { return sc.dgrams[static_cast<size_t>(d)]; }

  void fail(const std::string &why) {
    if (!failure.empty())
      return;
    failure = why + "\n  after:";
    for (const std::string &step : path)
      failure += " " + step;
  }

  std::string where_of(const State &n, int r) const {
    return std::string(sc.name) + ": reader " + std::to_string(r) + ", datagram " +
           std::to_string(n.readers[r].dgram) + ", state " + std::to_string(states);
  }

  // The datagrams whose slots are LIVE with stamps, oldest first.
  static std::vector<int> stamped_live(const State &s) {
    std::vector<int> ids;
    for (uint32_t i = s.st.head; i != s.st.tail; ++i) {
      const udp_slot &slot = s.st.big ? s.big[i % kBigKept] : s.st.small[i & (UDP_SMALL_SLOTS - 1)];
      if (slot.state == SLOT_LIVE && !slot.no_record)
        ids.push_back(static_cast<int>(slot.rx.receive_ns) - 1);
    }
    return ids;
  }

  // And those whose stamps wait in the spill: every datagram that got its
  // stamps in, and is neither written nor given up.
  static std::vector<int> stamped_held(const State &s) {
    std::vector<int> ids = stamped_live(s);
    for (uint32_t i = 0; i < s.st.spilled; ++i)
      ids.push_back(static_cast<int>(s.spill[i].rx.receive_ns) - 1);
    return ids;
  }

  // In every state: the socket's count of stamped slots is theirs.
  bool stamped_counted(const State &s) {
    if (s.st.stamped == stamped_live(s).size())
      return true;
    fail(std::string(sc.name) + ": the socket's count of stamped slots is " + std::to_string(s.st.stamped) + ", " +
         std::to_string(stamped_live(s).size()) + " are");
    return false;
  }

  // The records of the turn of a read of datagram `d`: each of a datagram a
  // read took, written once, naming this read's own or no reader. Notes
  // each written; `own_named`, whether one named this read.
  bool records_checked(State &n, int d, const order_out &out, const std::string &where, bool &own_named) {
    for (uint32_t i = 0; i < out.n; ++i) {
      const int id = static_cast<int>(out.out[i].rx.receive_ns) - 1;
      std::string wrong;
      if (id < 0 || id >= static_cast<int>(sc.dgrams.size()))
        wrong = ": a record of no datagram";
      else if (!out.ambiguous[i] && id != d)
        wrong = ": WRONG record, names this read for datagram " + std::to_string(id);
      else if (n.taken_by[id] < 0)
        wrong = ": datagram " + std::to_string(id) + " written while still queued";
      else if (n.written[id]++)
        wrong = ": datagram " + std::to_string(id) + " written twice";
      if (!wrong.empty()) {
        fail(where + wrong);
        return false;
      }
      own_named |= !out.ambiguous[i];
    }
    return true;
  }

  // A stamped slot that left the window unwritten was given up, and the
  // turn counts each such one (`counted`): no datagram leaves without a
  // record or a count (the identity traced + counted = received, per
  // datagram). `live_before`: what stamped_held found before the turn.
  bool given_up_counted(State &n, const std::vector<int> &live_before, uint32_t counted, const std::string &where) {
    const std::vector<int> live_after = stamped_held(n);
    uint32_t left = 0;
    for (int id : live_before)
      if (!n.written[id] && std::find(live_after.begin(), live_after.end(), id) == live_after.end()) {
        n.given_up[id]++;
        left++;
      }
    if (counted == left)
      return true;
    fail(where + ": " + std::to_string(left) + " stamped slots left unwritten, " + std::to_string(counted) +
         " counted");
    return false;
  }

  // Whether a datagram a read took before its slot was made kept its stamps
  // in its gone placeholder: what a read decided READ_EARLY names.
  bool gone_stamped(const State &n) const {
    for (size_t d = 0; d < sc.dgrams.size(); ++d)
      if (n.gone[d] && n.stamped[d])
        return true;
    return false;
  }

  // Counts the read once, by its decision; and, in the second burst of a
  // socket that settled before it, fails a tracked datagram's read not named.
  void count_read(State &n, int r, int result, bool own_named) {
    const int d = n.readers[r].dgram;
    // A datagram a read took before its slot was made has no stamps to
    // join (they expire, counted as unjoined_expired): its read is untracked.
    const bool tracked = dgram(d).tracked && !n.gone[d];
    n.reads++;
    if (result == READ_MATCH && tracked && own_named)
      n.named++;
    else if (result == READ_AMBIGUOUS)
      n.ambiguous++;
    else if (result == READ_UNTRACKED && (!tracked || !own_named))
      n.untracked++;
    else if (result == READ_EARLY && !own_named && gone_stamped(n))
      n.early++;
    else
      return fail(where_of(n, r) + ": decision " + std::to_string(result) + " for a " +
                  (tracked ? "tracked" : "untracked") + " datagram, own record " +
                  (own_named ? "written" : "not written"));
    if (dgram(d).burst == 1 && n.burst_settled == 1 && tracked && result != READ_MATCH)
      fail(where_of(n, r) + ": a read of the second burst not named (decision " + std::to_string(result) +
           "), though the socket had settled before it");
  }

  // Liveness: a read whose look found the socket drained and quiet, with no
  // data-ready call since, and no other reader: its turn leaves nothing in
  // doubt. Every LIVE slot was then a datagram whose read returned, so
  // nothing owed or live may remain for a later read to count as a candidate
  // (with at most UDP_SCAN of them, all in sight: the scenarios are smaller).
  void check_settled(const State &n, const std::string &where) {
    const udp_sock_state &st = n.st;
    if (st.owed_unsure || st.incomplete || st.owed || st.live || st.spilled || st.spill_busy)
      fail(where + ": DOUBT KEPT after a read looked at a drained, quiet socket: owed_unsure " +
           std::to_string(st.owed_unsure) + ", incomplete " + std::to_string(st.incomplete) + ", owed " +
           std::to_string(st.owed) + ", live " + std::to_string(st.live));
  }

  // After a turn whose look found the socket drained and quiet, with no slot
  // made since. Several readers on a socket whose slots overflowed: it is
  // never named again, so that turn leaves no stamped slot behind to go
  // uncounted with the socket.
  void check_drained(const State &n, const std::string &where) {
    if (n.st.readers_many && n.st.incomplete && (n.st.stamped || n.st.spilled))
      fail(where + ": STALE SLOTS KEPT on a drained socket of several readers: " + std::to_string(n.st.stamped) +
           " stamped slots, " + std::to_string(n.st.spilled) + " spilled, that no read will name");
  }

  void at_end(const State &s) {
    ++ends;
    const int total = static_cast<int>(sc.dgrams.size());
    if (s.reads != total)
      return fail(std::string(sc.name) + ": stuck with " + std::to_string(s.reads) + " of " +
                  std::to_string(total) + " reads done");
    if (s.named + s.ambiguous + s.untracked + s.early != s.reads)
      fail(std::string(sc.name) + ": a read counted twice or not at all");
    // Each datagram that got its stamps into a slot is written once, given
    // up once (counted), or still LIVE in its slot (the socket's close).
    const std::vector<int> live = stamped_held(s);
    for (int d = 0; d < total; ++d)
      if (s.stamped[d] && s.written[d] + s.given_up[d] +
                                  (std::find(live.begin(), live.end(), d) != live.end() ? 1 : 0) != 1)
        fail(std::string(sc.name) + ": datagram " + std::to_string(d) + " written " +
             std::to_string(s.written[d]) + ", given up " + std::to_string(s.given_up[d]));
    if (sc.every_read_named && s.ambiguous != 0)
      fail(std::string(sc.name) + ": " + std::to_string(s.ambiguous) + " reads not named");
    settled_ends += s.burst_settled == 1;
  }
};

}  // namespace
