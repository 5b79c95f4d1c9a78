// Stage arithmetic on hand-built records: a missing stamp gives no duration,
// never a zero; total starts at the first stamp the packet has.
#include <set>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/model/stages.hpp"

using namespace netlatd;

namespace {

// A UDP packet through a NIC, read by a reader asleep in its receive call
// (woken by the socket, no hook for the call's start): every stamp but COPY
// (linear UDP skips it) and CALL_START.
netlatd_packet full_packet() {
  netlatd_packet p{};
  p.stamp_ns[NETLATD_STAMP_IRQ] = 1'000'000;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = 1'000'400;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = 1'002'000;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = 1'005'000;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 1'009'000;
  p.stamp_ns[NETLATD_STAMP_WAKEUP] = 1'009'500;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 1'030'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = 1'034'000;
  p.flags = NETLATD_PKT_WOKEN | NETLATD_PKT_SLEPT_IN_CALL;
  p.l4proto = 17;
  return p;
}

}  // namespace

TEST_CASE("stage names round-trip and descriptions are distinct", "[stages]") {
  const char *expected[] = {"irq", "softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total"};
  std::set<std::string> descriptions;
  for (size_t i = 0; i < kStageCount; ++i) {
    REQUIRE(stage_name(kAllStages[i]) == expected[i]);
    REQUIRE(stage_from_name(expected[i]) == kAllStages[i]);
    REQUIRE(!stage_description(kAllStages[i]).empty());
    descriptions.emplace(stage_description(kAllStages[i]));
  }
  REQUIRE(descriptions.size() == kStageCount);
  REQUIRE_FALSE(stage_from_name("IRQ").has_value());
  REQUIRE_FALSE(stage_from_name("").has_value());
}

TEST_CASE("stamp names", "[stages]") {
  REQUIRE(stamp_name(NETLATD_STAMP_IRQ) == "irq");
  REQUIRE(stamp_name(NETLATD_STAMP_SOFTIRQ_RAISE) == "softirq_raise");
  REQUIRE(stamp_name(NETLATD_STAMP_SOFTIRQ_ENTRY) == "softirq_entry");
  REQUIRE(stamp_name(NETLATD_STAMP_RECEIVE_SKB) == "netif_receive_skb");
  REQUIRE(stamp_name(NETLATD_STAMP_SOCK_QUEUE) == "sock_queue");
  REQUIRE(stamp_name(NETLATD_STAMP_WAKEUP) == "wakeup");
  REQUIRE(stamp_name(NETLATD_STAMP_SWITCH_IN) == "switch_in");
  REQUIRE(stamp_name(NETLATD_STAMP_CALL_START) == "call_start");
  REQUIRE(stamp_name(NETLATD_STAMP_COPY) == "copy");
  REQUIRE(stamp_name(NETLATD_STAMP_RECV_RETURN) == "recv_return");
  REQUIRE(stamp_name(NETLATD_STAMP_SYSCALL_EXIT) == "syscall_exit");
}

TEST_CASE("the read starts at the call, or for a reader asleep in it at its switch-in", "[stages][read_start]") {
  netlatd_packet p = full_packet();
  const uint64_t queued = p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE];

  SECTION("asleep in the call, no call-start hook: its switch-in after the wake-up") {
    REQUIRE(read_start(p) == p.stamp_ns[NETLATD_STAMP_SWITCH_IN]);
  }
  SECTION("not asleep in a receive call (an epoll waiter), no call-start hook: unknown") {
    p.flags = NETLATD_PKT_WOKEN;
    REQUIRE_FALSE(read_start(p).has_value());
    REQUIRE_FALSE(stage_duration(p, Stage::SockQueue).has_value());
    REQUIRE_FALSE(stage_duration(p, Stage::OnCpu).has_value());
    // What the packet spent in the socket is still known.
    REQUIRE(stage_duration(p, Stage::InSocket) == 25'000u);
  }
  SECTION("a reader already running (no wake-up) with no call-start hook: unknown, never its switch-in") {
    p.flags = 0;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = queued - 50'000;
    REQUIRE_FALSE(read_start(p).has_value());
  }
  SECTION("a call started after the packet was queued (an event loop): the call's start") {
    p.flags = 0;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = queued - 50'000;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued + 70'000;
    p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = queued + 73'000;
    REQUIRE(read_start(p) == queued + 70'000);
    // The application's 70 µs before its call are the packet's wait, not the read's.
    REQUIRE(stage_duration(p, Stage::SockQueue) == 70'000u);
    REQUIRE(stage_duration(p, Stage::OnCpu) == 3'000u);
  }
  SECTION("a call waiting when the packet came, switched in after it: that switch-in") {
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued - 900'000;
    REQUIRE(read_start(p) == p.stamp_ns[NETLATD_STAMP_SWITCH_IN]);
  }
  SECTION("a call waiting when the packet came, on CPU all along (busy polling): the queueing") {
    p.flags = 0;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;  // never asleep, so never woken
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = queued - 500'000;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued - 200'000;
    REQUIRE(read_start(p) == queued);
    REQUIRE(stage_duration(p, Stage::SockQueue) == 0u);
  }
  SECTION("a call waiting when the packet came, its switch-in not traced: unknown") {
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued - 900'000;
    REQUIRE_FALSE(read_start(p).has_value());
  }
  SECTION("a call waiting when the packet came, its switch-in not timed but before the call: the queueing") {
    // A task's first read: sched_switch read no clock for a task that had
    // no storage yet, and its call made that storage after the switch-in.
    p.flags = NETLATD_PKT_ON_CPU_BEFORE_CALL;
    p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
    p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 0;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued - 200'000;
    REQUIRE(read_start(p) == queued);
    REQUIRE(stage_duration(p, Stage::SockQueue) == 0u);
    REQUIRE(stage_duration(p, Stage::OnCpu) == p.stamp_ns[NETLATD_STAMP_RECV_RETURN] - queued);
    // A call that began after the queueing starts the read, as ever.
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued + 1'000;
    REQUIRE(read_start(p) == queued + 1'000);
    // Without the call's start, the flag alone says nothing.
    p.stamp_ns[NETLATD_STAMP_CALL_START] = 0;
    REQUIRE_FALSE(read_start(p).has_value());
  }
  SECTION("a call that began after the enqueue stamp but still slept for the data: its switch-in") {
    // The enqueue hook may run just before the datagram is queued (fentry):
    // a call in between finds nothing yet and sleeps.
    p.flags = NETLATD_PKT_WOKEN;
    p.stamp_ns[NETLATD_STAMP_CALL_START] = queued + 100;
    REQUIRE(read_start(p) == p.stamp_ns[NETLATD_STAMP_SWITCH_IN]);
    REQUIRE(stamps_ordered(p));
  }
  SECTION("no queueing stamp: unknown") {
    p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 0;
    REQUIRE_FALSE(read_start(p).has_value());
  }
}

TEST_CASE("durations of a complete packet", "[stages]") {
  const netlatd_packet p = full_packet();
  REQUIRE(stage_duration(p, Stage::Irq) == 2'000u);
  REQUIRE(stage_duration(p, Stage::Softirq) == 3'000u);
  REQUIRE(stage_duration(p, Stage::NetifReceive) == 4'000u);
  REQUIRE(stage_duration(p, Stage::SockQueue) == 21'000u);
  REQUIRE(stage_duration(p, Stage::OnCpu) == 4'000u);
  REQUIRE(stage_duration(p, Stage::InSocket) == 25'000u);
  REQUIRE(stage_duration(p, Stage::Total) == 34'000u);
  // The consecutive stages cover total exactly.
  uint64_t sum = 0;
  for (Stage s : {Stage::Irq, Stage::Softirq, Stage::NetifReceive, Stage::SockQueue, Stage::OnCpu})
    sum += *stage_duration(p, s);
  REQUIRE(sum == *stage_duration(p, Stage::Total));
  REQUIRE(stamps_ordered(p));
}

TEST_CASE("a missing stamp gives no duration, not zero", "[stages]") {
  netlatd_packet p = full_packet();
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = 0;
  REQUIRE_FALSE(stage_duration(p, Stage::NetifReceive).has_value());
  REQUIRE_FALSE(stage_duration(p, Stage::SockQueue).has_value());
  REQUIRE_FALSE(stage_duration(p, Stage::InSocket).has_value());
  // Stages not touching the missing stamp are unaffected.
  REQUIRE(stage_duration(p, Stage::Softirq) == 3'000u);
  REQUIRE(stage_duration(p, Stage::Total) == 34'000u);

  p = full_packet();
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = 0;
  REQUIRE_FALSE(stage_duration(p, Stage::OnCpu).has_value());
  REQUIRE_FALSE(stage_duration(p, Stage::Total).has_value());

  const netlatd_packet empty{};
  for (Stage s : kAllStages)
    REQUIRE_FALSE(stage_duration(empty, s).has_value());
}

TEST_CASE("equal stamps give a real zero duration", "[stages]") {
  netlatd_packet p = full_packet();
  // A call that starts the very nanosecond the packet is queued.
  p.flags = 0;
  p.stamp_ns[NETLATD_STAMP_WAKEUP] = 0;
  p.stamp_ns[NETLATD_STAMP_CALL_START] = p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE];
  REQUIRE(stage_duration(p, Stage::SockQueue) == 0u);
  REQUIRE(stamps_ordered(p));
}

TEST_CASE("an end before its start gives no duration", "[stages]") {
  netlatd_packet p = full_packet();
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = 999'000;  // before the IRQ
  REQUIRE_FALSE(stage_duration(p, Stage::Softirq).has_value());
  REQUIRE(stage_duration(p, Stage::NetifReceive) == 10'000u);
  REQUIRE_FALSE(stamps_ordered(p));
}

TEST_CASE("total starts at the first stamp the packet has", "[stages]") {
  netlatd_packet p = full_packet();
  const uint64_t end = p.stamp_ns[NETLATD_STAMP_RECV_RETURN];

  SECTION("IRQ when present") {
    REQUIRE(stage_duration(p, Stage::Total) == end - p.stamp_ns[NETLATD_STAMP_IRQ]);
  }
  SECTION("softirq_raise without an IRQ") {
    p.stamp_ns[NETLATD_STAMP_IRQ] = 0;
    REQUIRE(stage_duration(p, Stage::Total) == end - p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE]);
    REQUIRE_FALSE(stage_duration(p, Stage::Irq).has_value());
  }
  SECTION("softirq_entry on loopback-like paths") {
    p.stamp_ns[NETLATD_STAMP_IRQ] = 0;
    p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = 0;
    REQUIRE(stage_duration(p, Stage::Total) == end - p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY]);
  }
  SECTION("netif_receive_skb when no softirq was seen") {
    p.stamp_ns[NETLATD_STAMP_IRQ] = 0;
    p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = 0;
    p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = 0;
    REQUIRE(stage_duration(p, Stage::Total) == end - p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB]);
  }
  SECTION("no start stamp at all: no total, even with later stamps") {
    p.stamp_ns[NETLATD_STAMP_IRQ] = 0;
    p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = 0;
    p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = 0;
    p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = 0;
    REQUIRE_FALSE(stage_duration(p, Stage::Total).has_value());
  }
}

TEST_CASE("stamps_ordered skips missing stamps and catches any inversion", "[stages]") {
  netlatd_packet p{};
  REQUIRE(stamps_ordered(p));  // nothing to disagree

  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = 100;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = 500;
  REQUIRE(stamps_ordered(p));

  // Inverted against a stamp two places earlier, with a gap between.
  p.stamp_ns[NETLATD_STAMP_WAKEUP] = 90;
  REQUIRE_FALSE(stamps_ordered(p));

  p.stamp_ns[NETLATD_STAMP_WAKEUP] = 300;
  p.stamp_ns[NETLATD_STAMP_COPY] = 501;  // after recv_return
  REQUIRE_FALSE(stamps_ordered(p));
  p.stamp_ns[NETLATD_STAMP_COPY] = 400;
  REQUIRE(stamps_ordered(p));

  // The reader's call and switch-in may come before the packet: not on the path.
  p.stamp_ns[NETLATD_STAMP_CALL_START] = 10;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = 20;
  REQUIRE(stamps_ordered(p));

  // The first stamp later than everything after it.
  p.stamp_ns[NETLATD_STAMP_IRQ] = 1'000;
  REQUIRE_FALSE(stamps_ordered(p));
}

