#pragma once
// The netlatd binary as a child process, for tests of its command line and
// its life as a service: output captured to files, real signals, timeouts.
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "notify_socket.hpp"

namespace nltest {

// A wait for a process (its exit, a line, READY=1) of `ms`, times
// NETLATD_TEST_PATIENCE (a whole factor, default 1). The vm tier's TCG
// guests set it: a program runs there some ten times slower than here, and
// slower still while the host is busy. Only how long a test waits for what
// must happen changes, never what it checks.
int patient_ms(int ms);

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

// A child started as a service manager starts netlatd: with NOTIFY_SOCKET
// set, so that readiness is the daemon's own READY=1 (sent once every program
// is attached and live), not a guess from its log.
class Daemon {
public:
  explicit Daemon(std::vector<std::string> argv, std::vector<std::string> env = {});
  // True once READY=1 arrived; false on timeout or if the process exited.
  bool wait_ready(int timeout_ms);
  Process &proc() { return *proc_; }
  Process *operator->() { return proc_.get(); }
  NotifySocket &notify() { return notify_; }

private:
  NotifySocket notify_;
  std::unique_ptr<Process> proc_;
};

// Runs netlatd with arguments to completion (timeout_ms), returns its exit.
Exit run_netlatd(const std::vector<std::string> &args, int timeout_ms = 10000);

}  // namespace nltest
