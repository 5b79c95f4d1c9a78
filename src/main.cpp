// netlatd: thin entry point; the daemon is the netlatd_core library.
#include <csignal>
#include <cstdio>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "netlatd/daemon.hpp"
#include "netlatd/errors.hpp"
#include "netlatd/options.hpp"
#include "netlatd/tracer.hpp"

int main(int argc, char **argv) {
  // Logs go to stderr (journald reads it); report lines own stdout.
  auto logger = spdlog::stderr_logger_mt("netlatd");
  logger->set_pattern("netlatd: %l: %v");
  spdlog::set_default_logger(logger);
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
    std::fprintf(stderr, "netlatd: error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "netlatd: error: %s\n", e.what());
    return static_cast<int>(netlatd::ExitCode::Software);
  }
}
