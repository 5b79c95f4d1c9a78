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

// Messages often echo input (a flag's value, a TOML key, the character a
// parser stopped at), which may hold a newline or other control characters:
// those are shown escaped ("\n", "\x1b"), so that an error stays one line on
// stderr and in the journal and cannot forge another line there.
inline std::string one_line_message(const std::string &message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

// Fatal errors: thrown once, caught in main(), printed as
// "netlatd: error: <message>", exit with code().
class Error : public std::runtime_error {
public:
  Error(ExitCode code, const std::string &message) : std::runtime_error(one_line_message(message)), code_(code) {}
  ExitCode code() const noexcept { return code_; }

private:
  ExitCode code_;
};

}  // namespace netlatd
