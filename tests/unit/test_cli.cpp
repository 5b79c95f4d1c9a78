// Bad input: one clear line on stderr and a documented exit code, checked on
// the real binary. Also the config file (TOML), its precedence and its
// reload; --help and --version. The options that choose what is traced and
// how it is split (irq, iface, netns, cgroup, by) are test_cli_scope.cpp's.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "cli_helpers.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/service/options.hpp"
#include "netlatd/version.hpp"
#include "process.hpp"

using namespace netlatd;
using nltest::code_of;
using nltest::lines;
using nltest::parse;
using nltest::run_netlatd;
using nltest::TempFile;

TEST_CASE("usage errors exit 64 with one line", "[cli]") {
  for (auto args : std::vector<std::vector<std::string>>{{"--iface", "lo", "--port", "0"},
                                                        {"--iface", "lo", "--port", "65536"},
                                                        {"--iface", "lo", "--port", "http"},
                                                        {"--iface", "lo", "--port", "5000", "--interval", "0"},
                                                        {"--iface", "lo", "--port", "5000", "--interval", "soon"},
                                                        {"--iface", "lo", "--port", "5000", "--outliers-over", "5 parsecs"},
                                                        {"--iface", "lo", "--port", "5000", "--format", "xml"},
                                                        {"--iface", "lo", "--port", "5000", "--sample", "0"},
                                                        {"--iface", "lo", "--port", "5000", "--sample", "65537"},
                                                        {"--iface", "lo", "--port", "5000", "--sample", "one"},
                                                        {"--iface", "lo"},
                                                        {"--port", "5000"},
                                                        {"--no-such-flag"}}) {
    auto e = run_netlatd(args);
    INFO(args.back());
    CHECK(e.code == 64);
    CHECK(e.err.rfind("netlatd: error: ", 0) == 0);
    CHECK(lines(e.err) == 1);
    CHECK(e.out.empty());
  }
}

TEST_CASE("sample: --sample and the config key take 1 to 65536, else one line", "[cli][config]") {
  auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--sample", "0"});
  CHECK(e.err == "netlatd: error: --sample must be a whole number from 1 to 65536\n");
  TempFile half("iface = \"lo\"\nports = [5000]\nsample = 2.5\n");
  e = run_netlatd({"--config", half.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + half.path + ":3:10: sample must be a whole number from 1 to 65536\n");
}

TEST_CASE("port range message names the port", "[cli]") {
  auto e = run_netlatd({"--iface", "lo", "--port", "70000"});
  CHECK(e.err == "netlatd: error: port 70000 is outside 1-65535\n");
}

TEST_CASE("unreadable config exits 66, bad config 78 with file:line:col", "[cli][config]") {
  auto e = run_netlatd({"--config", "/nonexistent/netlatd.toml"});
  CHECK(e.code == 66);
  CHECK(e.err == "netlatd: error: cannot read config file '/nonexistent/netlatd.toml'\n");

  TempFile bad("iface = \"lo\"\nports = [5000, 99999]\n");
  e = run_netlatd({"--config", bad.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + bad.path + ":2:16: port 99999 is outside 1-65535\n");

  TempFile syntax("iface = \"lo\"\nports = [5000\ninterval = 1\n");
  e = run_netlatd({"--config", syntax.path});
  CHECK(e.code == 78);
  CHECK(e.err.find(syntax.path + ":3:") != std::string::npos);
  CHECK(lines(e.err) == 1);

  TempFile unknown("iface = \"lo\"\nportz = [5000]\n");
  e = run_netlatd({"--config", unknown.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + unknown.path + ":2:9: unknown key 'portz'\n");
}

TEST_CASE("an error echoing a newline or an escape stays one line", "[cli][config]") {
  // toml++ quotes the character it stopped at: here the newline after 'f'.
  TempFile bad("ringbuf_mb = f\n");
  auto e = run_netlatd({"--config", bad.path});
  CHECK(e.code == 78);
  CHECK(e.err.rfind("netlatd: error: " + bad.path + ":1:15: ", 0) == 0);
  CHECK(e.err.find("\\n") != std::string::npos);
  CHECK(lines(e.err) == 1);

  e = run_netlatd({"--iface", "lo", "--port", "5000", "--interval", "1\n\x1b[2J"});
  CHECK(e.code == 64);
  CHECK(e.err.find("'1\\n\\x1b[2J'") != std::string::npos);
  CHECK(lines(e.err) == 1);
}

TEST_CASE("a config file with more than 16 ports is a bad file (78); duplicates count once", "[cli][config]") {
  std::string sixteen;
  for (int p = 5001; p <= 5016; ++p)
    sixteen += std::to_string(p) + ", ";
  TempFile over("iface = \"lo\"\nports = [" + sixteen + "5017]\n");
  auto e = run_netlatd({"--config", over.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + over.path + ":2:9: at most 16 ports can be watched at once\n");

  TempFile repeated("iface = \"lo\"\nports = [" + sixteen + "5016, 5001]\n");
  CHECK(parse({"--config", repeated.path.c_str()}).options.ports.size() == 16);
}

TEST_CASE("command line overrides the config file", "[config]") {
  TempFile cfg("iface = \"eth7\"\nports = [5000, 5001]\ninterval = 3.5\nformat = \"text\"\n"
               "outliers_over = \"2ms\"\n");
  auto cl = parse({"--config", cfg.path.c_str(), "--iface", "lo", "--interval", "250ms"});
  CHECK(cl.options.ifaces == std::vector<std::string>{"lo"});
  CHECK(cl.options.ports == std::vector<uint16_t>{5000, 5001});
  CHECK(cl.options.interval_s == 0.25);
  CHECK(cl.options.format == OutputFormat::Text);
  CHECK(cl.options.outliers_over_ns == 2000000u);
}

TEST_CASE("output_group: adm by default, the config file's, the command line's over it", "[config][output_group]") {
  CHECK(parse({"--iface", "lo", "--port", "5000"}).options.output_group == "adm");
  TempFile cfg("iface = \"lo\"\nports = [5000]\noutput_group = \"vector\"\n");
  CHECK(parse({"--config", cfg.path.c_str()}).options.output_group == "vector");
  CHECK(parse({"--config", cfg.path.c_str(), "--output-group", ""}).options.output_group.empty());
  TempFile bad("iface = \"lo\"\nports = [5000]\noutput_group = 4\n");
  CHECK(code_of({"--config", bad.path.c_str()}) == ExitCode::Config);
}

TEST_CASE("aggregate: set on the command line or in the config; a split the kernel cannot keep is a usage error",
          "[cli][config][aggregate]") {
  CHECK_FALSE(parse({"--iface", "lo", "--port", "5000"}).options.aggregate);
  CHECK(parse({"--iface", "lo", "--port", "5000", "--aggregate"}).options.aggregate);
  auto check = parse({"--iface", "lo", "--port", "5000", "--aggregate-check"}).options;
  CHECK(check.aggregate);
  CHECK(check.aggregate_check);
  TempFile cfg("iface = \"lo\"\nports = [5000]\naggregate = true\n");
  CHECK(parse({"--config", cfg.path.c_str()}).options.aggregate);
  CHECK_FALSE(parse({"--config", cfg.path.c_str()}).options.aggregate_check);
  TempFile bad("iface = \"lo\"\nports = [5000]\naggregate = \"yes\"\n");
  CHECK(code_of({"--config", bad.path.c_str()}) == ExitCode::Config);
  CHECK(code_of({"--iface", "lo", "--port", "5000", "--aggregate", "--by", "dport,cgroup"}) == ExitCode::Usage);
  CHECK(code_of({"--iface", "lo", "--iface", "eth0", "--port", "5000", "--aggregate"}) == ExitCode::Usage);
  CHECK(code_of({"--iface", "lo", "--port", "5000", "--aggregate", "--by", "dport,proto,family"}) == ExitCode::Ok);
  CHECK(code_of({"--iface", "lo", "--port", "5000", "--aggregate", "--by", "none"}) == ExitCode::Ok);
}

TEST_CASE("ports are de-duplicated and sorted; durations parse", "[cli]") {
  auto cl = parse({"--iface", "lo", "--port", "6000", "--port", "5000", "--port", "6000"});
  CHECK(cl.options.ports == std::vector<uint16_t>{5000, 6000});
  CHECK(parse_duration_ns("500us", 1) == 500000u);
  CHECK(parse_duration_ns("1.5s", 1) == 1500000000u);
  CHECK(parse_duration_ns("7", 1000) == 7000u);
  CHECK(code_of({"--iface", "lo", "--port", "1", "--interval", "-1"}) == ExitCode::Usage);
}

TEST_CASE("a --duration is a finite number of seconds the daemon can count", "[cli]") {
  CHECK(parse({"--iface", "lo", "--port", "1", "--duration", "86400"}).options.duration_s == 86400.0);
  CHECK(parse({"--iface", "lo", "--port", "1", "--duration", "1e9"}).options.duration_s == 1e9);
  for (const char *bad : {"inf", "1e300", "1.1e9", "nan", "0", "-1"}) {
    INFO(bad);
    CHECK(code_of({"--iface", "lo", "--port", "1", "--duration", bad}) == ExitCode::Usage);
  }
}

// The name must not start with "-": CTest passes it to Catch2 as the filter,
// which would take it for an option, print its usage and exit 0 unrun.
TEST_CASE("netlatd --help and --version exit 0 on stdout", "[cli]") {
  auto e = run_netlatd({"--help"});
  CHECK(e.code == 0);
  CHECK(e.out.find("--iface") != std::string::npos);
  CHECK(e.out.find("Exit status") != std::string::npos);
  // The page subcommand is found from the top-level help.
  CHECK(e.out.find("netlatd report") != std::string::npos);
  e = run_netlatd({"--version"});
  CHECK(e.code == 0);
  // Just the version: scripts and the package test read it.
  CHECK(e.out == std::string("netlatd ") + kVersion + "\n");
  CHECK(e.err.empty());
}

TEST_CASE("a bad metrics address exits 64 on the command line, 78 in the config", "[cli][metrics]") {
  for (const char *bad : {"localhost:9464", "127.0.0.1:99999", "127.0.0.1:", "::1:9464", "[nope]:9464"}) {
    INFO(bad);
    auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--metrics-listen", bad});
    CHECK(e.code == 64);
    CHECK(e.err.rfind("netlatd: error: --metrics-listen: bad listen address", 0) == 0);
    CHECK(lines(e.err) == 1);
  }
  TempFile cfg("iface = \"lo\"\nports = [5000]\nmetrics_listen = \"0.0.0.0:http\"\n");
  auto e = run_netlatd({"--config", cfg.path});
  CHECK(e.code == 78);
  CHECK(e.err.rfind("netlatd: error: " + cfg.path + ":3:18: metrics_listen: bad listen address", 0) == 0);
  CHECK(lines(e.err) == 1);
  // Loopback unless told otherwise.
  CHECK(parse({"--iface", "lo", "--port", "1", "--metrics-listen", ":9464"}).options.metrics_listen == ":9464");
  // An address alone takes netlatd's default port.
  CHECK(parse_listen_address("127.0.0.1").port == kDefaultMetricsPort);
  CHECK(parse_listen_address(":9464").host == "127.0.0.1");
}

TEST_CASE("reload_options re-reads the config file under the same command line", "[config]") {
  TempFile cfg("iface = \"lo\"\nports = [5000]\ninterval = 3\noutput = \"/tmp/a.jsonl\"\n");
  auto cl = parse({"--config", cfg.path.c_str(), "--output", "-"});
  CHECK(cl.options.interval_s == 3);
  {
    std::ofstream rewrite(cfg.path);
    rewrite << "iface = \"lo\"\nports = [5001]\noutput = \"/tmp/b.jsonl\"\nverbose = true\n";
  }
  Options next = reload_options(cl.options);
  CHECK(next.interval_s == 10);  // removed from the file: back to the default
  CHECK(next.ports == std::vector<uint16_t>{5001});
  CHECK(next.output == "-");  // the command line still wins
  CHECK(next.verbose);
  {
    std::ofstream rewrite(cfg.path);
    rewrite << "iface = \"lo\"\nports = [5000]\ninterval = = 2\n";
  }
  try {
    reload_options(cl.options);
    FAIL("a bad file must throw");
  } catch (const Error &e) {
    CHECK(e.code() == ExitCode::Config);
    CHECK(std::string(e.what()).rfind(cfg.path + ":3:", 0) == 0);
  }
}

TEST_CASE("not permitted exits 77; unknown interface 68", "[cli]") {
  if (geteuid() == 0) {
    // Drop to nobody with no capabilities, as an unprivileged user would run it.
    auto e = nltest::Process({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                              NETLATD_BINARY, "--iface", "lo", "--port", "5000"});
    REQUIRE(e.wait(10000));
    CHECK(e.exit().code == 77);
    CHECK(e.exit().err.rfind("netlatd: error: must run as root", 0) == 0);
    auto n = run_netlatd({"--iface", "nosuch0", "--port", "5000"});
    CHECK(n.code == 68);
    CHECK(n.err == "netlatd: error: no such interface 'nosuch0'\n");
  } else {
    auto e = run_netlatd({"--iface", "lo", "--port", "5000"});
    CHECK(e.code == 77);
  }
}
