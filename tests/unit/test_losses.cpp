// The loss accounting fed readings of the kernel's counters, as the daemon
// reads them each 100 ms and at each interval's end.
#include <cstdint>
#include <set>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/losses.hpp"
#include "netlatd/model/snapshot.hpp"

using netlatd::IntervalReport;
using netlatd::KernelCounts;
using netlatd::Losses;
using netlatd::MetricsSnapshot;
using netlatd::RunningCount;

namespace {

KernelCounts counts(uint64_t ringbuf_full, uint64_t stack_dropped, uint64_t ambiguous) {
  KernelCounts k;
  k.drops[NETLATD_DROP_RINGBUF_FULL] = ringbuf_full;
  k.drops[NETLATD_DROP_STACK_DROPPED] = stack_dropped;
  k.counters[NETLATD_CNT_AMBIGUOUS_READS] = ambiguous;
  return k;
}

}  // namespace

TEST_CASE("losses: every reason has its own name", "[losses]") {
  std::set<std::string> names;
  for (int i = 0; i < NETLATD_DROP_COUNT; i++) {
    const std::string name = netlatd::drop_name(i);
    CHECK(name != "unknown");
    names.insert(name);
  }
  CHECK(names.size() == NETLATD_DROP_COUNT);
  CHECK(std::string(netlatd::drop_name(NETLATD_DROP_SOCK_FIFO_FULL)) == "sock_fifo_full");
  CHECK(std::string(netlatd::drop_name(NETLATD_DROP_UNJOINED)) == "unjoined_reused");
  CHECK(std::string(netlatd::drop_name(NETLATD_DROP_COUNT)) == "unknown");
}

TEST_CASE("losses: a running count takes differences, and starts again when its counter does", "[losses]") {
  RunningCount c(100);
  CHECK(c.total() == 100);
  CHECK(c.since_mark() == 0);
  c.read(130);
  c.read(150);
  CHECK(c.take() == 50);
  CHECK(c.total() == 150);
  // The programs loaded anew: the counter reads 7 since then. Taken as 7
  // new, not as 7 - 150 wrapped to some 1.8e19.
  c.read(7);
  CHECK(c.total() == 157);
  CHECK(c.take() == 7);
  c.read(7);
  CHECK(c.take() == 0);
  c.read(UINT64_MAX);
  CHECK(c.take() == UINT64_MAX - 7);
}

TEST_CASE("losses: each interval has the deltas since the last, the metrics the totals", "[losses]") {
  Losses losses(false, false);
  // Counted before the daemon's first reading: the daemon says READY before
  // it, and traffic sent on READY is counted in between. In the first
  // interval as in the totals: an interval that left them out lost a read
  // of the pipeline test's 250 (counted untracked) in a third of its runs.
  losses.start(counts(5, 2, 1));

  losses.read(counts(8, 2, 4), 0, 0);  // a metrics publish between two interval ends
  losses.add_expired(3, 1);
  losses.read(counts(15, 6, 4), 2, 1);
  IntervalReport first;
  losses.end_interval(first);
  CHECK(first.drops.at("ringbuf_full") == 15);
  CHECK(first.drops.at("stack_dropped") == 6);
  CHECK(first.drops.at("sock_fifo_full") == 0);
  CHECK(first.drops.at("unjoined_expired") == 3);
  CHECK(first.drops.at("unread_expired") == 1);
  CHECK(first.drops.at("output_dropped") == 2);
  CHECK(first.drops.at("outliers_rate_limited") == 1);
  CHECK(first.ambiguous_reads == 4);
  CHECK(first.cgroup_filtered.empty());  // no --cgroup
  CHECK(!first.napi);                    // no napi_poll hook

  MetricsSnapshot m;
  losses.publish(m);
  CHECK(m.losses.at("ringbuf_full") == 15);
  CHECK(m.losses.count("stack_dropped") == 0);  // the network's loss, not netlatd's
  CHECK(m.kernel_drops == 6);
  CHECK(m.losses.at("unjoined_expired") == 3);
  CHECK(m.losses.at("output_dropped") == 2);
  CHECK(m.reads_unnamed.at("ambiguous") == 4);
  CHECK(losses.total_lost() == 15 + 6 + 3 + 1);
  CHECK(losses.summary() == "ringbuf_full 15, stack_dropped 6");

  losses.read(counts(15, 6, 4), 2, 1);
  IntervalReport quiet;
  losses.end_interval(quiet);
  CHECK(quiet.drops.at("ringbuf_full") == 0);
  CHECK(quiet.drops.at("unjoined_expired") == 0);
  CHECK(quiet.drops.at("output_dropped") == 0);
  CHECK(quiet.ambiguous_reads == 0);
}

TEST_CASE("losses: reads unnamed, each by its own why, in the line and the metrics", "[losses]") {
  Losses losses(false, false);
  KernelCounts k;
  losses.start(k);
  k.counters[NETLATD_CNT_AMBIGUOUS_READS] = 7;
  k.counters[NETLATD_CNT_UNTRACKED_READS] = 5;
  k.counters[NETLATD_CNT_EARLY_READS] = 3;
  losses.read(k, 0, 0);
  IntervalReport r;
  losses.end_interval(r);
  CHECK(r.ambiguous_reads == 7);
  CHECK(r.untracked_reads == 5);
  CHECK(r.early_reads == 3);
  MetricsSnapshot m;
  losses.publish(m);
  CHECK(m.reads_unnamed.at("ambiguous") == 7);
  CHECK(m.reads_unnamed.at("untracked") == 5);
  CHECK(m.reads_unnamed.at("early") == 3);
}

TEST_CASE("losses: a counter that goes backwards counts from 0 again, totals keep what came before",
          "[losses]") {
  Losses losses(false, false);
  losses.start(counts(0, 0, 0));
  losses.read(counts(40, 0, 9), 0, 0);
  IntervalReport before;
  losses.end_interval(before);
  CHECK(before.drops.at("ringbuf_full") == 40);

  // The kernel's arrays are new (programs loaded again): they read from 0.
  losses.read(counts(3, 1, 2), 0, 0);
  IntervalReport after;
  losses.end_interval(after);
  CHECK(after.drops.at("ringbuf_full") == 3);
  CHECK(after.drops.at("stack_dropped") == 1);
  CHECK(after.ambiguous_reads == 2);
  MetricsSnapshot m;
  losses.publish(m);
  CHECK(m.losses.at("ringbuf_full") == 43);  // a Prometheus counter never goes down
  CHECK(m.reads_unnamed.at("ambiguous") == 11);
  CHECK(losses.total_lost() == 44);
}

TEST_CASE("losses: hook misses count from the programs' load, per hook", "[losses]") {
  Losses losses(false, false);
  KernelCounts k;
  k.hook_misses["tp_btf/tcp_probe"] = 4;  // before start: still in the first interval
  losses.start(k);
  losses.read(k, 0, 0);
  k.hook_misses["tp_btf/tcp_probe"] = 6;
  k.hook_misses["fexit/sock_recvmsg"] = 1;
  losses.read(k, 0, 0);
  IntervalReport r;
  losses.end_interval(r);
  CHECK(r.hook_misses.at("tp_btf/tcp_probe") == 6);
  CHECK(r.hook_misses.at("fexit/sock_recvmsg") == 1);
  MetricsSnapshot m;
  losses.publish(m);
  CHECK(m.hook_misses.at("tp_btf/tcp_probe") == 6);
  IntervalReport next;
  losses.read(k, 0, 0);
  losses.end_interval(next);
  CHECK(next.hook_misses.at("tp_btf/tcp_probe") == 0);
}

TEST_CASE("losses: --cgroup and napi_poll add their counts, only when there", "[losses]") {
  Losses losses(true, true);
  losses.start(KernelCounts{});
  KernelCounts k;
  k.counters[NETLATD_CNT_CGROUP_OUTSIDE] = 12;
  k.counters[NETLATD_CNT_CGROUP_NO_READER] = 2;
  k.counters[NETLATD_CNT_NAPI_POLLS] = 30;
  k.counters[NETLATD_CNT_NAPI_PACKETS] = 90;
  k.counters[NETLATD_CNT_NAPI_BUDGET_FULL] = 1;
  k.counters[NETLATD_CNT_TCP_BYTES_READ] = 4096;
  k.counters[NETLATD_CNT_TCP_BYTES_SKIPPED] = 1024;
  losses.read(k, 0, 0);
  IntervalReport r;
  losses.end_interval(r);
  CHECK(r.cgroup_filtered.at("outside") == 12);
  CHECK(r.cgroup_filtered.at("no_reader") == 2);
  REQUIRE(r.napi);
  CHECK(r.napi->polls == 30);
  CHECK(r.napi->packets == 90);
  CHECK(r.napi->budget_exhausted == 1);
  CHECK(r.tcp_bytes_read == 4096);
  CHECK(r.tcp_bytes_skipped == 1024);
  MetricsSnapshot m;
  losses.publish(m);
  CHECK(m.cgroup_filtered.at("outside") == 12);
  CHECK(m.tcp_bytes.at("read") == 4096);
  CHECK(m.tcp_bytes.at("skipped") == 1024);
  CHECK(losses.counter(NETLATD_CNT_NAPI_PACKETS) == 90);
  CHECK(losses.summary() == "none");
}
