#pragma once
// Exit codes (sysexits.h values, documented in README and netlatd(8)) and the
// one exception type that carries them up to main().
#include <stdexcept>
#include <string>

namespace netlatd {

enum class ExitCode : int {
  Ok = 0,
  Usage = 64,          // bad flag or value: port outside 1-65535, bad interval or duration
  NoInput = 66,        // config file missing or unreadable
  NoInterface = 68,    // no such network interface
  Unavailable = 69,    // the kernel lacks BTF, BPF, the ring buffer or a hook a stage needs
  Software = 70,       // internal error
  CantCreate = 73,     // output file cannot be opened
  NoPermission = 77,   // not root and missing CAP_BPF / CAP_PERFMON
  Config = 78,         // config file content is invalid (file:line:col: message)
};

// Fatal errors: thrown once, caught in main(), printed as
// "netlatd: error: <message>", exit with code().
class Error : public std::runtime_error {
public:
  Error(ExitCode code, const std::string &message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

private:
  ExitCode code_;
};

}  // namespace netlatd
