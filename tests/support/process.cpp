#include "process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "scratch.hpp"

namespace nltest {

Process::Process(std::vector<std::string> argv, std::vector<std::string> env) {
  char tmpl[] = "/tmp/netlatd-test-XXXXXX";
  if (!mkdtemp(tmpl))
    throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // A test killed outright runs no destructor: its children die with it
    // rather than live on holding the kernel-tests lock (they inherit its fd
    // from flock) and their BPF programs.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    int out = open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    // The test runner may have blocked signals; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const std::string &e : env)
      putenv(strdup(e.c_str()));
    std::vector<char *> args;
    for (auto &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  running_ = true;
}

Process::~Process() {
  if (running_) {
    kill(pid_, SIGKILL);
    wait(5000);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Process::signal(int sig) {
  if (running_)
    kill(pid_, sig);
}

int patient_ms(int ms) {
  const char *env = std::getenv("NETLATD_TEST_PATIENCE");
  const long factor = env && *env ? std::strtol(env, nullptr, 10) : 1;
  return factor > 1 && factor <= 100 ? static_cast<int>(ms * factor) : ms;
}

bool Process::wait(int timeout_ms) {
  if (!running_)
    return true;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(patient_ms(timeout_ms));
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      running_ = false;
      if (WIFEXITED(status))
        exit_.code = WEXITSTATUS(status);
      else if (WIFSIGNALED(status))
        exit_.signal = WTERMSIG(status);
      exit_.out = out();
      exit_.err = err();
      return true;
    }
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string Process::out() const { return slurp(dir_ + "/out"); }
std::string Process::err() const { return slurp(dir_ + "/err"); }

bool Process::wait_for_stderr(const std::string &needle, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(patient_ms(timeout_ms));
  while (std::chrono::steady_clock::now() < until) {
    if (err().find(needle) != std::string::npos)
      return true;
    if (wait(0) && !running_)
      return err().find(needle) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

Daemon::Daemon(std::vector<std::string> argv, std::vector<std::string> env) {
  env.push_back(notify_.env());
  proc_ = std::make_unique<Process>(std::move(argv), std::move(env));
}

bool Daemon::wait_ready(int timeout_ms) {
  // Short slices, so a daemon that exits early is noticed at once.
  for (int waited = 0; waited < patient_ms(timeout_ms); waited += 100) {
    if (notify_.wait_for_line("READY=1", 100))
      return true;
    if (proc_->wait(0))
      return false;
  }
  return false;
}

Exit run_netlatd(const std::vector<std::string> &args, int timeout_ms) {
  std::vector<std::string> argv{NETLATD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p(argv);
  if (!p.wait(timeout_ms)) {
    p.signal(SIGKILL);
    p.wait(2000);
    Exit e = p.exit();
    e.code = -2;  // timed out
    return e;
  }
  return p.exit();
}

}  // namespace nltest
