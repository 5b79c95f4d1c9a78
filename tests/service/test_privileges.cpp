// Least privilege: the daemon as an unprivileged user with only the
// capabilities systemd/netlatd.service grants counts exactly, and without
// CAP_BPF or CAP_PERFMON it exits 77 saying which is missing. Every test
// runs as root and starts the real binary through setpriv.
#include <signal.h>
#include <sys/types.h>

#include <cctype>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "daemon_run.hpp"
#include "net_fixture.hpp"
#include "process.hpp"
#include "scrape.hpp"
#include "scratch.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace nltest;
using namespace nltest::daemon_run;
namespace fs = std::filesystem;

namespace {

// The unit's `Key=` value (first line), e.g. the capabilities it grants.
std::string unit_setting(const std::string &unit, const std::string &key) {
  std::istringstream in(slurp(fs::path(NETLATD_SOURCE_DIR) / "systemd" / unit));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + "=", 0) == 0)
      return line.substr(key.size() + 1);
  return "";
}

// "CAP_BPF CAP_PERFMON" -> "-all,+bpf,+perfmon", setpriv's spelling.
std::string setpriv_caps(const std::string &unit_caps) {
  std::string out = "-all";
  std::istringstream in(unit_caps);
  for (std::string cap; in >> cap;) {
    std::string name = cap.substr(cap.rfind("CAP_", 0) == 0 ? 4 : 0);
    for (char &c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += ",+" + name;
  }
  return out;
}

// argv as an unprivileged user (nobody) holding exactly `caps` (setpriv's
// list) in every set, as systemd starts a unit with User=/DynamicUser= and
// AmbientCapabilities=: no more can be gained (bounding set, no_new_privs).
std::vector<std::string> as_nobody_with(const std::string &caps, const std::vector<std::string> &argv) {
  std::vector<std::string> out{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               "--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps,
                               "--no-new-privs", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// A field of /proc/PID/status, e.g. "CapEff" or "Uid".
std::string proc_status(pid_t pid, const std::string &field) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) {
      std::string v = line.substr(field.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "";
}

}  // namespace

TEST_CASE("least privilege: as an unprivileged user with only the unit's capabilities, exact counts",
          "[service][privileges]") {
  SKIP_UNLESS_ROOT();
  if (sh("command -v setpriv >/dev/null") != 0)
    SKIP("setpriv not installed (util-linux)");
  // What the unit gives the daemon is what this test gives it.
  const std::string granted = unit_setting("netlatd.service", "AmbientCapabilities");
  REQUIRE(granted == "CAP_BPF CAP_PERFMON");
  CHECK(unit_setting("netlatd.service", "CapabilityBoundingSet") == granted);
  CHECK(unit_setting("netlatd.service", "DynamicUser") == "yes");
  CHECK(unit_setting("netlatd.service", "User").empty());

  const uint16_t port = free_port();
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Daemon nl(as_nobody_with(setpriv_caps(granted), netlatd_on_lo(port, {"--interval", "1"})));
  // The notify socket is the test's (root's, mode 0700): let the user reach it,
  // as systemd's socket is reachable by every unit's main process.
  fs::permissions(fs::path(nl.notify().path()).parent_path(), fs::perms::owner_all | fs::perms::others_exec);
  fs::permissions(nl.notify().path(), fs::perms::all);
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  // Not root, and no capability beyond the two: CAP_PERFMON is bit 38, CAP_BPF 39.
  CHECK(proc_status(nl->pid(), "Uid").rfind("65534\t", 0) == 0);
  CHECK(proc_status(nl->pid(), "CapEff") == "000000c000000000");
  CHECK(proc_status(nl->pid(), "CapBnd") == "000000c000000000");

  send_udp("", 4, "127.0.0.1", port, 60, 64, 1000);
  REQUIRE(reader.wait_for(60, 5000));
  sleep_ms(1500);  // the interval that holds the last datagram ends
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(5000));
  CHECK(nl->exit().code == 0);
  const Totals t = interval_totals(nl->out());
  CHECK(t.packets == 60);
  // A read tied to no datagram (a push still in flight on the other CPU,
  // 6.18) leaves its packet without a reader: counted, never a total.
  INFO("records without a reader " << t.reader_unknown);
  CHECK(t.reader_unknown <= 3);
  CHECK(t.total_count + t.reader_unknown == 60);
  CHECK(t.final_last);
  CHECK_THAT(nl->err(), !ContainsSubstring("error"));
}

TEST_CASE("least privilege: without CAP_BPF or CAP_PERFMON, exit 77 with one line naming what is missing",
          "[service][privileges]") {
  SKIP_UNLESS_ROOT();
  if (sh("command -v setpriv >/dev/null") != 0)
    SKIP("setpriv not installed (util-linux)");
  const uint16_t port = free_port();
  const struct {
    std::string caps, missing;
  } cases[] = {
      {"-all", "it lacks CAP_BPF and CAP_PERFMON"},
      {"-all,+bpf", "it lacks CAP_PERFMON"},
      {"-all,+perfmon", "it lacks CAP_BPF"},
  };
  for (const auto &c : cases) {
    INFO(c.caps);
    Process p(as_nobody_with(c.caps, netlatd_on_lo(port, {})));
    REQUIRE(p.wait(10000));
    CHECK(p.exit().code == 77);
    CHECK(p.exit().err == "netlatd: error: must run as root or with CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before "
                          "5.8): " + c.missing + "\n");
    CHECK(p.out().empty());
  }
  // Root is not enough by itself: root whose bounding set lacks them (a
  // container, a unit's CapabilityBoundingSet=) is refused the same way,
  // before anything is loaded.
  Process root({"setpriv", "--inh-caps=-bpf,-perfmon,-sys_admin", "--bounding-set=-bpf,-perfmon,-sys_admin", "--",
                NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(port)});
  REQUIRE(root.wait(10000));
  CHECK(root.exit().code == 77);
  CHECK_THAT(root.exit().err, ContainsSubstring("it lacks CAP_BPF and CAP_PERFMON"));
}
