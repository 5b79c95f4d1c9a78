// What is traced and how it is split: --irq, --by and --metrics-resolution,
// interface names and several interfaces, --netns and --cgroup, on the
// command line and in the config file, with one clear line on stderr and a
// documented exit code for bad input, checked on the real binary.
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "cli_helpers.hpp"
#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/service/options.hpp"
#include "process.hpp"

using namespace netlatd;
using nltest::lines;
using nltest::parse;
using nltest::run_netlatd;
using nltest::TempFile;

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
