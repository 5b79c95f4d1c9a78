// The queue-order join's rules (the checker: order/checker.hpp) on a socket
// netlatd has no state for yet: its first read can return before any
// data-ready call of ours ran for it (read.bpf.h udp_first_read, locked.h
// udp_first_decide), and race the first data-ready calls of a batch. No
// record may be wrong then, and with one reader the doubt that read leaves
// must be gone once a read looks at the socket drained and quiet.
#include "order/checker.hpp"

namespace {

Scenario fresh(const char *name, std::vector<Datagram> d, int readers, int batch, bool wait = false) {
  Scenario sc{name, std::move(d), readers, batch};
  sc.reads_wait_quiet = wait;
  sc.fresh_socket = true;
  return sc;
}

// Datagrams of two bursts: `first` then `second` (burst 1), one producer.
std::vector<Datagram> bursts(std::initializer_list<uint32_t> first, std::initializer_list<uint32_t> second,
                             int producers = 1) {
  std::vector<Datagram> v = lengths(first, producers);
  int i = static_cast<int>(v.size());
  for (uint32_t len : second)
    v.push_back({i++ % producers, len, true, -1, 1});
  return v;
}

}  // namespace

TEST_CASE("order rules: a fresh socket's first read races the first data-ready calls, one reader", "[order]") {
  // The read's wait for a quiet producer may time out (a stalled vCPU):
  // either branch of udp_first_decide, and every look after it.
  run(fresh("fresh socket, one reader, batches of 2", lengths({100, 200, 300}), 1, 2));
  run(fresh("fresh socket, one reader, equal lengths, batches of 3", lengths({100, 100, 100, 100}), 1, 3));
  run(fresh("fresh socket, one reader, two producers, batches of 2", lengths({100, 200, 300, 400}, 2), 1, 2));
  // The wait succeeds: the first read finds the producer quiet, after the
  // data-ready call of its own datagram may have run.
  run(fresh("fresh socket, one reader, reads wait for quiet", lengths({100, 200, 300}), 1, 2, true));
  auto d = lengths({100, 100, 100, 100});
  d[1].tracked = false;
  run(fresh("fresh socket, one reader, 1 of 4 untracked, batches of 2", d, 1, 2));
  // The first read's debt meets an overflow of the inline slots: both
  // doubts, and one resync to clear them.
  run(fresh("fresh socket, one reader, 9 queued into 8 inline slots", std::vector<Datagram>(9), 1, 9));
}

TEST_CASE("order rules: a fresh socket's first reads race the first data-ready calls, two readers", "[order]") {
  run(fresh("fresh socket, two readers, batches of 2", lengths({100, 100, 200}), 2, 2));
  run(fresh("fresh socket, two readers, two producers, batches of 2", lengths({100, 100, 100, 100}, 2), 2, 2));
  run(fresh("fresh socket, two readers, two producers, distinct lengths", lengths({100, 200, 300}, 2), 2, 1));
}

// Liveness, as the bpf tier's runs show it: bursts with a pause between.
// The second burst is queued once the first is read and the producers are
// done, and its reads wait for quiet (the kernel's wait succeeds). If the
// socket had settled by then (the last look before the pause found it
// drained and quiet), every read of the second burst must be named; the
// checker also fails any look of a drained, quiet socket that leaves doubt.
TEST_CASE("order rules: after a fresh socket's first read, a second burst is named once the socket settled",
          "[order]") {
  run(fresh("two bursts, reads wait for quiet", bursts({100, 200, 300}, {400, 500}), 1, 2, true));
  run(fresh("two bursts, the first burst's reads race the producer", bursts({100, 200, 300}, {400, 500}), 1, 2));
  run(fresh("two bursts, two producers, the first burst's reads race them", bursts({100, 200, 300}, {400, 500}, 2), 1,
            2));
}
