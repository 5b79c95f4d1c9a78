#pragma once
// The running daemon: what netlatd does between its start and its exit.
#include <functional>
#include <memory>

#include "netlatd/service/options.hpp"

namespace netlatd {

// Something that runs beside the tracing (--demo's traffic): made once every
// program is attached, destroyed before they are detached. Throws Error
// (the exit code it names) when it cannot start.
using Companion = std::function<std::shared_ptr<void>()>;

// Runs netlatd with validated options until SIGTERM/SIGINT or --duration.
// Returns the exit code; throws Error for fatal start-up errors.
int run_daemon(const Options &opts, Companion companion = {});

}  // namespace netlatd
