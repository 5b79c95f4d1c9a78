// --count-ops (issue 32): the BPF programs count their lock pairs, ring
// reservations, map lookups and updates and clock reads. Over a known number
// of datagrams, the counts must meet what the design takes per datagram: a
// lock pair at its data-ready and one at its read where only queue order
// names a read (bpf/udp/order), a ring reservation per record, a clock read
// per distinct stamp the records carry.
#include <set>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "reader_run.hpp"

using namespace nltest;

namespace {

// Every stamp value the records carry: one clock read each at least (a
// stamp shared by the packets of one NET_RX run is one read, one value).
// By value, whatever its name: one read can stand under two (read_start is
// one of the others; a wake-up is its data-ready call's read). Counted by
// name, this took up to a third more than the reads, which only reads at
// every context switch of every task made up for.
size_t distinct_stamps(const std::vector<Record> &records) {
  std::set<int64_t> seen;
  for (const Record &r : records)
    for (const auto &[name, ns] : r.mono)
      seen.insert(ns);
  return seen.size();
}

}  // namespace

TEST_CASE("count-ops: per datagram, the join's lock pairs, a reservation per record, a clock read per stamp",
          "[bpf][count-ops]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  const int bursts = scaled(125), n = bursts * 8;
  ReaderRunSpec spec = udp_spec(net, 5443, 4, static_cast<size_t>(n));
  spec.reader_args = {"--bind", spec.to, "--threads", "1", "--call", "recvfrom", "--expect", std::to_string(n)};
  spec.sender_args = {"--to",   spec.to, "--threads", "1",    "--bursts", std::to_string(bursts),
                      "--burst-size", "8", "--gap-us", "2000", "--len", "200"};
  spec.netlatd_args = {"--count-ops"};
  ReaderRun run = run_readers(net, spec);
  report("UDP, --count-ops", run);
  check_no_wrong_records(run);
  const Totals &t = run.totals;
  const auto op = [&](const char *name) { return t.ops.count(name) ? t.ops.at(name) : 0; };
  const uint64_t locks = op("lock_pairs"), ring = op("ring_reserves"), lookups = op("map_lookups"),
                 updates = op("map_updates"), clocks = op("clock_reads");
  const uint64_t records = run.records.size(), stamps = distinct_stamps(run.records);
  std::fprintf(stderr,
               "  %llu datagrams matched, %llu records, %zu distinct stamps; ops: lock_pairs %llu, "
               "ring_reserves %llu, map_lookups %llu, map_updates %llu, clock_reads %llu\n",
               static_cast<unsigned long long>(t.matching), static_cast<unsigned long long>(records),
               static_cast<size_t>(stamps), static_cast<unsigned long long>(locks),
               static_cast<unsigned long long>(ring), static_cast<unsigned long long>(lookups),
               static_cast<unsigned long long>(updates), static_cast<unsigned long long>(clocks));
  INFO("matched " << t.matching << ", records " << records << ", stamps " << stamps << "; lock_pairs " << locks
                  << ", ring_reserves " << ring << ", map_lookups " << lookups << ", map_updates " << updates
                  << ", clock_reads " << clocks);
  REQUIRE(t.ops.size() == 5);
  REQUIRE(t.matching >= static_cast<uint64_t>(n));
  REQUIRE(records > 0);
  // Each record was one reservation; a reader's record (who it is) may be
  // one more, once per reader and again when the daemon asks.
  CHECK(ring >= records);
  CHECK(ring <= 2 * t.matching + 16);
  // Each stamp value came from a clock read of its own.
  CHECK(clocks >= stamps);
  // The filter looks each matching packet's device up, at least.
  CHECK(lookups >= t.matching);
  CHECK(updates <= t.matching);
  if (kernel_names_udp_reads()) {
    // fentry/skb_consume_udp names each read's datagram: no queue, no lock.
    CHECK(locks == 0);
  } else {
    // Queue order: one pair at each datagram's data-ready (its slot), one at
    // its read (taking the slot); a retry when another CPU promoted the
    // socket's slots in between is rare.
    CHECK(locks >= 2 * static_cast<uint64_t>(n));
    CHECK(locks <= 2 * t.matching + t.matching / 20 + 8);
  }
}
