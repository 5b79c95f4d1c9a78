#pragma once
#include "netlatd/hooks.hpp"
#include "netlatd/interface.hpp"
#include "netlatd/options.hpp"
#include "netlatd/report.hpp"

namespace netlatd {

// --check: probes the kernel and prints what netlatd would use. Returns 0 if it can run, 69 if not.
int run_check(const Options &opts, const KernelFeatures &features);

// The per-stage hooks and applicability for a plan on an interface with `irq_lines` IRQs.
void fill_stage_hooks(ReportHeader &h, const HookPlan &plan, size_t irq_lines);

// Root, or CAP_BPF + CAP_PERFMON (5.8+); throws Error(NoPermission) otherwise.
void require_privileges();

// One log line per IRQ line of the interface: counted or not, and why.
void log_irq_lines(const InterfaceInfo &iface);

}  // namespace netlatd
