#include "libbpf_log.hpp"

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include "netlatd/kernel/tracer.hpp"

namespace netlatd {
namespace {

std::mutex g_libbpf_mu;
std::string g_last_warning;
std::string g_verifier_verdict;  // the last verifier log's verdict, with its program

int libbpf_to_spdlog(enum libbpf_print_level level, const char *fmt, va_list args) {
  va_list again;
  va_copy(again, args);
  int n = vsnprintf(nullptr, 0, fmt, args);
  std::string line(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0)
    vsnprintf(line.data(), line.size() + 1, fmt, again);
  va_end(again);
  while (!line.empty() && line.back() == '\n')
    line.pop_back();
  if (level == LIBBPF_WARN) {
    std::lock_guard lock(g_libbpf_mu);
    g_last_warning = line;
    if (std::string verdict = verifier_verdict(line); !verdict.empty())
      g_verifier_verdict = verdict;
  }
  spdlog::debug("{}", line);
  return n;
}

}  // namespace

void route_libbpf_logs() { libbpf_set_print(libbpf_to_spdlog); }

// A verifier log (libbpf warns it whole: "prog 'x': -- BEGIN PROG LOAD LOG
// --\n...\n-- END PROG LOAD LOG --") says why in the line before its
// "processed N insns" summary, or in its last line.
std::string verifier_verdict(const std::string &log) {
  const size_t begin = log.find("-- BEGIN PROG LOAD LOG --");
  if (begin == std::string::npos)
    return "";
  std::string prog;
  if (const size_t at = log.rfind("prog '", begin); at != std::string::npos) {
    const size_t end = log.find('\'', at + 6);
    if (end != std::string::npos && end < begin)
      prog = log.substr(at + 6, end - at - 6);
  }
  std::string verdict;
  size_t at = log.find('\n', begin);
  while (at != std::string::npos) {
    const size_t next = log.find('\n', at + 1);
    std::string line = log.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (line.rfind("processed ", 0) == 0 || line.rfind("-- END PROG LOAD LOG", 0) == 0)
      break;
    if (!line.empty())
      verdict = line;
    at = next;
  }
  if (verdict.empty())
    return "";
  return prog.empty() ? verdict : "program " + prog + ": " + verdict;
}

std::string last_libbpf_warning() {
  std::lock_guard lock(g_libbpf_mu);
  return g_last_warning;
}

void forget_verifier_verdict() {
  std::lock_guard lock(g_libbpf_mu);
  g_verifier_verdict.clear();
}

std::string last_verifier_verdict() {
  std::lock_guard lock(g_libbpf_mu);
  return g_verifier_verdict;
}

}  // namespace netlatd
