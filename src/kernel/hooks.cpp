#include "netlatd/kernel/hooks.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <spdlog/spdlog.h>

#include "netlatd/model/interval.hpp"

namespace netlatd {

const std::vector<HookPoint> &hook_points() {
  using K = AttachKind;
  // Order inside each list is preference: tp_btf is the cheapest attach type
  // (typed arguments, direct loads); fentry/fexit stand in for tracepoints
  // that older kernels lack (sock:sk_data_ready is 6.5+, sock:sock_recv_length
  // 6.3+), and add what no tracepoint gives (a receive call's start, the
  // datagram a UDP read dequeued). No raw_tp: tp_btf is 5.5+, and the BPF ring
  // buffer needs 5.8.
  static const std::vector<HookPoint> points = {
      {Point::IrqHandlerEntry, "irq_handler_entry", false, {{"irq_entry_btf", K::TpBtf, "irq_handler_entry"}}},
      {Point::IrqHandlerExit, "irq_handler_exit", false, {{"irq_exit_btf", K::TpBtf, "irq_handler_exit"}}},
      // The _pc and _rq variants read the CPU's preempt count where the plan
      // does (see PreemptCount), which leaves softirq_exit detached: _pc by
      // the variable's symbol, _rq from the runqueue (no symbol to resolve).
      {Point::SoftirqRaise, "softirq_raise", false,
       {{"sirq_raise_pc", K::TpBtf, "softirq_raise", {}, true},
        {"sirq_raise_rq", K::TpBtf, "softirq_raise", "bpf_rdonly_cast", true, true},
        {"sirq_raise_btf", K::TpBtf, "softirq_raise"}}},
      {Point::SoftirqEntry, "softirq_entry", false, {{"sirq_entry_btf", K::TpBtf, "softirq_entry"}}},
      {Point::SoftirqExit, "softirq_exit", false, {{"sirq_exit_btf", K::TpBtf, "softirq_exit"}}},
      {Point::NapiPoll, "napi_poll", false, {{"napi_poll_btf", K::TpBtf, "napi_poll"}}},
      {Point::NetifReceiveSkb, "netif_receive_skb", true,
       {{"rcv_skb_pc", K::TpBtf, "netif_receive_skb", {}, true},
        {"rcv_skb_rq", K::TpBtf, "netif_receive_skb", "bpf_rdonly_cast", true, true},
        {"rcv_skb_btf", K::TpBtf, "netif_receive_skb"}}},
      // fentry first: it runs before the datagram is queued, so its slot
      // exists before any read can take it; the tracepoint (6.5+) runs after,
      // and is what a kernel that refuses fentry (6.18 here) has. Its _pc
      // and _rq variants know a call inside a NET_RX run (the datagram the
      // filter took last is then the call's, when it was the only one).
      {Point::UdpEnqueue, "udp_enqueue", true,
       {{"udp_queue_fentry", K::Fentry, "__udp_enqueue_schedule_skb"},
        {"udp_queue_pc", K::TpBtf, "sk_data_ready", {}, true},
        {"udp_queue_rq", K::TpBtf, "sk_data_ready", "bpf_rdonly_cast", true, true},
        {"udp_queue_btf", K::TpBtf, "sk_data_ready"}}},
      {Point::UdpEnqueueFailed, "udp_enqueue_failed", false,
       {{"udp_fail_btf", K::TpBtf, "udp_fail_queue_rcv_skb"}}},
      {Point::TcpEnqueue, "tcp_enqueue", false, {{"tcp_queue_btf", K::TpBtf, "tcp_probe"}}},
      {Point::TcpCopied, "tcp_copied", false, {{"tcp_copied_btf", K::TpBtf, "tcp_rcv_space_adjust"}}},
      // drop_skb_pc tells a drop inside NET_RX from a read's by the preempt
      // count, like the other _pc variants (bpf/udp/order/drops.bpf.h note_read_drop).
      {Point::KfreeSkb, "kfree_skb", false,
       {{"drop_skb_pc", K::TpBtf, "kfree_skb", {}, true},
        {"drop_skb_rq", K::TpBtf, "kfree_skb", "bpf_rdonly_cast", true, true},
        {"drop_skb_btf", K::TpBtf, "kfree_skb"}}},
      // waking_typed walks the socket's wait queue with plain loads through
      // bpf_core_cast (bpf_rdonly_cast, 6.2+); waking_btf with probe reads.
      {Point::SchedWaking, "sched_waking", false,
       {{"waking_typed", K::TpBtf, "sched_waking", "bpf_rdonly_cast"}, {"waking_btf", K::TpBtf, "sched_waking"}}},
      {Point::SchedSwitch, "sched_switch", false, {{"switch_btf", K::TpBtf, "sched_switch"}}},
      {Point::SkbCopy, "skb_copy_datagram_iovec", false, {{"copy_btf", K::TpBtf, "skb_copy_datagram_iovec"}}},
      {Point::RecvCallStart, "recv_call_start", false, {{"recv_call_fentry", K::Fentry, "sock_recvmsg"}}},
      {Point::UdpConsume, "udp_consume", false, {{"udp_consume_fentry", K::Fentry, "skb_consume_udp"}}},
      {Point::RecvReturn, "recv_return", true,
       {{"recv_ret_btf", K::TpBtf, "sock_recv_length"}, {"recv_ret_fexit", K::Fexit, "sock_recvmsg"}}},
  };
  return points;
}

std::string_view udp_join_description(UdpJoin j) {
  switch (j) {
  case UdpJoin::Consume: return "by skb, named by fentry/skb_consume_udp";
  case UdpJoin::OrderProdq:
    return "by queue order (no hook names the skb); lagging pushes seen through udp_prod_queue";
  case UdpJoin::Order: return "by queue order (no hook names the skb), no view of lagging pushes: fewer reads named";
  }
  return "unknown";
}

std::string_view preempt_count_description(PreemptCount p) {
  switch (p) {
  case PreemptCount::None: return "softirq_exit ends each NET_RX run";
  case PreemptCount::PerCpu: return "not needed: the CPU's preempt count (__preempt_count) says when NET_RX runs";
  case PreemptCount::PcpuHot: return "not needed: the CPU's preempt count (pcpu_hot) says when NET_RX runs";
  case PreemptCount::Runqueue:
    return "not needed: the CPU's preempt count (__preempt_count, found from its runqueue) says when NET_RX runs";
  }
  return "unknown";
}

std::string hook_label(const HookCandidate &c) {
  const char *kind = "";
  switch (c.kind) {
  case AttachKind::TpBtf: kind = "tp_btf"; break;
  case AttachKind::Fentry: kind = "fentry"; break;
  case AttachKind::Fexit: kind = "fexit"; break;
  }
  return std::string(kind) + "/" + std::string(c.target);
}

const HookChoice &HookPlan::choice(Point p) const {
  for (const HookChoice &c : choices)
    if (c.point->point == p)
      return c;
  throw std::logic_error("hook point missing from plan");
}

std::string HookPlan::label(Point p) const {
  const HookChoice &c = choice(p);
  return c.chosen ? hook_label(*c.chosen) : std::string();
}

std::string_view HookPlan::stood_in(Point p) const {
  if (p == Point::SoftirqExit && preempt_count != PreemptCount::None && !has(p))
    return preempt_count_description(preempt_count);
  return {};
}

namespace {

HookChoice &choice_of(HookPlan &plan, Point p) {
  for (HookChoice &c : plan.choices)
    if (c.point->point == p)
      return c;
  throw std::logic_error("hook point missing from plan");
}

// Points that only mean something with another one.
void drop_dependents(HookPlan &plan) {
  auto drop_unless = [&](Point p, bool ok) {
    if (!ok)
      choice_of(plan, p).chosen.reset();
  };
  // A NET_RX run is only delimited with both its entry and its end: its
  // exit hook, or the preempt count read where a packet or a raise needs to
  // know (one program run less per packet). An IRQ is "running" only between
  // its entry and exit.
  if (plan.preempt_count != PreemptCount::None)
    choice_of(plan, Point::SoftirqExit).chosen.reset();
  drop_unless(Point::SoftirqEntry, plan.has(Point::SoftirqExit) || plan.preempt_count != PreemptCount::None);
  drop_unless(Point::IrqHandlerEntry, plan.has(Point::IrqHandlerExit) && plan.has(Point::SoftirqRaise));
  drop_unless(Point::IrqHandlerExit, plan.has(Point::IrqHandlerEntry));
  // The join by skb (skb_consume_udp names each read's datagram) keeps a
  // datagram's stamps in the stash until its read, and needs its queueing
  // stamped there before any read can take it: the enqueue's fentry.
  const bool enqueue_first = plan.label(Point::UdpEnqueue).rfind("fentry/", 0) == 0;
  drop_unless(Point::UdpConsume, enqueue_first);
  // The failed-enqueue tracepoint matters only where a slot is made before
  // the datagram is queued: by queue order (by skb, kfree_skb takes the
  // datagram's entry).
  drop_unless(Point::UdpEnqueueFailed, enqueue_first && !plan.has(Point::UdpConsume));
}

}  // namespace

HookPlan choose_hooks(const KernelFeatures &features) {
  HookPlan plan;
#if defined(__x86_64__)
  // PREEMPT_RT keeps softirq counts per task (task_struct.softirq_disable_cnt
  // exists only there): its preempt count does not say.
  if (!features.has_member("task_struct", "softirq_disable_cnt")) {
    if (features.has_var("__preempt_count")) {
      plan.preempt_count = PreemptCount::PerCpu;
    } else if (features.has_var("pcpu_hot") && features.has_member("pcpu_hot", "preempt_count")) {
      plan.preempt_count = PreemptCount::PcpuHot;
    } else if (features.has_member("sched_entity", "cfs_rq") && features.has_member("cfs_rq", "rq") &&
               features.has_kfunc("bpf_rdonly_cast")) {
      // Without CONFIG_KALLSYMS_ALL: the variable's distance from the
      // runqueue, which a task's CFS queue (CONFIG_FAIR_GROUP_SCHED) names.
      const std::optional<int64_t> count = features.percpu_offset("__preempt_count");
      const std::optional<int64_t> rq = features.percpu_offset("runqueues");
      if (count && rq) {
        plan.preempt_count = PreemptCount::Runqueue;
        plan.preempt_count_from_rq = *count - *rq;
      }
    }
  }
#endif
  for (const HookPoint &hp : hook_points()) {
    HookChoice choice{&hp, std::nullopt};
    for (const HookCandidate &c : hp.candidates) {
      if (!plan.reads_as_planned(c))
        continue;
      if ((c.kfunc.empty() || features.has_kfunc(c.kfunc)) && features.can_attach(c.kind, c.target)) {
        choice.chosen = c;
        break;
      }
    }
    plan.choices.push_back(choice);
  }
  drop_dependents(plan);
  for (const HookChoice &c : plan.choices)
    if (!c.chosen && c.point->required)
      plan.missing_required.emplace_back(c.point->name);
  if (plan.has(Point::UdpConsume))
    plan.udp_join = UdpJoin::Consume;
  else if (features.has_member("udp_sock", "udp_prod_queue"))
    plan.udp_join = UdpJoin::OrderProdq;
  else
    plan.udp_join = UdpJoin::Order;
  return plan;
}

StageHookLabels stage_hooks(const HookPlan &plan, Stage s) {
  auto any_of = [&](std::initializer_list<Point> ps) {
    std::string out;
    for (Point p : ps) {
      std::string l = plan.label(p);
      if (!l.empty())
        out += (out.empty() ? "" : "|") + l;
    }
    return out;
  };
  auto first_of = [&](std::initializer_list<Point> ps) {
    for (Point p : ps)
      if (!plan.label(p).empty())
        return plan.label(p);
    return std::string();
  };
  const std::string queued = any_of({Point::UdpEnqueue, Point::TcpEnqueue});
  // The read's start: its call's start where a hook gives it, else the
  // switch-in of a reader that slept in the call.
  const std::string read_start = any_of({Point::RecvCallStart, Point::SchedSwitch});
  switch (s) {
  case Stage::Irq: return {plan.label(Point::IrqHandlerEntry), plan.label(Point::SoftirqEntry)};
  case Stage::Softirq: return {plan.label(Point::SoftirqEntry), plan.label(Point::NetifReceiveSkb)};
  case Stage::NetifReceive: return {plan.label(Point::NetifReceiveSkb), queued};
  case Stage::SockQueue: return {queued, read_start};
  case Stage::OnCpu: return {read_start, plan.label(Point::RecvReturn)};
  case Stage::InSocket: return {queued, plan.label(Point::RecvReturn)};
  case Stage::Total:
    return {first_of({Point::IrqHandlerEntry, Point::SoftirqEntry, Point::NetifReceiveSkb}),
            plan.label(Point::RecvReturn)};
  }
  return {};
}

void fill_stage_hooks(ReportHeader &h, const HookPlan &plan, size_t irq_lines) {
  for (Stage s : kAllStages) {
    auto &sh = h.stages[static_cast<size_t>(s)];
    StageHookLabels l = stage_hooks(plan, s);
    sh.start_hook = l.start;
    sh.end_hook = l.end;
    sh.applicable = !l.start.empty() && !l.end.empty();
    if (!sh.applicable)
      sh.why_not = "no usable hook on this kernel";
    if (s == Stage::Irq && sh.applicable && irq_lines == 0) {
      sh.applicable = false;
      sh.why_not = "the interface has no IRQ lines (lo, veth and tun deliver in software)";
    }
  }
}

}  // namespace netlatd
