#pragma once
// Helpers of the command line and config file tests (test_cli.cpp,
// test_cli_scope.cpp): a config file for the length of a test, the parsed
// command line or the exit code it gives, and the lines of a message.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "netlatd/base/errors.hpp"
#include "netlatd/service/options.hpp"

namespace nltest {

inline int lines(const std::string &s) {
  int n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string &content) {
    char tmpl[] = "/tmp/netlatd-cfg-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    FILE *f = fdopen(fd, "w");
    std::fputs(content.c_str(), f);
    std::fclose(f);
  }
  ~TempFile() { unlink(path.c_str()); }
};

inline netlatd::CommandLine parse(std::initializer_list<const char *> args) {
  std::vector<const char *> argv{"netlatd"};
  argv.insert(argv.end(), args.begin(), args.end());
  return netlatd::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

inline netlatd::ExitCode code_of(std::initializer_list<const char *> args) {
  try {
    parse(args);
  } catch (const netlatd::Error &e) {
    return e.code();
  }
  return netlatd::ExitCode::Ok;
}

}  // namespace nltest
