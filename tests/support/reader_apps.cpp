#include "reader_apps.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "scratch.hpp"

namespace nltest {
namespace {

std::vector<std::string> tool_argv(const char *binary, const std::string &ns, const std::string &mode,
                                   const std::vector<std::string> &args, const std::filesystem::path &log) {
  std::vector<std::string> argv{binary, mode};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!ns.empty())
    argv.insert(argv.end(), {"--netns", ns});
  argv.insert(argv.end(), {"--log", log.string()});
  return argv;
}

}  // namespace

ReaderApp::ReaderApp(const std::string &ns, const std::string &mode, const std::vector<std::string> &args,
                     Start start) {
  char tmpl[] = "/tmp/nlreaders-XXXXXX";
  if (!mkdtemp(tmpl))
    throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::vector<std::string> argv = tool_argv(NLREADERS_BINARY, ns, mode, args, dir_ / "reads.log");
  argv.insert(argv.end(), {"--ready-file", (dir_ / "ready").string()});
  if (start == Start::Held)
    argv.insert(argv.end(), {"--go-file", (dir_ / "go").string()});
  proc_ = std::make_unique<Process>(argv);
  for (int waited = 0; !std::filesystem::exists(dir_ / "ready"); waited += 5) {
    if (waited > patient_ms(5000) || proc_->wait(0))
      throw std::runtime_error("nlreaders did not start: " + proc_->err());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ReaderApp::go() const {
  std::ofstream(dir_ / "go").flush();
}

ReaderApp::~ReaderApp() {
  proc_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool ReaderApp::finish(int timeout_ms) {
  if (!proc_->wait(timeout_ms)) {
    proc_->signal(SIGTERM);
    proc_->wait(5000);
    return false;
  }
  return proc_->exit().code == 0;
}

std::string ReaderApp::output() const { return proc_->out() + proc_->err(); }

ReaderLog ReaderApp::log() const {
  return parse_reader_log(slurp(dir_ / "reads.log"));
}

SenderResult run_senders(const std::string &ns, const std::string &mode, const std::vector<std::string> &args,
                         int timeout_ms) {
  TempDir dir("nlsenders");
  Process p(tool_argv(NLSENDERS_BINARY, ns, mode, args, dir.path() / "sent.log"));
  SenderResult r;
  if (!p.wait(timeout_ms)) {
    r.output = "nlsenders did not finish within " + std::to_string(timeout_ms) + " ms";
    return r;
  }
  r.ok = p.exit().code == 0;
  r.output = p.exit().out + p.exit().err;
  r.sent = parse_sender_log(slurp(dir.path() / "sent.log"));
  return r;
}

ReaderLog parse_reader_log(const std::string &text) {
  ReaderLog log;
  std::istringstream in(text);
  std::string kind;
  while (in >> kind) {
    if (kind == "offset") {
      in >> log.realtime_minus_mono >> log.offset_bracket;
    } else if (kind == "R") {
      ReadEntry r;
      in >> r.tid >> r.len >> r.peer_port >> r.id >> r.before >> r.after;
      log.reads.push_back(r);
    } else {
      throw std::runtime_error("nlreaders log: unknown line kind " + kind);
    }
  }
  return log;
}

std::map<int64_t, SentEntry> parse_sender_log(const std::string &text) {
  std::map<int64_t, SentEntry> sent;
  std::istringstream in(text);
  std::string kind;
  while (in >> kind) {
    if (kind != "S")
      throw std::runtime_error("nlsenders log: unknown line kind " + kind);
    SentEntry s;
    in >> s.id >> s.len >> s.sport >> s.cpu >> s.ns;
    sent[s.id] = s;
  }
  return sent;
}

}  // namespace nltest
