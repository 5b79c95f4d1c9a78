#include "netlatd/service/reload.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/model/breakdown.hpp"

namespace netlatd {

std::vector<std::string> keep_start_only(const Options &running, Options &next) {
  std::vector<std::string> kept;
  if (next.ports != running.ports) {
    kept.push_back(fmt::format("ports [{}] differ from the running [{}]; restart netlatd to apply them, still "
                               "tracing [{}]",
                               fmt::join(next.ports, ","), fmt::join(running.ports, ","),
                               fmt::join(running.ports, ",")));
    next.ports = running.ports;
  }
  if (next.by != running.by) {
    // The series are the Prometheus labels, and the reader's cgroup is built
    // into the loaded programs.
    kept.push_back(fmt::format("by [{}] differs from the running [{}]; restart netlatd to apply it",
                               fmt::join(breakdown_keys(next.by), ","), fmt::join(breakdown_keys(running.by), ",")));
    next.by = running.by;
  }
  if (next.cgroups != running.cgroups) {
    // The kept cgroups are filled into the loaded programs' map at start.
    kept.push_back(fmt::format("cgroups [{}] differ from the running [{}]; restart netlatd to apply them",
                               fmt::join(next.cgroups, ","), fmt::join(running.cgroups, ",")));
    next.cgroups = running.cgroups;
  }
  if (next.ringbuf_mb != running.ringbuf_mb) {
    kept.push_back(fmt::format("ringbuf_mb {} differs from the running {}; restart netlatd to apply it",
                               next.ringbuf_mb, running.ringbuf_mb));
    next.ringbuf_mb = running.ringbuf_mb;
  }
  if (next.aggregate != running.aggregate || next.aggregate_check != running.aggregate_check) {
    // Built into the loaded programs.
    kept.push_back(fmt::format("aggregate {} differs from the running {}; restart netlatd to apply it",
                               next.aggregate_check ? "check" : next.aggregate ? "on" : "off",
                               running.aggregate_check ? "check" : running.aggregate ? "on" : "off"));
    next.aggregate = running.aggregate;
    next.aggregate_check = running.aggregate_check;
  }
  if (next.netns != running.netns) {
    kept.push_back(
        fmt::format("netns '{}' differs from the running '{}'; restart netlatd to apply it", next.netns, running.netns));
    next.netns = running.netns;
  }
  return kept;
}

}  // namespace netlatd
