#include "netlatd/service/daemon.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/base/fd.hpp"
#include "netlatd/kernel/privileges.hpp"
#include "netlatd/net/interface.hpp"
#include "service.hpp"

namespace netlatd {

// The --cgroup directories; one that names no cgroup is a usage error,
// given before anything is opened or logged.
std::vector<std::string> kept_cgroup_dirs(const Options &opts) {
  std::vector<std::string> dirs;
  for (const std::string &c : opts.cgroups) {
    try {
      dirs.push_back(cgroup_directory(c, cgroup2_root()).string());
    } catch (const std::invalid_argument &e) {
      throw Error(ExitCode::Usage, std::string("--cgroup: ") + e.what());
    }
  }
  return dirs;
}

int run_daemon(const Options &opts, Companion companion) {
  kept_cgroup_dirs(opts);
  require_privileges();
  Fd netns(open_netns(opts.netns));
  std::map<std::string, uint32_t> ids;
  std::vector<std::string> left_out;
  auto traced = look_up_interfaces(opts.ifaces, opts.irqs, ids, left_out, netns.get());
  for (const TracedInterface &t : traced)
    if (!t.info)
      throw Error(ExitCode::NoInterface, "no such interface '" + t.name + "'" +
                                             (opts.netns.empty() ? "" : " in network namespace " + opts.netns));
  if (netns.get() >= 0)
    spdlog::info("tracing in network namespace {} ({}); its interfaces and the devices below them are looked up "
                 "there (rtnetlink), their IRQ lines {}",
                 opts.netns, netns_path(opts.netns), opts.irqs.empty() ? "through their PCI devices" : "as --irq gives");
  if (traced.empty())
    throw Error(ExitCode::NoInterface, opts.ifaces.front() == "irq" ? "--iface irq: no interface has IRQ lines"
                                                                     : "--iface all: no interface");
  for (const std::string &name : left_out)
    spdlog::warn("interface {} is not traced: netlatd traces at most {} interfaces in a run", name, kMaxIfaces);

  auto features = probe_kernel_features();
  if (!features->has_vmlinux_btf())
    throw Error(ExitCode::Unavailable, "the kernel has no BTF (/sys/kernel/btf/vmlinux); netlatd needs CONFIG_DEBUG_INFO_BTF");
  if (!features->has_ringbuf())
    throw Error(ExitCode::Unavailable, "the kernel has no BPF ring buffer (needs Linux 5.8+)");
  HookPlan plan = choose_hooks(*features);
  if (!plan.runnable())
    throw Error(ExitCode::Unavailable,
                fmt::format("no usable hook for {} on this kernel (see netlatd --check)", fmt::join(plan.missing_required, ", ")));

  Service service(opts, std::move(features), std::move(plan), std::move(traced), std::move(ids), netns.get(),
                  std::move(companion));
  return service.run();
}

}  // namespace netlatd
