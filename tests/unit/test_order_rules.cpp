// The queue-order join's rules through every interleaving of small
// scenarios (the checker: order/checker.hpp): readers and producers, batches,
// untracked datagrams, reused addresses, an overflow of the slots.
#include "order/checker.hpp"
TEST_CASE("order rules: one reader names every read once the producers are quiet", "[order]") {
  run({"one reader, one producer", lengths({100, 200, 100, 300, 100}), 1, 2, false, true, true});
  run({"one reader, two producers", lengths({100, 100, 200, 200, 100}, 2), 1, 1, false, true, true});
  auto d = lengths({100, 100, 100, 100, 100}, 2);
  d[1].tracked = false;
  d[3].tracked = false;
  run({"one reader, 2 of 5 untracked", d, 1, 2, false, true, true});
}

TEST_CASE("order rules: several readers, producers mid-batch: no record wrong", "[order]") {
  run({"3 readers, 2 producers, equal lengths", lengths({100, 100, 100}, 2), 3, 1});
  run({"3 readers, 2 producers, distinct lengths", lengths({100, 200, 300}, 2), 3, 1});
  run({"2 readers, 2 producers, equal lengths", lengths({100, 100, 100, 100}, 2), 2, 1});
  run({"2 readers, 1 producer, batches of 2", lengths({100, 100, 200, 100}), 2, 2});
  auto d = lengths({100, 100, 100, 100}, 2);
  d[1].tracked = false;
  run({"2 readers, 1 of 4 untracked", d, 2, 1});
}

TEST_CASE("order rules: an skb address reused while its first datagram's read is in flight", "[order]") {
  auto d = lengths({100, 100, 100, 100}, 2);
  d[2].reuses = 0;
  d[3].reuses = 1;
  run({"2 readers, addresses 0 and 1 reused", d, 2, 1});
}

// Found by this checker (then marked to fail): a read looks at the queue's
// head (and whether a producer is mid-batch) before it takes the socket's
// lock. A datagram queued and given its slot in between was not in that
// look: the read took "queue empty" for true, and under the lock a resync
// emptied the slots while that datagram, still queued, had one; a later
// read's only candidate could then be another datagram: one reader, a WRONG
// record. The look now carries the slots' tail it saw, and under the lock a
// moved tail keeps it from a resync or a drained retirement, and out of the
// slots made since (decide.h look_fresh, read_frontier).
TEST_CASE("order rules: a datagram queued and slotted between a read's look and its lock survives the resync",
          "[order]") {
  run({"one reader, 9 queued into 8 inline slots", std::vector<Datagram>(9), 1, 9});
}

TEST_CASE("order rules: more datagrams in flight than slots: the big slots take them", "[order]") {
  run({"one reader, 9 queued, the big slots at hand", std::vector<Datagram>(9), 1, 9, true});
}

// Several readers whose slots overflowed: the socket's reads are never named
// again (retire.h), and once a read finds it drained its stale slots are
// written out (each once, none still queued), not left to leave with the
// socket.
TEST_CASE("order rules: several readers past the inline slots: stale slots written once drained", "[order]") {
  Scenario sc{"2 readers, 9 queued into 8 inline slots, 1 more as they read", std::vector<Datagram>(10), 2, 1};
  sc.backlog = 9;
  run(sc);
}

// Datagrams that find the slots full keep their stamps in the socket's
// spill (slots.h push_full), to be written out when the socket is found
// drained: each once, none while still queued, none left behind uncounted;
// with one reader the socket resyncs and names its reads again.
TEST_CASE("order rules: datagrams past the slots keep their stamps in the spill", "[order]") {
  Scenario one{"one reader, 9 queued into 8 inline slots and the spill, 2 more as it reads",
               std::vector<Datagram>(11), 1, 2};
  one.spill = true;
  one.backlog = 9;
  run(one);
  Scenario two{"2 readers, 10 queued into 8 inline slots and the spill", std::vector<Datagram>(10), 2, 1};
  two.spill = true;
  two.backlog = 10;
  run(two);
}
