// systemd/netlatd.service and netlatd@.service pass `systemd-analyze verify`
// and keep the contract the daemon relies on (Type=notify, exit codes that
// must not restart, the config path).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "scratch.hpp"

namespace fs = std::filesystem;

namespace {

using nltest::read_file;
using nltest::TempDir;

const fs::path kSource = NETLATD_SOURCE_DIR;

void write_file(const fs::path &p, const std::string &text) {
  std::ofstream out(p);
  REQUIRE(out);
  out << text;
}

bool on_path(const std::string &tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

using Result = nltest::CommandResult;
Result run(const std::string &command) { return nltest::run_command(command); }

// systemd-analyze verify insists that ExecStart= exists and that every man:
// page in Documentation= resolves. The installed paths do not exist on a
// build machine, so the copies point ExecStart at the built daemon and
// MANPATH at a tree holding docs/netlatd.8: the man page check then checks
// our own page.
struct VerifyTree {
  TempDir dir;
  fs::path units;
  fs::path man;

  VerifyTree() : units(dir.path() / "units"), man(dir.path() / "man") {
    fs::create_directories(units);
    fs::create_directories(man / "man8");
    fs::copy_file(kSource / "docs/netlatd.8", man / "man8/netlatd.8");
    const std::string binary = fs::exists(NETLATD_BINARY) ? std::string(NETLATD_BINARY) : std::string("/bin/true");
    for (const char *name : {"netlatd.service", "netlatd@.service", "netlatd.socket"}) {
      const std::string text = read_file(kSource / "systemd" / name);
      write_file(units / name,
                 std::regex_replace(text, std::regex("^ExecStart=/usr/sbin/netlatd ", std::regex::multiline),
                                    "ExecStart=" + binary + " "));
    }
  }

  Result verify(const std::string &extra = "") const {
    return run("MANPATH='" + man.string() + "' systemd-analyze verify '" + (units / "netlatd.service").string() +
               "' '" + (units / "netlatd@.service").string() + "' '" + (units / "netlatd.socket").string() + "' " +
               extra);
  }
};

}  // namespace

TEST_CASE("systemd units pass systemd-analyze verify", "[service][units]") {
  if (!on_path("systemd-analyze"))
    SKIP("systemd-analyze not installed (apt-get install systemd)");
  VerifyTree tree;
  const Result r = tree.verify();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.empty());
}

TEST_CASE("the verify harness does report a broken unit", "[service][units]") {
  // Guards the test above against passing because the tool checked nothing.
  if (!on_path("systemd-analyze"))
    SKIP("systemd-analyze not installed (apt-get install systemd)");
  VerifyTree tree;
  std::string text = read_file(tree.units / "netlatd.service");
  text += "\n[Service]\nRestart=sometimes\nExecStartPre=/nonexistent/netlatd-helper\n";
  write_file(tree.units / "netlatd.service", text);
  const Result r = tree.verify();
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Matchers::ContainsSubstring("/nonexistent/netlatd-helper"));
}

TEST_CASE("units keep the daemon's contract", "[service][units]") {
  const std::string plain = read_file(kSource / "systemd/netlatd.service");
  const std::string templ = read_file(kSource / "systemd/netlatd@.service");
  auto has_line = [](const std::string &text, const std::string &line) {
    return std::regex_search(text, std::regex("^" + line + "$", std::regex::multiline));
  };
  CHECK(has_line(plain, "ExecStart=/usr/sbin/netlatd --config /etc/netlatd/netlatd\\.toml"));
  CHECK(has_line(templ, "ExecStart=/usr/sbin/netlatd --config /etc/netlatd/%i\\.toml"));
  for (const std::string *unit : {&plain, &templ}) {
    CHECK(has_line(*unit, "Type=notify"));
    CHECK(has_line(*unit, "NotifyAccess=main"));
    CHECK(has_line(*unit, "ExecReload=/bin/kill -HUP \\$MAINPID"));
    CHECK(has_line(*unit, "WatchdogSec=30s"));
    // The exit codes netlatd(8) lists as permanent: usage, config unreadable,
    // no such interface, kernel lacks a feature, privileges, bad config.
    CHECK(has_line(*unit, "RestartPreventExitStatus=64 66 68 69 77 78"));
    CHECK(has_line(*unit, "CapabilityBoundingSet=CAP_BPF CAP_PERFMON"));
    CHECK(has_line(*unit, "LogsDirectory=netlatd"));
    // Membership of the output group is what lets netlatd give its files to
    // it without CAP_CHOWN (configs/netlatd.toml's output_group).
    CHECK(has_line(*unit, "SupplementaryGroups=adm"));
  }
  // The template must differ from the plain unit only in what names the instance.
  auto settings = [](const std::string &text) {
    std::istringstream in(text);
    std::string out;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#' && line.rfind("ExecStart=", 0) != 0 && line.rfind("Description=", 0) != 0)
        out += line + "\n";
    return out;
  };
  CHECK(settings(plain) == settings(templ));

  // The socket unit listens on the daemon's default metrics port, on
  // loopback, once, for the plain service.
  const std::string socket = read_file(kSource / "systemd/netlatd.socket");
  CHECK(has_line(socket, "ListenStream=127\\.0\\.0\\.1:" + std::to_string(netlatd::kDefaultMetricsPort)));
  CHECK(has_line(socket, "Service=netlatd\\.service"));
  CHECK(std::regex_search(socket, std::regex("^ListenStream=", std::regex::multiline)));
  size_t listens = 0;
  for (size_t at = socket.find("\nListenStream="); at != std::string::npos; at = socket.find("\nListenStream=", at + 1))
    ++listens;
  CHECK(listens == 1);
}
