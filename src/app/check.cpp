// netlatd --check, and what the daemon checks before it loads anything: the
// kernel's features and hook choice per stage, the interfaces and their IRQ
// lines, and the privileges the process holds.
#include "netlatd/app/check.hpp"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/version.hpp"
#include "netlatd/net/watch.hpp"

namespace netlatd {

namespace {

// One hook point's candidates, each marked "(no)" where it cannot be used.
std::string candidates_text(const HookChoice &c, const HookPlan &plan, const KernelFeatures &features) {
  std::string cands;
  for (const HookCandidate &cand : c.point->candidates) {
    bool ok = features.can_attach(cand.kind, cand.target);
    std::string label = hook_label(cand);
    // Two programs at one hook differ in what they call: "tp_btf/sched_waking
    // with bpf_rdonly_cast (no)" on a kernel without the kfunc.
    if (!cand.kfunc.empty()) {
      label += fmt::format(" with {}", cand.kfunc);
      ok = ok && features.has_kfunc(cand.kfunc);
    }
    if (cand.reads_preempt_count) {
      label += cand.through_runqueue ? " reading the preempt count from the runqueue" : " reading the preempt count";
      ok = ok && plan.reads_as_planned(cand);
    }
    cands += fmt::format("{}{}{}", cands.empty() ? "" : ", ", label, ok ? "" : " (no)");
  }
  return cands;
}

void print_hooks(const HookPlan &plan, const KernelFeatures &features) {
  std::printf("\nhook points (first usable candidate wins):\n");
  for (const HookChoice &c : plan.choices) {
    const std::string cands = candidates_text(c, plan, features);
    std::string note = !c.chosen && c.point->required ? "  REQUIRED" : "";
    if (const std::string_view why = plan.stood_in(c.point->point); !why.empty())
      note = fmt::format("  {}", why);
    std::printf("  %-24s %-36s [%s]%s\n", std::string(c.point->name).c_str(),
                c.chosen ? hook_label(*c.chosen).c_str() : "-", cands.c_str(), note.c_str());
  }
}

// One traced interface and the devices below it; returns their IRQ lines.
size_t print_interface(const TracedInterface &t) {
  if (!t.info) {
    std::printf("\ninterface %s: NOT FOUND\n", t.name.c_str());
    return 0;
  }
  const InterfaceInfo &info = *t.info;
  size_t irqs = info.irqs.size();
  std::printf("\ninterface %s: ifindex %u, driver %s, IRQ lines [%s]\n", info.name.c_str(), info.ifindex,
              info.driver.empty() ? "-" : info.driver.c_str(), fmt::format("{}", fmt::join(info.irqs, " ")).c_str());
  for (const std::string &line : describe_irq_lines(info.irq_lines))
    std::printf("  %s\n", line.c_str());
  for (const auto &l : t.lowers) {
    irqs += l.info.irqs.size();
    std::printf("  below it: %s (ifindex %u%s), IRQ lines [%s]\n", l.device.name.c_str(), l.info.ifindex,
                l.device.vlan ? fmt::format(", VLAN {}", l.device.vlan).c_str() : "",
                fmt::format("{}", fmt::join(l.info.irqs, " ")).c_str());
  }
  if (!t.problem.empty())
    std::printf("  %s\n", t.problem.c_str());
  return irqs;
}

// --iface's interfaces as the daemon would trace them; returns their IRQ lines.
size_t print_interfaces(const Options &opts) {
  size_t irqs = 0;
  std::map<std::string, uint32_t> ids;
  std::vector<std::string> left_out;
  Fd netns(open_netns(opts.netns));
  const auto traced = look_up_interfaces(opts.ifaces, opts.irqs, ids, left_out, netns.get());
  if (traced.empty())
    std::printf("\n--iface %s: no interface\n", opts.ifaces.front().c_str());
  for (const TracedInterface &t : traced)
    irqs += print_interface(t);
  for (const std::string &name : left_out)
    std::printf("\ninterface %s: not traced (at most %zu interfaces)\n", name.c_str(), kMaxIfaces);
  return irqs;
}

void print_stages(const HookPlan &plan, size_t irqs) {
  std::printf("\nUDP reads are tied to their datagram %s\n", std::string(udp_join_description(plan.udp_join)).c_str());
  std::printf("the read's start (where oncpu begins): %s\n",
              plan.has(Point::RecvCallStart)
                  ? "the receive call's start (fentry/sock_recvmsg)"
                  : "known only for readers asleep in the receive call (no hook gives a call's start here)");
  ReportHeader h;
  fill_stage_hooks(h, plan, irqs);
  std::printf("\nstages:\n");
  for (Stage s : kAllStages) {
    const auto &sh = h.stages[static_cast<size_t>(s)];
    if (sh.applicable)
      std::printf("  %-14s %s -> %s\n", std::string(stage_name(s)).c_str(), sh.start_hook.c_str(), sh.end_hook.c_str());
    else
      std::printf("  %-14s not applicable: %s\n", std::string(stage_name(s)).c_str(), sh.why_not.c_str());
  }
}

}  // namespace

int run_check(const Options &opts, const KernelFeatures &features) {
  std::printf("netlatd %s on Linux %s\n", kVersion, features.kernel_release().c_str());
  bool btf = features.has_vmlinux_btf();
  bool ring = features.has_ringbuf();
  std::printf("  %-28s %s\n", "BTF (/sys/kernel/btf/vmlinux)", btf ? "yes" : "NO");
  std::printf("  %-28s %s\n", "BPF ring buffer", ring ? "yes" : "NO");
  HookPlan plan = choose_hooks(features);
  print_hooks(plan, features);
  std::printf("\nUDP stash (--stash-entries): %s\n", stash_description(opts.stash_entries, plan.udp_join).c_str());
  if (const SlotsDescription slots = slots_description(plan.udp_join, read_optmem_max()); !slots.text.empty())
    std::printf("UDP slots by queue order: %s\n", slots.text.c_str());
  const size_t irqs = opts.ifaces.empty() ? 0 : print_interfaces(opts);
  print_stages(plan, opts.ifaces.empty() ? 1 : irqs);
  bool ok = btf && ring && plan.runnable();
  if (!ok) {
    std::string why = !btf ? "no kernel BTF" : !ring ? "no BPF ring buffer (5.8+)" : "no hook for " + fmt::format("{}", fmt::join(plan.missing_required, ", "));
    std::printf("\nnetlatd cannot run here: %s\n", why.c_str());
    return static_cast<int>(ExitCode::Unavailable);
  }
  std::printf("\nnetlatd can run here.\n");
  return 0;
}

}  // namespace netlatd
