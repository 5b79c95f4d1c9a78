#pragma once
// Small things the tests share: a shell command's status and output, a
// file's contents, and a scratch directory removed with everything in it.
#include <filesystem>
#include <string>

namespace nltest {

struct CommandResult {
  int status = -1;     // exit status, -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `command` with sh -c; stderr is folded into the output.
CommandResult run_command(const std::string &command);

// The whole file; throws std::runtime_error if it cannot be read.
std::string read_file(const std::filesystem::path &path);
// The whole file, or "" when it cannot be read (not written yet, or gone).
std::string slurp(const std::filesystem::path &path);

// `prefix` + a unique suffix under /tmp; throws std::runtime_error if it
// cannot be made.
class TempDir {
public:
  explicit TempDir(const std::string &prefix = "netlatd-test");
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

}  // namespace nltest
