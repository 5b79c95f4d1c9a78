// The TOML config file as `netlatd --check --config FILE` reads it at start
// and on SIGHUP: any content either gives options that pass validation or
// throws Error(Config) with one "file:line:col: message" line (exit 78).
// Anything else (another exception type escaping the reload path, a crash,
// a hang, a leak) is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "netlatd/service/options.hpp"

namespace {

// The file the loader reads: a memfd, rewritten for each input, so the
// harness touches no real file and opens the path as netlatd would.
int config_fd() {
  static const int fd = memfd_create("netlatd-fuzz.toml", MFD_CLOEXEC);
  if (fd < 0)
    nlfuzz::fail("memfd_create works", "it failed");
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const int fd = config_fd();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    nlfuzz::fail("the memfd takes the input", "a short write");
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const char *argv[] = {"netlatd", "--check", "--config", path.c_str()};
  try {
    netlatd::parse_command_line(4, argv);
  } catch (const netlatd::Error &e) {
    nlfuzz::check_error(e, {netlatd::ExitCode::Config});
    if (std::string(e.what()).rfind(path + ":", 0) != 0)
      nlfuzz::fail("a config error starts with file:line:col", e.what());
  }
  return 0;
}
