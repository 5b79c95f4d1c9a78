#pragma once
// netlatd --check: what netlatd would use on this machine, before anything loads.
#include "netlatd/kernel/hooks.hpp"
#include "netlatd/service/options.hpp"

namespace netlatd {

// --check: probes the kernel and prints what netlatd would use. Returns 0 if it can run, 69 if not.
int run_check(const Options &opts, const KernelFeatures &features);

}  // namespace netlatd
