#pragma once
// Hooks are data: each point of the receive path lists the BPF programs that
// can observe it, in order of preference. A probe of the running kernel picks
// one per point at start-up; the others' autoload is switched off. The choice
// is shown by --check, logged, and carried in every JSON line.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netlatd/model/stages.hpp"

namespace netlatd {

enum class AttachKind { TpBtf, Fentry, Fexit };

struct HookCandidate {
  std::string_view program;  // BPF program name in bpf/netlatd.bpf.c
  AttachKind kind;
  std::string_view target;   // tracepoint or kernel function
  // A kfunc the program calls, which the kernel must have ("" for none): a
  // program calling one the kernel lacks would not load.
  std::string_view kfunc = {};
  // Reads the CPU's preempt count (HookPlan::preempt_count): chosen exactly
  // where the plan reads it, the plain variant everywhere else.
  bool reads_preempt_count = false;
  // ... from the runqueue (PreemptCount::Runqueue), not through the
  // variable's kernel symbol (the other ways).
  bool through_runqueue = false;
};

enum class Point {
  IrqHandlerEntry,
  IrqHandlerExit,
  SoftirqRaise,
  SoftirqEntry,
  SoftirqExit,
  NapiPoll,
  NetifReceiveSkb,
  UdpEnqueue,
  UdpEnqueueFailed,
  TcpEnqueue,
  TcpCopied,
  KfreeSkb,
  SchedWaking,
  SchedSwitch,
  SkbCopy,
  RecvCallStart,
  UdpConsume,
  RecvReturn,
};

// How a UDP read is tied to the datagram it returned (docs/JOIN.md); values
// match enum udp_join in bpf/lib/config.bpf.h.
enum class UdpJoin {
  Consume = 0,     // fentry/skb_consume_udp names the skb
  OrderProdq = 1,  // queue order; 6.18's per-NUMA producer queues say when a push lags
  Order = 2,       // queue order, a lagging push not observable: fewer reads named
};
std::string_view udp_join_description(UdpJoin j);

struct HookPoint {
  Point point;
  std::string_view name;
  bool required;  // without it netlatd cannot run at all
  std::vector<HookCandidate> candidates;
};

const std::vector<HookPoint> &hook_points();
std::string hook_label(const HookCandidate &c);  // "tp_btf/netif_receive_skb", "fexit/sock_recvmsg"

// What the running kernel offers; mockable so the fallback paths are tested
// without root (tests/unit/test_hooks.cpp).
class KernelFeatures {
public:
  virtual ~KernelFeatures() = default;
  virtual bool has_vmlinux_btf() const = 0;
  virtual bool has_ringbuf() const = 0;
  // Whether the program kind can load and attach to the target here.
  virtual bool can_attach(AttachKind kind, std::string_view target) const = 0;
  virtual std::string kernel_release() const = 0;
  // Whether the kernel's BTF has this member in this struct (CO-RE field checks).
  virtual bool has_member(std::string_view strct, std::string_view member) const = 0;
  // Whether the kernel has this kfunc (a function in its BTF a BPF program may call).
  virtual bool has_kfunc(std::string_view name) const = 0;
  // Whether a BPF program can use this kernel variable (global or per-CPU):
  // its BTF has it and the verifier finds its address.
  virtual bool has_var(std::string_view name) const = 0;
  // Where a static per-CPU variable sits in the kernel's per-CPU section
  // (.data..percpu in its BTF), whether or not kallsyms lists it.
  virtual std::optional<int64_t> percpu_offset(std::string_view name) const = 0;
};

// Probes the live kernel (needs root or CAP_BPF+CAP_PERFMON). Results are cached.
std::unique_ptr<KernelFeatures> probe_kernel_features();

// Where the BPF side reads this CPU's preempt count, which tells whether a
// softirq is being served right now: then the end of a NET_RX run needs no
// hook of its own (the next softirq's entry clears "in NET_RX", and the
// count says the run is over). None: x86 only, and not on PREEMPT_RT, whose
// softirq counts are per task; softirq_exit ends the run there.
enum class PreemptCount : uint32_t {
  None = 0,     // softirq_exit marks the end of each NET_RX run
  PerCpu = 1,   // the per-CPU int __preempt_count (x86: up to 6.1, and 6.15+)
  PcpuHot = 2,  // pcpu_hot.preempt_count (x86: 6.2 to 6.14)
  // __preempt_count found from this CPU's runqueue, which the current task's
  // CFS queue points to: both are static per-CPU variables, a fixed distance
  // apart (HookPlan::preempt_count_from_rq) on every CPU. For kernels
  // without CONFIG_KALLSYMS_ALL, where the verifier cannot find the variable
  // by name.
  Runqueue = 3,
};
std::string_view preempt_count_description(PreemptCount p);

struct HookChoice {
  const HookPoint *point = nullptr;
  std::optional<HookCandidate> chosen;
};

struct HookPlan {
  std::vector<HookChoice> choices;  // one per hook_points() entry, same order
  std::vector<std::string> missing_required;  // point names with no usable candidate
  UdpJoin udp_join = UdpJoin::Order;
  PreemptCount preempt_count = PreemptCount::None;
  // PreemptCount::Runqueue: __preempt_count's address minus runqueues'.
  int64_t preempt_count_from_rq = 0;

  const HookChoice &choice(Point p) const;
  // Whether a candidate's way of reading the preempt count (if it reads it)
  // is the one this plan found.
  bool reads_as_planned(const HookCandidate &c) const {
    return !c.reads_preempt_count ||
           (preempt_count != PreemptCount::None && c.through_runqueue == (preempt_count == PreemptCount::Runqueue));
  }
  bool runnable() const { return missing_required.empty(); }
  // "tp_btf/sk_data_ready" etc., or "" when the point has no hook.
  std::string label(Point p) const;
  bool has(Point p) const { return choice(p).chosen.has_value(); }
  // Why a point is left without a hook on purpose, because something else
  // stands in for it ("not needed: the CPU's preempt count ..." for
  // softirq_exit); "" for a point that has its hook, or has none because
  // the kernel offers none.
  std::string_view stood_in(Point p) const;
};

HookPlan choose_hooks(const KernelFeatures &features);

// The hook each stage starts and ends at, for a plan: e.g. netif_receive runs
// from NetifReceiveSkb to UdpEnqueue/TcpEnqueue ("tp_btf/sk_data_ready|tp_btf/tcp_probe").
struct StageHookLabels {
  std::string start;
  std::string end;
};
StageHookLabels stage_hooks(const HookPlan &plan, Stage s);

// The per-stage hooks and applicability for a plan on an interface with
// `irq_lines` IRQs, as the report header and the metrics show them.
struct ReportHeader;
void fill_stage_hooks(ReportHeader &h, const HookPlan &plan, size_t irq_lines);

}  // namespace netlatd
