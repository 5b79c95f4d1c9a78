#pragma once
#include "netlatd/hooks.hpp"
#include "netlatd/options.hpp"
#include "netlatd/report.hpp"

namespace netlatd {

// Runs netlatd with validated options until SIGTERM/SIGINT or --duration.
// Returns the exit code; throws Error for fatal start-up errors.
int run_daemon(const Options &opts);

// --check: probes the kernel and prints what netlatd would use. Returns 0 if it can run, 69 if not.
int run_check(const Options &opts, const KernelFeatures &features);

// The per-stage hooks and applicability for a plan on an interface with `irq_lines` IRQs.
void fill_stage_hooks(ReportHeader &h, const HookPlan &plan, size_t irq_lines);

// Root, or CAP_BPF + CAP_PERFMON (5.8+); throws Error(NoPermission) otherwise.
void require_privileges();

}  // namespace netlatd
