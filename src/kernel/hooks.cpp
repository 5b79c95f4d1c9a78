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
      // and is what a kernel that refuses fentry (6.18 here) has.
      {Point::UdpEnqueue, "udp_enqueue", true,
       {{"udp_queue_fentry", K::Fentry, "__udp_enqueue_schedule_skb"}, {"udp_queue_btf", K::TpBtf, "sk_data_ready"}}},
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

namespace {

// A two-instruction program ("return 0") is enough to learn whether the
// kernel accepts a program type / attach target, and then to attach it.
int load_trivial(bpf_prog_type type, bpf_attach_type expected, uint32_t btf_id) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = expected, .attach_btf_id = btf_id);
  return bpf_prog_load(type, "netlatd_probe", "Dual BSD/GPL", insns, 2, &opts);
}

class LiveKernelFeatures final : public KernelFeatures {
public:
  LiveKernelFeatures() {
    if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
      btf_ = btf__load_vmlinux_btf();
    if (btf_ && libbpf_get_error(btf_))
      btf_ = nullptr;
  }
  ~LiveKernelFeatures() override {
    if (btf_)
      btf__free(btf_);
  }
  LiveKernelFeatures(const LiveKernelFeatures &) = delete;
  LiveKernelFeatures &operator=(const LiveKernelFeatures &) = delete;

  bool has_vmlinux_btf() const override { return btf_ != nullptr; }
  bool has_ringbuf() const override { return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1; }

  bool can_attach(AttachKind kind, std::string_view target) const override {
    std::lock_guard lock(mu_);
    std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::string(target);
    auto it = cache_.find(key);
    if (it != cache_.end())
      return it->second;
    bool ok = probe(kind, std::string(target));
    spdlog::debug("probe {}: {}", hook_label({"", kind, target}), ok ? "yes" : "no");
    cache_[key] = ok;
    return ok;
  }

  bool has_member(std::string_view strct, std::string_view member) const override {
    if (!btf_)
      return false;
    int id = btf__find_by_name_kind(btf_, std::string(strct).c_str(), BTF_KIND_STRUCT);
    return id >= 0 && has_member_in(static_cast<uint32_t>(id), member, 0);
  }

  bool has_kfunc(std::string_view name) const override {
    return btf_ && btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_FUNC) >= 0;
  }

  // The verifier finds a variable's address by name in kallsyms, which lists
  // per-CPU variables only with CONFIG_KALLSYMS_ALL (not on every kernel that
  // has them in BTF): a two-instruction program that loads its address says.
  bool has_var(std::string_view name) const override {
    if (!btf_)
      return false;
    int var = btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_VAR);
    int tp = btf__find_by_name_kind(btf_, "btf_trace_softirq_entry", BTF_KIND_TYPEDEF);
    if (var < 0 || tp < 0)
      return false;
    bpf_insn insns[4] = {};
    insns[0].code = BPF_LD | BPF_DW | BPF_IMM;
    insns[0].dst_reg = BPF_REG_1;
    insns[0].src_reg = BPF_PSEUDO_BTF_ID;
    insns[0].imm = var;
    insns[2].code = BPF_ALU64 | BPF_MOV | BPF_K;
    insns[2].dst_reg = BPF_REG_0;
    insns[3].code = BPF_JMP | BPF_EXIT;
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_RAW_TP,
                .attach_btf_id = static_cast<uint32_t>(tp));
    int fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "netlatd_probe", "Dual BSD/GPL", insns, 4, &opts);
    spdlog::debug("probe kernel variable {}: {}", name, fd >= 0 ? "yes" : "no (" + std::string(std::strerror(errno)) + ")");
    if (fd < 0)
      return false;
    close(fd);
    return true;
  }

  std::optional<int64_t> percpu_offset(std::string_view name) const override {
    if (!btf_)
      return std::nullopt;
    const int var = btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_VAR);
    const int sec = btf__find_by_name_kind(btf_, ".data..percpu", BTF_KIND_DATASEC);
    if (var < 0 || sec < 0)
      return std::nullopt;
    const btf_type *t = btf__type_by_id(btf_, static_cast<uint32_t>(sec));
    const btf_var_secinfo *v = btf_var_secinfos(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, v++)
      if (v->type == static_cast<uint32_t>(var))
        return static_cast<int64_t>(v->offset);
    return std::nullopt;
  }

  std::string kernel_release() const override {
    utsname u{};
    uname(&u);
    return u.release;
  }

private:
  // Members of anonymous structs and unions count as the outer struct's
  // (pcpu_hot.preempt_count sits in an anonymous struct inside a union),
  // as CO-RE finds them.
  bool has_member_in(uint32_t id, std::string_view member, int depth) const {
    const btf_type *t = btf__type_by_id(btf_, id);
    if (!t || !(btf_is_struct(t) || btf_is_union(t)) || depth > 4)
      return false;
    const btf_member *m = btf_members(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
      const char *name = btf__name_by_offset(btf_, m->name_off);
      if (name && *name) {
        if (member == name)
          return true;
      } else {
        const btf_type *inner = btf__type_by_id(btf_, m->type);
        uint32_t inner_id = m->type;
        while (inner && (btf_is_mod(inner) || btf_is_typedef(inner))) {
          inner_id = inner->type;
          inner = btf__type_by_id(btf_, inner_id);
        }
        if (inner && has_member_in(inner_id, member, depth + 1))
          return true;
      }
    }
    return false;
  }

  bool probe(AttachKind kind, const std::string &target) const {
    if (!btf_)
      return false;
    int fd = -1;
    int link = -1;
    if (kind == AttachKind::TpBtf) {
      // Every tracepoint has a "btf_trace_<name>" typedef in vmlinux BTF.
      int id = btf__find_by_name_kind(btf_, ("btf_trace_" + target).c_str(), BTF_KIND_TYPEDEF);
      if (id < 0)
        return false;
      // Loading proves the kernel accepts the program for this target; the
      // probe is not attached, so no hot tracepoint runs it even briefly.
      fd = load_trivial(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, static_cast<uint32_t>(id));
      link = fd >= 0 ? 0 : -1;
    } else {
      int id = btf__find_by_name_kind(btf_, target.c_str(), BTF_KIND_FUNC);
      if (id < 0)
        return false;
      fd = load_trivial(BPF_PROG_TYPE_TRACING, kind == AttachKind::Fentry ? BPF_TRACE_FENTRY : BPF_TRACE_FEXIT,
                        static_cast<uint32_t>(id));
      if (fd >= 0)
        link = bpf_raw_tracepoint_open(nullptr, fd);
    }
    bool ok = fd >= 0 && link >= 0;
    if (link > 0)
      close(link);
    if (fd >= 0)
      close(fd);
    return ok;
  }

  btf *btf_ = nullptr;
  mutable std::mutex mu_;
  mutable std::map<std::string, bool> cache_;
};

}  // namespace

std::unique_ptr<KernelFeatures> probe_kernel_features() { return std::make_unique<LiveKernelFeatures>(); }

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
