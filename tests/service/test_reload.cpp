// SIGHUP as logrotate and an operator use it: the output renamed and
// reopened, the config file reloaded (a bad one changes nothing), each
// reload RELOADING=1 then READY=1 on a real NOTIFY_SOCKET. Every test runs
// the real binary as root.
#include <signal.h>

#include <filesystem>
#include <regex>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <nlohmann/json.hpp>

#include "daemon_run.hpp"
#include "net_fixture.hpp"
#include "process.hpp"
#include "scrape.hpp"
#include "scratch.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace nltest;
using namespace nltest::daemon_run;
namespace fs = std::filesystem;

TEST_CASE("SIGHUP: logrotate renames the output, the daemon reopens it; RELOADING then READY", "[service][sighup]") {
  SKIP_UNLESS_ROOT();
  TempDir dir;
  const fs::path out = dir.path() / "netlatd.jsonl", rotated = dir.path() / "netlatd.jsonl.1";
  const uint16_t port = free_port();
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Daemon nl(netlatd_on_lo(port, {"--interval", "0.2", "--output", out.string()}));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  REQUIRE(eventually(3000, [&] { return json_lines(slurp(out)).size() >= 2; }));

  fs::rename(out, rotated);
  nl->signal(SIGHUP);
  // In this order, as systemd expects of a reload.
  CHECK(nl.notify().wait_for_line("RELOADING=1", 2000));
  CHECK(nl.notify().wait_for_line("READY=1", 2000));
  REQUIRE(eventually(3000, [&] { return fs::exists(out) && json_lines(slurp(out)).size() >= 2; }));
  CHECK_THAT(nl->err(), ContainsSubstring("reopened output '" + out.string() + "'"));
  // Packets sent now land in the new file only.
  const size_t rotated_lines = json_lines(slurp(rotated)).size();
  send_udp("", 4, "127.0.0.1", port, 30, 64, 1000);
  REQUIRE(reader.wait_for(30, 5000));
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  CHECK(json_lines(slurp(rotated)).size() == rotated_lines);
  Totals t = interval_totals(slurp(out));
  CHECK(t.packets == 30);
  CHECK(t.final_last);
}

TEST_CASE("SIGHUP reloads the config: a new interval applies, a bad file is one error line and changes nothing",
          "[service][sighup][config]") {
  SKIP_UNLESS_ROOT();
  TempDir dir;
  const fs::path cfg = dir.path() / "netlatd.toml", out = dir.path() / "out.jsonl";
  const uint16_t port = free_port();
  auto config = [&](const std::string &interval, uint16_t p) {
    return "iface = \"lo\"\nports = [" + std::to_string(p) + "]\ninterval = " + interval + "\noutput = \"" +
           out.string() + "\"\n";
  };
  write_file(cfg, config("30", port));
  Daemon nl({NETLATD_BINARY, "--config", cfg.string()});
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  sleep_ms(300);
  CHECK(json_lines(slurp(out)).empty());  // 30 s interval: nothing yet

  write_file(cfg, config("0.2", port));
  nl->signal(SIGHUP);
  REQUIRE(nl.notify().wait_for_line("RELOADING=1", 2000));
  REQUIRE(nl.notify().wait_for_line("READY=1", 2000));
  CHECK_THAT(nl->err(), ContainsSubstring("interval 30 s -> 0.2 s"));
  // The running interval (already longer than 0.2 s) ends at once, then one line every 0.2 s.
  REQUIRE(eventually(3000, [&] { return json_lines(slurp(out)).size() >= 4; }));
  auto lines = json_lines(slurp(out));
  for (size_t i = 1; i < lines.size(); i++) {
    INFO(lines[i].dump());
    CHECK(lines[i]["interval_s"].get<double>() > 0.15);
    CHECK(lines[i]["interval_s"].get<double>() < 0.35);
  }

  // A broken file: one error line naming file:line:col, and the old config runs on.
  write_file(cfg, "iface = \"lo\"\nports = [" + std::to_string(port) + "]\ninterval = = 5\n");
  nl->signal(SIGHUP);
  REQUIRE(nl.notify().wait_for_line("RELOADING=1", 2000));
  REQUIRE(nl.notify().wait_for_line("READY=1", 2000));
  REQUIRE(nl->wait_for_stderr("configuration not reloaded", 2000));
  const std::string err = nl->err();
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex("netlatd: error: " + cfg.string() + ":3:\\d+: [^\n]*; configuration "
                                               "not reloaded, the running one is kept\n")));
  const size_t before = json_lines(slurp(out)).size();
  sleep_ms(700);
  CHECK(json_lines(slurp(out)).size() >= before + 2);  // still 0.2 s lines, to the same file
  CHECK(nl->running());

  // Ports are built into the loaded programs: a change is reported, not applied.
  write_file(cfg, config("0.2", static_cast<uint16_t>(port + 1)));
  nl->signal(SIGHUP);
  REQUIRE(nl.notify().wait_for_line("READY=1", 2000));
  REQUIRE(nl->wait_for_stderr("restart netlatd to apply them", 2000));

  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
}
