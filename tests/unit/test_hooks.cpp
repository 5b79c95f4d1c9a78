// Hook choice with a mocked kernel, so the fallback paths of both our kernels
// are exercised here without root: 6.18 (tracepoints only, no fentry/kprobes)
// and Debian's 6.1 (fentry works; sock:sk_data_ready, sock:sock_recv_length missing).
#include <map>
#include <set>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/service/daemon.hpp"
#include "netlatd/kernel/hooks.hpp"
#include "netlatd/model/interval.hpp"

using namespace netlatd;

namespace {

class FakeKernel : public KernelFeatures {
public:
  bool fentry = false, tp_btf = true;
  std::set<std::string> tracepoints = {
      "irq_handler_entry", "irq_handler_exit", "softirq_raise",          "softirq_entry",
      "softirq_exit",      "napi_poll",        "netif_receive_skb",      "tcp_probe",
      "kfree_skb",         "sched_waking",     "sched_switch",           "skb_copy_datagram_iovec",
      "tcp_rcv_space_adjust", "udp_fail_queue_rcv_skb"};
  std::set<std::string> functions = {"__udp_enqueue_schedule_skb", "sock_recvmsg", "skb_consume_udp"};
  std::set<std::string> members;  // "struct.member"
  std::set<std::string> kfuncs;
  std::set<std::string> vars;
  std::map<std::string, int64_t> percpu;  // offsets in the per-CPU section

  bool has_vmlinux_btf() const override { return true; }
  bool has_ringbuf() const override { return true; }
  bool can_attach(AttachKind kind, std::string_view target) const override {
    std::string t(target);
    switch (kind) {
    case AttachKind::TpBtf: return tp_btf && tracepoints.count(t);
    case AttachKind::Fentry:
    case AttachKind::Fexit: return fentry && functions.count(t);
    }
    return false;
  }
  std::string kernel_release() const override { return "test"; }
  bool has_member(std::string_view strct, std::string_view member) const override {
    return members.count(std::string(strct) + "." + std::string(member)) > 0;
  }
  bool has_kfunc(std::string_view name) const override { return kfuncs.count(std::string(name)) > 0; }
  bool has_var(std::string_view name) const override { return vars.count(std::string(name)) > 0; }
  std::optional<int64_t> percpu_offset(std::string_view name) const override {
    auto it = percpu.find(std::string(name));
    return it == percpu.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
};

// This machine's kernel: every tracepoint, fentry refused, 6.18's UDP
// producer queues.
FakeKernel kernel_6_18() {
  FakeKernel k;
  k.tracepoints.insert({"sk_data_ready", "sock_recv_length"});
  k.members.insert("udp_sock.udp_prod_queue");
  k.kfuncs.insert("bpf_rdonly_cast");
  k.vars.insert("__preempt_count");
  return k;
}

FakeKernel kernel_6_1() {
  FakeKernel k;
  k.fentry = true;
  k.vars.insert("__preempt_count");
  return k;
}

// Debian's 6.12: the sock tracepoints and fentry.
FakeKernel kernel_6_12() {
  FakeKernel k;
  k.fentry = true;
  k.tracepoints.insert({"sk_data_ready", "sock_recv_length"});
  k.kfuncs.insert("bpf_rdonly_cast");
  return k;
}

}  // namespace

TEST_CASE("6.18 profile: tracepoints everywhere, no fentry: UDP joined by queue order", "[hooks]") {
  HookPlan plan = choose_hooks(kernel_6_18());
  REQUIRE(plan.runnable());
  CHECK(plan.label(Point::UdpEnqueue) == "tp_btf/sk_data_ready");
  CHECK(plan.label(Point::RecvReturn) == "tp_btf/sock_recv_length");
  CHECK(plan.label(Point::NetifReceiveSkb) == "tp_btf/netif_receive_skb");
  CHECK(plan.label(Point::TcpCopied) == "tp_btf/tcp_rcv_space_adjust");
  CHECK(plan.udp_join == UdpJoin::OrderProdq);
  CHECK_FALSE(plan.has(Point::RecvCallStart));
  CHECK_FALSE(plan.has(Point::UdpConsume));
  // Only needed where the slot is made before the datagram is queued.
  CHECK_FALSE(plan.has(Point::UdpEnqueueFailed));
  for (const HookChoice &c : plan.choices)
    if (c.chosen)
      CHECK(c.chosen->kind == AttachKind::TpBtf);
  ReportHeader h;
  fill_stage_hooks(h, plan, 1);
  CHECK(h.stages[static_cast<size_t>(Stage::OnCpu)].start_hook == "tp_btf/sched_switch");
}

TEST_CASE("6.1 profile: the sock tracepoints fall back to fentry/fexit, and fentry names the datagram", "[hooks]") {
  HookPlan plan = choose_hooks(kernel_6_1());
  REQUIRE(plan.runnable());
  CHECK(plan.label(Point::UdpEnqueue) == "fentry/__udp_enqueue_schedule_skb");
  // Joined by skb: kfree_skb takes a datagram the enqueue dropped.
  CHECK_FALSE(plan.has(Point::UdpEnqueueFailed));
  CHECK(plan.label(Point::RecvReturn) == "fexit/sock_recvmsg");
  CHECK(plan.label(Point::RecvCallStart) == "fentry/sock_recvmsg");
  CHECK(plan.label(Point::TcpEnqueue) == "tp_btf/tcp_probe");
  CHECK(plan.udp_join == UdpJoin::Consume);
  ReportHeader h;
  fill_stage_hooks(h, plan, 1);
  for (Stage s : kAllStages)
    CHECK(h.stages[static_cast<size_t>(s)].applicable);
  CHECK(h.stages[static_cast<size_t>(Stage::OnCpu)].end_hook == "fexit/sock_recvmsg");
  CHECK(h.stages[static_cast<size_t>(Stage::OnCpu)].start_hook == "fentry/sock_recvmsg|tp_btf/sched_switch");
}

TEST_CASE("6.12 profile: tracepoints where they exist, fentry for what only it gives", "[hooks]") {
  HookPlan plan = choose_hooks(kernel_6_12());
  REQUIRE(plan.runnable());
  // Before the datagram is queued: no read can overtake its queueing stamp.
  CHECK(plan.label(Point::UdpEnqueue) == "fentry/__udp_enqueue_schedule_skb");
  CHECK_FALSE(plan.has(Point::UdpEnqueueFailed));
  CHECK(plan.label(Point::RecvReturn) == "tp_btf/sock_recv_length");
  CHECK(plan.label(Point::UdpConsume) == "fentry/skb_consume_udp");
  CHECK(plan.label(Point::RecvCallStart) == "fentry/sock_recvmsg");
  CHECK(plan.udp_join == UdpJoin::Consume);
}

TEST_CASE("the join by skb needs the enqueue's fentry: without it, queue order", "[hooks]") {
  FakeKernel k = kernel_6_12();
  k.functions.erase("__udp_enqueue_schedule_skb");
  HookPlan plan = choose_hooks(k);
  REQUIRE(plan.runnable());
  CHECK(plan.label(Point::UdpEnqueue) == "tp_btf/sk_data_ready");
  CHECK_FALSE(plan.has(Point::UdpConsume));
  CHECK_FALSE(plan.has(Point::UdpEnqueueFailed));
  CHECK(plan.udp_join != UdpJoin::Consume);
}

TEST_CASE("without fentry or 6.18's producer queues, UDP is joined by order without lag detection", "[hooks]") {
  FakeKernel k = kernel_6_18();
  k.members.clear();
  HookPlan plan = choose_hooks(k);
  REQUIRE(plan.runnable());
  CHECK(plan.udp_join == UdpJoin::Order);
}

TEST_CASE("an IRQ stamp needs the handler's exit and the NET_RX raise", "[hooks]") {
  FakeKernel k = kernel_6_18();
  k.tracepoints.erase("irq_handler_exit");
  HookPlan plan = choose_hooks(k);
  CHECK_FALSE(plan.has(Point::IrqHandlerEntry));
  CHECK_FALSE(plan.has(Point::IrqHandlerExit));
  ReportHeader h;
  fill_stage_hooks(h, plan, 2);
  CHECK_FALSE(h.stages[static_cast<size_t>(Stage::Irq)].applicable);
  CHECK(h.stages[static_cast<size_t>(Stage::Softirq)].applicable);
}

TEST_CASE("without tp_btf only the fexit stand-ins remain, and they do not suffice", "[hooks]") {
  FakeKernel k = kernel_6_1();
  k.tp_btf = false;
  HookPlan plan = choose_hooks(k);
  CHECK(plan.label(Point::NetifReceiveSkb).empty());
  CHECK(plan.label(Point::UdpEnqueue) == "fentry/__udp_enqueue_schedule_skb");
  CHECK(plan.label(Point::RecvReturn) == "fexit/sock_recvmsg");
  CHECK_FALSE(plan.runnable());
  CHECK(plan.missing_required == std::vector<std::string>{"netif_receive_skb"});
}

TEST_CASE("a kernel with neither sock tracepoints nor fentry cannot run", "[hooks]") {
  FakeKernel k;  // 6.1-like tracepoints, but fentry refused
  HookPlan plan = choose_hooks(k);
  CHECK_FALSE(plan.runnable());
  CHECK(plan.missing_required == std::vector<std::string>{"udp_enqueue", "recv_return"});
  CHECK_FALSE(plan.has(Point::UdpConsume));
}

TEST_CASE("irq stage is not applicable on an interface without IRQ lines", "[hooks]") {
  HookPlan plan = choose_hooks(kernel_6_18());
  ReportHeader h;
  fill_stage_hooks(h, plan, 0);
  const auto &irq = h.stages[static_cast<size_t>(Stage::Irq)];
  CHECK_FALSE(irq.applicable);
  CHECK(irq.why_not.find("no IRQ lines") != std::string::npos);
  CHECK(h.stages[static_cast<size_t>(Stage::Softirq)].applicable);
}

TEST_CASE("softirq stage needs both entry and exit hooks", "[hooks]") {
  FakeKernel k = kernel_6_18();
  k.tracepoints.erase("softirq_exit");
  k.vars.clear();  // and no preempt count to stand in for the exit
  HookPlan plan = choose_hooks(k);
  CHECK(plan.label(Point::SoftirqEntry).empty());
  ReportHeader h;
  fill_stage_hooks(h, plan, 2);
  CHECK_FALSE(h.stages[static_cast<size_t>(Stage::Softirq)].applicable);
  CHECK_FALSE(h.stages[static_cast<size_t>(Stage::Irq)].applicable);
}

#if defined(__x86_64__)
TEST_CASE("the preempt count ends a NET_RX run where it can, softirq_exit where it cannot", "[hooks]") {
  SECTION("6.1 and 6.15+: __preempt_count, no softirq_exit program") {
    HookPlan plan = choose_hooks(kernel_6_18());
    CHECK(plan.preempt_count == PreemptCount::PerCpu);
    CHECK(plan.label(Point::SoftirqExit).empty());
    // Said why, where --check and the start log list the hooks.
    CHECK(plan.stood_in(Point::SoftirqExit) == preempt_count_description(PreemptCount::PerCpu));
    CHECK(plan.stood_in(Point::SoftirqEntry).empty());
    CHECK(plan.label(Point::SoftirqEntry) == "tp_btf/softirq_entry");
    // The programs that ask whether NET_RX runs read the count.
    CHECK(plan.choice(Point::SoftirqRaise).chosen->program == "sirq_raise_pc");
    CHECK(plan.choice(Point::NetifReceiveSkb).chosen->program == "rcv_skb_pc");
    CHECK(plan.choice(Point::KfreeSkb).chosen->program == "drop_skb_pc");
    ReportHeader h;
    fill_stage_hooks(h, plan, 2);
    CHECK(h.stages[static_cast<size_t>(Stage::Softirq)].applicable);
    CHECK(h.stages[static_cast<size_t>(Stage::Irq)].applicable);
  }
  SECTION("6.2 to 6.14: pcpu_hot") {
    FakeKernel k = kernel_6_18();
    k.vars = {"pcpu_hot"};
    k.members.insert("pcpu_hot.preempt_count");
    HookPlan plan = choose_hooks(k);
    CHECK(plan.preempt_count == PreemptCount::PcpuHot);
    CHECK(plan.label(Point::SoftirqExit).empty());
    CHECK(plan.has(Point::SoftirqEntry));
  }
  SECTION("the variable in BTF but not in kallsyms (this machine): found from the runqueue") {
    FakeKernel k = kernel_6_18();
    k.vars.clear();
    k.members.insert({"sched_entity.cfs_rq", "cfs_rq.rq"});
    k.percpu = {{"__preempt_count", 86064}, {"runqueues", 178752}};
    HookPlan plan = choose_hooks(k);
    CHECK(plan.preempt_count == PreemptCount::Runqueue);
    CHECK(plan.preempt_count_from_rq == 86064 - 178752);
    CHECK(plan.label(Point::SoftirqExit).empty());
    CHECK(plan.stood_in(Point::SoftirqExit) == preempt_count_description(PreemptCount::Runqueue));
    // The variants that name no kernel symbol: a _pc one would not load.
    CHECK(plan.choice(Point::SoftirqRaise).chosen->program == "sirq_raise_rq");
    CHECK(plan.choice(Point::NetifReceiveSkb).chosen->program == "rcv_skb_rq");
    CHECK(plan.choice(Point::KfreeSkb).chosen->program == "drop_skb_rq");
    // Without CONFIG_FAIR_GROUP_SCHED (no CFS queue in a task), or without
    // bpf_rdonly_cast: softirq_exit.
    for (int without = 0; without < 2; without++) {
      FakeKernel k2 = k;
      if (without == 0)
        k2.members.erase("sched_entity.cfs_rq");
      else
        k2.kfuncs.erase("bpf_rdonly_cast");
      HookPlan p2 = choose_hooks(k2);
      CHECK(p2.preempt_count == PreemptCount::None);
      CHECK(p2.label(Point::SoftirqExit) == "tp_btf/softirq_exit");
      CHECK(p2.choice(Point::NetifReceiveSkb).chosen->program == "rcv_skb_btf");
    }
  }
  SECTION("a symbol to read by: never the runqueue's way") {
    FakeKernel k = kernel_6_18();
    k.members.insert({"sched_entity.cfs_rq", "cfs_rq.rq"});
    k.percpu = {{"__preempt_count", 86064}, {"runqueues", 178752}};
    HookPlan plan = choose_hooks(k);
    CHECK(plan.preempt_count == PreemptCount::PerCpu);
    CHECK(plan.choice(Point::NetifReceiveSkb).chosen->program == "rcv_skb_pc");
  }
  SECTION("neither variable: softirq_exit") {
    FakeKernel k = kernel_6_18();
    k.vars.clear();
    HookPlan plan = choose_hooks(k);
    CHECK(plan.preempt_count == PreemptCount::None);
    CHECK(plan.label(Point::SoftirqExit) == "tp_btf/softirq_exit");
    CHECK(plan.stood_in(Point::SoftirqExit).empty());
    // No program may refer to a variable the verifier cannot find.
    CHECK(plan.choice(Point::SoftirqRaise).chosen->program == "sirq_raise_btf");
    CHECK(plan.choice(Point::NetifReceiveSkb).chosen->program == "rcv_skb_btf");
    CHECK(plan.choice(Point::KfreeSkb).chosen->program == "drop_skb_btf");
  }
  SECTION("PREEMPT_RT (per-task softirq counts): softirq_exit") {
    FakeKernel k = kernel_6_18();
    k.members.insert("task_struct.softirq_disable_cnt");
    HookPlan plan = choose_hooks(k);
    CHECK(plan.preempt_count == PreemptCount::None);
    CHECK(plan.label(Point::SoftirqExit) == "tp_btf/softirq_exit");
    CHECK(plan.has(Point::SoftirqEntry));
  }
}
#endif

TEST_CASE("every candidate program names a distinct BPF program", "[hooks]") {
  std::set<std::string> names;
  for (const HookPoint &p : hook_points())
    for (const HookCandidate &c : p.candidates)
      CHECK(names.insert(std::string(c.program)).second);
  CHECK(names.size() >= hook_points().size());
}

// A program that calls a kfunc is chosen only where the kernel has it: on
// 6.1 (no bpf_rdonly_cast) it would not load, and netlatd would not start.
TEST_CASE("sched_waking: typed loads where bpf_rdonly_cast exists, probe reads on 6.1; one label either way",
          "[hooks]") {
  for (const FakeKernel &k : {kernel_6_18(), kernel_6_12()}) {
    HookPlan plan = choose_hooks(k);
    REQUIRE(plan.has(Point::SchedWaking));
    CHECK(plan.choice(Point::SchedWaking).chosen->program == "waking_typed");
    CHECK(plan.label(Point::SchedWaking) == "tp_btf/sched_waking");
  }
  HookPlan old = choose_hooks(kernel_6_1());
  REQUIRE(old.has(Point::SchedWaking));
  CHECK(old.choice(Point::SchedWaking).chosen->program == "waking_btf");
  CHECK(old.label(Point::SchedWaking) == "tp_btf/sched_waking");
  // Every program a plan may choose that calls a kfunc names it.
  for (const HookPoint &hp : hook_points())
    for (const HookCandidate &c : hp.candidates)
      if (c.program.find("typed") != std::string_view::npos)
        CHECK(c.kfunc == "bpf_rdonly_cast");
}
