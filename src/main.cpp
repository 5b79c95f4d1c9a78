// netlatd: thin entry point; the daemon is the netlatd_core library.
#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "netlatd/daemon.hpp"
#include "netlatd/errors.hpp"
#include "netlatd/logging.hpp"
#include "netlatd/options.hpp"
#include "netlatd/tracer.hpp"

int main(int argc, char **argv) {
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
    return netlatd::run_daemon(opts);
  } catch (const netlatd::Error &e) {
    std::fputs(netlatd::fatal_error_text(e.what()).c_str(), stderr);
    return static_cast<int>(e.code());
  } catch (const std::exception &e) {
    std::fputs(netlatd::fatal_error_text(e.what()).c_str(), stderr);
    return static_cast<int>(netlatd::ExitCode::Software);
  }
}
