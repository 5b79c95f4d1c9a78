#pragma once
#include "netlatd/check.hpp"
#include "netlatd/hooks.hpp"
#include "netlatd/options.hpp"
#include "netlatd/report.hpp"

namespace netlatd {

// Runs netlatd with validated options until SIGTERM/SIGINT or --duration.
// Returns the exit code; throws Error for fatal start-up errors.
int run_daemon(const Options &opts);

}  // namespace netlatd
