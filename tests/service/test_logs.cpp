// What a log collector and an operator get from the running daemon: a
// collector's user in the output group reads the JSON lines, also after
// logrotate's reopen, and one outside it cannot; under the journal stream
// every log line carries its syslog priority, which a real transient unit
// turns into `journalctl -p err` finding the errors and nothing else.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "net_fixture.hpp"
#include "process.hpp"
#include "scratch.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace nltest;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The daemon filters on it; nothing needs to listen there.
constexpr const char *kPort = "47999";

template <typename F>
bool eventually(int timeout_ms, F done) {
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (Clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

bool on_path(const std::string &tool) { return sh("command -v " + tool + " >/dev/null 2>&1") == 0; }

std::string quote(const fs::path &p) { return "'" + p.string() + "'"; }

// `cat` of the file by user nobody with only the given supplementary groups.
CommandResult read_as_nobody(const fs::path &file, const std::string &groups) {
  const std::string as = groups.empty() ? "--clear-groups" : "--groups=" + groups;
  return run_command("setpriv --reuid=65534 --regid=65534 " + as + " cat " + quote(file));
}

}  // namespace

TEST_CASE("a collector's user in group adm reads the output, also after logrotate's reopen; others cannot",
          "[service][output_group]") {
  SKIP_UNLESS_ROOT();
  if (!on_path("setpriv"))
    SKIP("setpriv not installed (util-linux)");
  const struct group *adm = getgrnam("adm");
  if (!adm)
    SKIP("this system has no group adm");
  const std::string adm_gid = std::to_string(adm->gr_gid);

  TempDir scratch;
  // Others may pass through the scratch directory, as through /var/log.
  REQUIRE(chmod(scratch.path().c_str(), 0711) == 0);
  // As LogsDirectory=netlatd with LogsDirectoryMode=0750 makes it: root's alone.
  const fs::path dir = scratch.path() / "netlatd";
  fs::create_directory(dir);
  REQUIRE(chmod(dir.c_str(), 0750) == 0);
  const fs::path out = dir / "netlatd.jsonl";

  // The default output group, adm.
  Daemon nl({NETLATD_BINARY, "--iface", "lo", "--port", kPort, "--interval", "0.2", "--output", out.string()});
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  REQUIRE(eventually(3000, [&] { return read_file(out).find("\"type\":\"interval\"") != std::string::npos; }));

  const CommandResult collector = read_as_nobody(out, adm_gid);
  INFO(collector.output);
  CHECK(collector.status == 0);
  CHECK_THAT(collector.output, ContainsSubstring("\"type\":\"interval\""));
  const CommandResult outsider = read_as_nobody(out, "");
  INFO(outsider.output);
  CHECK(outsider.status != 0);
  CHECK_THAT(outsider.output, ContainsSubstring("Permission denied"));

  // logrotate renames the file and creates a new one (here root's alone, as
  // a `create 0640 root root` line would), then SIGHUP.
  fs::rename(out, dir / "netlatd.jsonl.1");
  {
    std::ofstream created(out);
  }
  REQUIRE(chmod(out.c_str(), 0600) == 0);
  nl->signal(SIGHUP);
  REQUIRE(nl->wait_for_stderr("reopened output", 3000));
  const bool new_file_read = eventually(3000, [&] {
    const CommandResult r = read_as_nobody(out, adm_gid);
    return r.status == 0 && r.output.find("\"type\":\"interval\"") != std::string::npos;
  });
  CHECK(new_file_read);
  CHECK(read_as_nobody(out, "").status != 0);
  CHECK(read_as_nobody(dir / "netlatd.jsonl.1", adm_gid).status == 0);

  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  CHECK_THAT(nl->exit().err, !ContainsSubstring("cannot give"));
}

TEST_CASE("on the journal stream every log line of the daemon starts with its priority", "[service][journal]") {
  SKIP_UNLESS_ROOT();
  TempDir dir;
  const fs::path err = dir.path() / "stderr", config = dir.path() / "netlatd.toml";
  {
    std::ofstream cfg(config);
    cfg << "iface = \"lo\"\nports = [" << kPort << "]\ninterval = 0.5\n";
  }
  // As systemd starts a unit: stderr a stream, JOURNAL_STREAM naming it.
  const std::string script = "exec 2>" + quote(err) + "; export JOURNAL_STREAM=\"$(stat -c %d:%i " + quote(err) +
                             ")\"; exec \"$0\" \"$@\"";
  // A warning (no such group), info lines, and after a bad reload an error.
  Daemon nl({"/bin/sh", "-c", script, NETLATD_BINARY, "--config", config.string(), "--output",
             (dir.path() / "out.jsonl").string(), "--output-group", "netlatd-no-such-group"});
  REQUIRE(nl.wait_ready(15000));
  {
    std::ofstream cfg(config, std::ios::trunc);
    cfg << "interval = \"often\"\n";
  }
  nl->signal(SIGHUP);
  REQUIRE(eventually(3000, [&] { return read_file(err).find("configuration not reloaded") != std::string::npos; }));
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);

  const std::string text = read_file(err);
  INFO(text);
  const std::regex prefixed(R"(^<([0-7])>netlatd: (debug|info|warning|error|critical): .*)");
  const std::regex ready(R"(^<6>netlatd: info: tracing lo .* ready$)");
  const std::regex no_group(R"(^<4>netlatd: warning: output group 'netlatd-no-such-group' does not exist.*)");
  const std::regex bad_reload(R"(^<3>netlatd: error: .*configuration not reloaded.*)");
  bool saw_ready = false, saw_no_group = false, saw_bad_reload = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    CHECK(std::regex_match(line, prefixed));
    saw_ready |= std::regex_match(line, ready);
    saw_no_group |= std::regex_match(line, no_group);
    saw_bad_reload |= std::regex_match(line, bad_reload);
  }
  CHECK(saw_ready);
  CHECK(saw_no_group);
  CHECK(saw_bad_reload);
}

TEST_CASE("a real transient unit: journalctl -p err shows the daemon's errors and none of its info lines",
          "[service][journal]") {
  SKIP_UNLESS_ROOT();
  if (!fs::is_directory("/run/systemd/system"))
    SKIP("systemd is not the init system here (no /run/systemd/system): no unit to run");
  for (const char *tool : {"systemd-run", "journalctl", "systemctl"})
    if (!on_path(tool))
      SKIP(std::string(tool) + " not installed");
  const std::string stem = "netlatd-test-journal-" + std::to_string(getpid());
  const std::string ok_unit = stem + "-ok", failing_unit = stem + "-fails";
  // --collect unloads each unit once it ended, failed or not.
  const auto run_unit = [&](const std::string &unit, const std::string &args) {
    return run_command("systemd-run --quiet --wait --collect --unit=" + unit + " " + NETLATD_BINARY + " " + args);
  };
  const auto journal = [&](const std::string &unit, const std::string &priority) {
    return run_command("journalctl --quiet --no-pager -o cat -u " + unit + " -p " + priority).output;
  };
  const CommandResult ok = run_unit(ok_unit, std::string("--iface lo --port ") + kPort + " --interval 0.5 --duration 1");
  INFO(ok.output);
  CHECK(ok.status == 0);
  const CommandResult fails = run_unit(failing_unit, std::string("--iface netlatd-none0 --port ") + kPort);
  INFO(fails.output);
  CHECK(fails.status != 0);
  run_command("systemctl reset-failed " + ok_unit + " " + failing_unit + " 2>/dev/null");

  // The journal may take a moment to have the lines.
  CHECK(eventually(5000, [&] { return journal(ok_unit, "info").find("ready") != std::string::npos; }));
  const bool error_found = eventually(5000, [&] {
    return journal(failing_unit, "err").find("netlatd: error: no such interface 'netlatd-none0'") != std::string::npos;
  });
  CHECK(error_found);
  // The priority is journald's field, not text left in the message.
  CHECK_THAT(journal(failing_unit, "err"), !ContainsSubstring("<3>"));
  const std::string ok_errors = journal(ok_unit, "err");
  INFO(ok_errors);
  CHECK(ok_errors.empty());
  CHECK_THAT(journal(ok_unit, "info"), !ContainsSubstring("<6>"));
}
