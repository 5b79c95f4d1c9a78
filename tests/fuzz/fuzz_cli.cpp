// The command line: argv built from the input split on NUL bytes, after
// "netlatd". parse_command_line() either gives options that pass validate(),
// or an --help/--version text, or throws Error with a documented code
// (64 usage, 66 config unreadable, 78 bad config) and a one-line message.
//
// --config reads a file: an argument holding '/' is refused, and the harness
// runs in a scratch directory holding one valid config (c.toml) and one bad
// one (bad.toml), so no input can make it read /dev/zero or a real file.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "netlatd/service/options.hpp"

namespace {

std::string g_scratch;

void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(g_scratch, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char tmpl[] = "/tmp/netlatd-fuzz-cli-XXXXXX";
  if (!mkdtemp(tmpl) || chdir(tmpl) != 0)
    nlfuzz::fail("a scratch directory", "mkdtemp/chdir failed");
  g_scratch = tmpl;
  std::atexit(remove_scratch);
  std::ofstream("c.toml") << "iface = \"lo\"\nports = [5000, 5001]\ninterval = 2.5\noutliers_over = \"1ms\"\n";
  std::ofstream("bad.toml") << "iface = \"lo\"\nports = [70000]\n";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args{"netlatd"};
  std::string arg;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\0') {
      args.push_back(arg);
      arg.clear();
    } else {
      if (data[i] == '/')
        return -1;  // a path outside the scratch directory: not kept in the corpus
      arg.push_back(static_cast<char>(data[i]));
    }
  }
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  using netlatd::ExitCode;
  try {
    const netlatd::CommandLine cl = netlatd::parse_command_line(static_cast<int>(argv.size()), argv.data());
    if (cl.exit_now && (*cl.exit_now != 0 || cl.exit_text.empty()))
      nlfuzz::fail("--help and --version exit 0 with a text", std::to_string(*cl.exit_now));
    if (!cl.exit_now) {
      netlatd::validate(cl.options);  // what parse_command_line returns is valid
      const auto &duration = cl.options.duration_s;
      if (duration && !(*duration * 1e9 < 9.2e18))
        nlfuzz::fail("a valid --duration fits the daemon's int64 nanoseconds", std::to_string(*duration));
    }
  } catch (const netlatd::Error &e) {
    nlfuzz::check_error(e, {ExitCode::Usage, ExitCode::NoInput, ExitCode::Config});
  }
  return 0;
}
