// netlatd: thin entry point; the daemon is the layered libraries of src/.
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <string_view>

#include <spdlog/spdlog.h>

#include "netlatd/app/check.hpp"
#include "netlatd/app/demo.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/kernel/privileges.hpp"
#include "netlatd/kernel/tracer.hpp"
#include "netlatd/service/daemon.hpp"
#include "netlatd/service/logging.hpp"
#include "netlatd/service/options.hpp"
#include "page_main.hpp"

int main(int argc, char **argv) {
  // `netlatd report ...`: the page from JSON lines; nothing of the daemon's.
  if (argc > 1 && std::string_view(argv[1]) == "report")
    return netlatd::page::report_main(argc - 1, argv + 1);
  // The start parses the kernel's BTF twice (the hook probe's copy, freed
  // before the load, and libbpf's own) in blocks of hundreds of KiB. glibc
  // raises its mmap threshold to the size of each mapped block freed, so the
  // second parse came from a heap that keeps what it once held: peak RSS
  // 20.3-20.6 MiB at start. A fixed 64 KiB threshold keeps large blocks
  // mapped and gives them back when freed: 19.8-19.9 MiB.
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024);
  // Logs go to stderr (journald reads it, with each line's priority); report
  // lines own stdout.
  netlatd::setup_logging();
  std::signal(SIGPIPE, SIG_IGN);  // a closed output pipe is an EPIPE to handle, not a death
  try {
    netlatd::CommandLine cl = netlatd::parse_command_line(argc, argv);
    if (cl.exit_now) {
      std::fputs(cl.exit_text.c_str(), stdout);
      return *cl.exit_now;
    }
    const netlatd::Options &opts = cl.options;
    spdlog::set_level(opts.verbose ? spdlog::level::debug : spdlog::level::info);
    netlatd::route_libbpf_logs();
    if (opts.check) {
      netlatd::require_privileges();
      return netlatd::run_check(opts, *netlatd::probe_kernel_features());
    }
    return netlatd::run_daemon(opts, netlatd::demo_companion(opts));
  } catch (const netlatd::Error &e) {
    std::fputs(netlatd::fatal_error_text(e.what()).c_str(), stderr);
    return static_cast<int>(e.code());
  } catch (const std::exception &e) {
    std::fputs(netlatd::fatal_error_text(e.what()).c_str(), stderr);
    return static_cast<int>(netlatd::ExitCode::Software);
  }
}
