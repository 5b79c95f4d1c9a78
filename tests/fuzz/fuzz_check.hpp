#pragma once
// What the harnesses share: a broken promise is a crash libFuzzer records,
// with the promise and the offending value on stderr.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "netlatd/base/errors.hpp"

namespace nlfuzz {

[[noreturn]] inline void fail(const char *promise, const std::string &detail) {
  std::fprintf(stderr, "netlatd fuzz: broken promise: %s\n  got: %s\n", promise, detail.c_str());
  std::abort();
}

// main() prints an Error as "netlatd: error: <what>" and exits with its code:
// the code must be one the caller documents and the message one line.
inline void check_error(const netlatd::Error &e, std::initializer_list<netlatd::ExitCode> documented) {
  bool known = false;
  for (netlatd::ExitCode c : documented)
    known = known || e.code() == c;
  if (!known)
    fail("an error exits with a documented code", std::to_string(static_cast<int>(e.code())) + ": " + e.what());
  const std::string what = e.what();
  if (what.empty() || what.find('\n') != std::string::npos)
    fail("an error message is one non-empty line", what);
}

}  // namespace nlfuzz
