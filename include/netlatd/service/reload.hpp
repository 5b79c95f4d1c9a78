#pragma once
#include <string>
#include <vector>

#include "netlatd/service/options.hpp"

namespace netlatd {

// A reload (SIGHUP) of `next` over the running options: what is built into
// the loaded BPF programs (ports, the breakdown keys and the reader cgroups
// behind them, the kept cgroups, the ring buffer's size) or read once at
// start (the network namespace) keeps its running value in `next`. Returns
// one line per key kept, saying that a restart applies it; none when
// nothing of that kind changed.
std::vector<std::string> keep_start_only(const Options &running, Options &next);

}  // namespace netlatd
