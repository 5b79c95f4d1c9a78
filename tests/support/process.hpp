#pragma once
// The netlatd binary as a child process, for tests of its command line and
// its life as a service: output captured to files, real signals, timeouts.
#include <sys/types.h>

#include <string>
#include <vector>

namespace nltest {

struct Exit {
  int code = -1;     // exit status, or -1 when killed by a signal
  int signal = 0;
  std::string out, err;
};

class Process {
public:
  // Starts argv[0] with the arguments; `env` entries "K=V" are added.
  explicit Process(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Process();  // SIGKILLs and reaps if still running
  Process(const Process &) = delete;
  Process &operator=(const Process &) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits up to timeout_ms; returns false on timeout.
  bool wait(int timeout_ms);
  const Exit &exit() const { return exit_; }
  std::string out() const;  // stdout so far
  std::string err() const;  // stderr so far
  // Waits until stderr contains `needle`; false on timeout or exit.
  bool wait_for_stderr(const std::string &needle, int timeout_ms);
  bool running() const { return running_; }

private:
  pid_t pid_ = -1;
  bool running_ = false;
  Exit exit_;
  std::string dir_;
};

// Runs netlatd with arguments to completion (timeout_ms), returns its exit.
Exit run_netlatd(const std::vector<std::string> &args, int timeout_ms = 10000);

}  // namespace nltest
