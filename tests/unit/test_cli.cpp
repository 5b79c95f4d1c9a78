// Bad input: one clear line on stderr and a documented exit code, checked on
// the real binary. Also the config file (TOML) and its precedence.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/base/errors.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/service/options.hpp"
#include "netlatd/version.hpp"
#include "process.hpp"

using namespace netlatd;
using nltest::run_netlatd;

namespace {

int lines(const std::string &s) {
  int n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string &content) {
    char tmpl[] = "/tmp/netlatd-cfg-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    FILE *f = fdopen(fd, "w");
    std::fputs(content.c_str(), f);
    std::fclose(f);
  }
  ~TempFile() { unlink(path.c_str()); }
};

CommandLine parse(std::initializer_list<const char *> args) {
  std::vector<const char *> argv{"netlatd"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

ExitCode code_of(std::initializer_list<const char *> args) {
  try {
    parse(args);
  } catch (const Error &e) {
    return e.code();
  }
  return ExitCode::Ok;
}

}  // namespace

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

TEST_CASE("bad --irq exits 64 with one line; irq in the config file", "[cli][config][irq]") {
  for (const char *bad : {"abc", "24,", ",24", "24,,25", "-3", "30-24", "24-", "8192", "99999999999999999999", "",
                          " 24", "0x18"}) {
    INFO(bad);
    auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--irq", bad});
    CHECK(e.code == 64);
    CHECK(e.err.rfind("netlatd: error: --irq: ", 0) == 0);
    CHECK(lines(e.err) == 1);
  }
  auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--irq", "9000"});
  CHECK(e.err == "netlatd: error: --irq: IRQ 9000 is above 8191, the highest netlatd can trace\n");

  auto cl = parse({"--iface", "lo", "--port", "1", "--irq", "26,24-25", "--irq", "40"});
  CHECK(cl.options.irqs == std::vector<int>{24, 25, 26, 40});
  TempFile cfg("iface = \"eth0\"\nports = [5000]\nirq = [25, 24]\n");
  CHECK(parse({"--config", cfg.path.c_str()}).options.irqs == std::vector<int>{24, 25});
  CHECK(parse({"--config", cfg.path.c_str(), "--irq", "30"}).options.irqs == std::vector<int>{30});

  TempFile bad("iface = \"eth0\"\nports = [5000]\nirq = [24, 9000]\n");
  e = run_netlatd({"--config", bad.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + bad.path + ":3:12: irq: IRQ 9000 is above 8191, the highest netlatd can trace\n");
  // IRQ lines in the file without one interface to own them: the file's
  // error, at its key (a fuzz finding: it was exit 64 with no position).
  TempFile no_iface("ports = [5000]\nirq = [24, 25]\n");
  e = run_netlatd({"--check", "--config", no_iface.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + no_iface.path +
                     ":2:7: irq names the IRQ lines of one interface: give exactly one iface name with it\n");
  TempFile all_ifaces("iface = \"all\"\nports = [5000]\nirq = [24]\n");
  CHECK(run_netlatd({"--config", all_ifaces.path}).code == 78);
  // The command line's one interface owns the file's lines.
  CHECK(parse({"--config", no_iface.path.c_str(), "--iface", "eth1"}).options.irqs == std::vector<int>{24, 25});
  TempFile not_list("iface = \"eth0\"\nports = [5000]\nirq = \"24\"\n");
  e = run_netlatd({"--config", not_list.path});
  CHECK(e.code == 78);
  CHECK(lines(e.err) == 1);
}

TEST_CASE("options by and metrics resolution: command line, config file, errors", "[cli][config][breakdown]") {
  CHECK(parse({"--iface", "lo", "--port", "1"}).options.by == BreakdownSpec{});
  CHECK(parse({"--iface", "lo", "--port", "1"}).options.metrics_resolution == 4);
  auto cl = parse({"--iface", "lo", "--port", "1", "--by", "dport,family,cgroup", "--metrics-resolution", "8"});
  CHECK(cl.options.by == BreakdownSpec{true, false, true, true});
  CHECK(cl.options.metrics_resolution == 8);
  CHECK(parse({"--iface", "lo", "--port", "1", "--by", "none"}).options.by == BreakdownSpec{false, false, false, false});

  auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--by", "dport,port"});
  CHECK(e.code == 64);
  CHECK(e.err ==
        "netlatd: error: --by: unknown key 'port' (known: dport, proto, family, cgroup, iface; or none)\n");
  e = run_netlatd({"--iface", "lo", "--port", "5000", "--metrics-resolution", "3"});
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: --metrics-resolution must be 1, 2, 4 or 8 (buckets per power of two)\n");

  TempFile good("iface = \"lo\"\nports = [5000]\nby = [\"proto\", \"family\"]\nmetrics_resolution = 2\n");
  cl = parse({"--config", good.path.c_str()});
  CHECK(cl.options.by == BreakdownSpec{false, true, true, false});
  CHECK(cl.options.metrics_resolution == 2);
  // The command line wins over the file.
  CHECK(parse({"--config", good.path.c_str(), "--by", "dport"}).options.by == BreakdownSpec{true, false, false, false});
  TempFile none("iface = \"lo\"\nports = [5000]\nby = []\n");
  CHECK(parse({"--config", none.path.c_str()}).options.by == BreakdownSpec{false, false, false, false});

  TempFile bad("iface = \"lo\"\nports = [5000]\nby = [\"dport\", \"host\"]\n");
  e = run_netlatd({"--config", bad.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + bad.path +
                     ":3:6: by: unknown key 'host' (known: dport, proto, family, cgroup, iface; or none)\n");
  TempFile res("iface = \"lo\"\nports = [5000]\nmetrics_resolution = 16\n");
  e = run_netlatd({"--config", res.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + res.path +
                     ":3:22: metrics_resolution must be 1, 2, 4 or 8 (buckets per power of two)\n");
}

TEST_CASE("an interface name the kernel could not have exits 64 on the command line, 78 in the config", "[cli][config]") {
  for (const char *bad : {"../../etc", "eth0:1", "a b", "sixteen-bytes-xx", ".", ".."}) {
    INFO(bad);
    auto e = run_netlatd({"--iface", bad, "--port", "5000"});
    CHECK(e.code == 64);
    CHECK(e.err == std::string("netlatd: error: --iface: '") + bad +
                       "' cannot be an interface name (1 to 15 bytes, no '/', ':' or spaces)\n");
  }
  CHECK(netlatd::valid_interface_name("fifteen-bytes-x"));
  CHECK(netlatd::valid_interface_name("eth0.100"));
  CHECK(netlatd::valid_interface_name("bond0"));
  TempFile cfg("ports = [5000]\niface = \"lo/../eth0\"\n");
  auto e = run_netlatd({"--config", cfg.path});
  CHECK(e.code == 78);
  CHECK(e.err.rfind("netlatd: error: " + cfg.path + ":2:9: iface: 'lo/../eth0' cannot be an interface name", 0) == 0);
  CHECK(lines(e.err) == 1);
}

TEST_CASE("several interfaces: --iface repeated, an array or a string in the config, all and irq", "[cli][config]") {
  using V = std::vector<std::string>;
  auto one = parse({"--iface", "eth0", "--port", "5000"}).options;
  CHECK(one.ifaces == V{"eth0"});
  CHECK(!one.by.iface);  // one interface: the output as before
  auto two = parse({"--iface", "eth1", "-i", "eth0", "--iface", "eth1", "--port", "5000"}).options;
  CHECK(two.ifaces == V{"eth1", "eth0"});  // the order given, repeats dropped
  CHECK(two.by.iface);                     // several: split by interface without asking
  CHECK(netlatd::breakdown_keys(two.by) == std::vector<std::string_view>{"iface", "dport", "proto"});
  for (const char *word : {"all", "irq"}) {
    auto set = parse({"--iface", word, "--port", "5000"}).options;
    CHECK(set.ifaces == V{word});
    CHECK(set.by.iface);
  }
  // --by iface splits one interface's figures too (its name as the key).
  CHECK(parse({"--iface", "eth0", "--port", "5000", "--by", "iface,dport"}).options.by.iface);

  TempFile arr("ports = [5000]\niface = [\"eth0\", \"bond0\", \"eth0.100\"]\n");
  CHECK(parse({"--config", arr.path.c_str()}).options.ifaces == V{"eth0", "bond0", "eth0.100"});
  TempFile str("ports = [5000]\niface = \"irq\"\n");
  CHECK(parse({"--config", str.path.c_str()}).options.ifaces == V{"irq"});
  // The command line wins over the file, as for every key.
  CHECK(parse({"--config", arr.path.c_str(), "--iface", "lo"}).options.ifaces == V{"lo"});

  // all and irq stand alone; --irq belongs to one named interface.
  auto e = run_netlatd({"--iface", "all", "--iface", "eth0", "--port", "5000"});
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: --iface: 'all' stands alone: it names every interface, not one to add to others\n");
  e = run_netlatd({"--iface", "eth0", "--iface", "eth1", "--irq", "24", "--port", "5000"});
  CHECK(e.code == 64);
  CHECK(e.err ==
        "netlatd: error: --irq names the IRQ lines of one interface: give exactly one --iface NAME with it\n");
  std::vector<std::string> many{"--port", "5000"};
  for (int i = 0; i < 65; ++i)
    many.insert(many.end(), {"--iface", "veth" + std::to_string(i)});
  e = run_netlatd(many);
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: --iface: at most 64 interfaces can be traced at once\n");

  TempFile bad_type("ports = [5000]\niface = 3\n");
  e = run_netlatd({"--config", bad_type.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + bad_type.path +
                     ":2:9: iface must be a string or a non-empty array of strings, e.g. [\"eth0\", \"eth1\"]\n");
  TempFile mixed("ports = [5000]\niface = [\"irq\", \"eth0\"]\n");
  e = run_netlatd({"--config", mixed.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + mixed.path +
                     ":2:9: iface: 'irq' stands alone: it names every interface with IRQ lines, not one to add to "
                     "others\n");
}

TEST_CASE("the netns option: a name, a pid or a path; with irq too", "[cli][netns]") {
  CHECK(netlatd::netns_path("blue") == "/run/netns/blue");
  CHECK(netlatd::netns_path("1234") == "/proc/1234/ns/net");
  CHECK(netlatd::netns_path("/var/run/docker/netns/abc") == "/var/run/docker/netns/abc");
  CHECK(netlatd::netns_path("./ns") == "./ns");
  CHECK(parse({"--netns", "blue", "--iface", "eth0", "--port", "5000"}).options.netns == "blue");
  TempFile cfg("ports = [5000]\niface = \"eth0\"\nnetns = \"blue\"\n");
  CHECK(parse({"--config", cfg.path.c_str()}).options.netns == "blue");
  // Another namespace's IRQ lines are found through the PCI devices.
  CHECK(parse({"--netns", "blue", "--iface", "irq", "--port", "5000"}).options.ifaces == std::vector<std::string>{"irq"});
}

TEST_CASE("option cgroup: repeatable, normalized, in the config file; errors exit 64 or 78", "[cli][config][cgroup]") {
  CHECK(parse({"--iface", "lo", "--port", "1"}).options.cgroups.empty());
  auto cl = parse({"--iface", "lo", "--port", "1", "--cgroup", "/system.slice/b.service/", "--cgroup",
                   "/system.slice//a.service", "--cgroup", "/system.slice/b.service"});
  CHECK(cl.options.cgroups == std::vector<std::string>{"/system.slice/a.service", "/system.slice/b.service"});

  auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--cgroup", "system.slice"});
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: --cgroup: 'system.slice' is not absolute; give a cgroup path such as "
                 "/system.slice/nginx.service\n");
  e = run_netlatd({"--iface", "lo", "--port", "5000", "--cgroup", "/a/../b"});
  CHECK(e.code == 64);
  CHECK(lines(e.err) == 1);
  std::vector<std::string> many{"--iface", "lo", "--port", "5000"};
  for (int i = 0; i < 17; i++) {
    many.push_back("--cgroup");
    many.push_back("/c" + std::to_string(i));
  }
  e = run_netlatd(many);
  CHECK(e.code == 64);
  CHECK(e.err == "netlatd: error: at most 16 cgroups can be given with --cgroup\n");

  TempFile good("iface = \"lo\"\nports = [5000]\ncgroups = [\"/kubepods.slice\", \"/system.slice/x.service\"]\n");
  CHECK(parse({"--config", good.path.c_str()}).options.cgroups ==
        std::vector<std::string>{"/kubepods.slice", "/system.slice/x.service"});
  // The command line wins over the file.
  CHECK(parse({"--config", good.path.c_str(), "--cgroup", "/y.slice"}).options.cgroups ==
        std::vector<std::string>{"/y.slice"});
  TempFile bad("iface = \"lo\"\nports = [5000]\ncgroups = [\"/ok\", \"relative\"]\n");
  e = run_netlatd({"--config", bad.path});
  CHECK(e.code == 78);
  CHECK(e.err == "netlatd: error: " + bad.path +
                     ":3:19: cgroups: 'relative' is not absolute; give a cgroup path such as "
                     "/system.slice/nginx.service\n");
  TempFile notarray("iface = \"lo\"\nports = [5000]\ncgroups = \"/x\"\n");
  e = run_netlatd({"--config", notarray.path});
  CHECK(e.code == 78);
  CHECK(lines(e.err) == 1);
}
