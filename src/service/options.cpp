#include "netlatd/service/options.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <linux/types.h>
#include <toml++/toml.h>

#include "netlatd/abi.h"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/base/errors.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/version.hpp"

namespace netlatd {
namespace {

constexpr uint64_t kNs = 1;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kSec = 1000 * kMs;
// NETLATD_MAX_PORTS: the BPF programs' table of watched ports.
constexpr size_t kMaxPorts = 16;
constexpr double kMaxDurationS = 1e9;  // 31 years; 2^63 ns is 292
const std::string kTooManyPorts = "at most " + std::to_string(kMaxPorts) + " ports can be watched at once";
const std::string kTooManyCgroups =
    "at most " + std::to_string(NETLATD_MAX_CGROUP_FILTERS) + " cgroups can be given with --cgroup";

uint16_t checked_port(int64_t v, const std::string &where) {
  if (v < 1 || v > 65535)
    throw Error(ExitCode::Usage, where + "port " + std::to_string(v) + " is outside 1-65535");
  return static_cast<uint16_t>(v);
}

OutputFormat parse_format(const std::string &s, ExitCode code, const std::string &where) {
  if (s == "json")
    return OutputFormat::Json;
  if (s == "text")
    return OutputFormat::Text;
  throw Error(code, where + "format must be 'json' or 'text', not '" + s + "'");
}

std::string toml_where(const std::string &path, const toml::source_region &r) {
  return path + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column) + ": ";
}

template <typename T> void sort_unique(std::vector<T> &v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The kernel side keeps the lines as a bitmap over IRQ numbers.
constexpr int kMaxIrq = NETLATD_IRQ_BITMAP_WORDS * 64 - 1;

int checked_irq(const std::string &text, const std::string &where) {
  size_t used = 0;
  long v = -1;
  try {
    v = text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ? -1 : std::stol(text, &used);
  } catch (const std::exception &) {
  }
  if (v < 0 || used != text.size())
    throw Error(ExitCode::Usage, where + "'" + text + "' is not an IRQ number");
  if (v > kMaxIrq)
    throw Error(ExitCode::Usage,
                where + "IRQ " + text + " is above " + std::to_string(kMaxIrq) + ", the highest netlatd can trace");
  return static_cast<int>(v);
}

// `irq = [24, 25]` in the config file.
template <typename Fail> std::vector<int> irqs_of(const toml::node &n, Fail fail) {
  const toml::array *arr = n.as_array();
  if (!arr || arr->empty())
    throw fail(n, "irq must be a non-empty array of IRQ numbers, e.g. [24, 25]");
  std::vector<int> irqs;
  for (const toml::node &e : *arr) {
    if (!e.is_integer())
      throw fail(e, "irq must be an array of integers");
    try {
      irqs.push_back(checked_irq(std::to_string(*e.value<int64_t>()), "irq: "));
    } catch (const Error &err) {
      throw fail(e, err.what());
    }
  }
  sort_unique(irqs);
  return irqs;
}

}  // namespace

std::vector<int> parse_irq_list(const std::string &text) {
  const std::string usage = " (e.g. --irq 24,25 or --irq 24-31)";
  std::vector<int> irqs;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto dash = item.find('-');
    const int first = checked_irq(item.substr(0, dash), "--irq: ");
    const int last = dash == std::string::npos ? first : checked_irq(item.substr(dash + 1), "--irq: ");
    if (last < first)
      throw Error(ExitCode::Usage, "--irq: range '" + item + "' runs backwards");
    for (int irq = first; irq <= last; ++irq)
      irqs.push_back(irq);
  }
  if (irqs.empty() || text.back() == ',')
    throw Error(ExitCode::Usage, "--irq: '" + text + "' names no IRQ" + usage);
  sort_unique(irqs);
  return irqs;
}

uint64_t parse_duration_ns(const std::string &text, uint64_t bare_unit_ns) {
  const std::string bad = "invalid duration '" + text + "' (e.g. 500us, 2ms, 1.5s)";
  if (text.empty())
    throw Error(ExitCode::Usage, bad);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception &) {
    throw Error(ExitCode::Usage, bad);
  }
  if (!std::isfinite(value) || value < 0)
    throw Error(ExitCode::Usage, bad);
  const std::string unit = text.substr(used);
  uint64_t mult = 0;
  if (unit.empty())
    mult = bare_unit_ns;
  else if (unit == "ns")
    mult = kNs;
  else if (unit == "us" || unit == "µs")
    mult = kUs;
  else if (unit == "ms")
    mult = kMs;
  else if (unit == "s")
    mult = kSec;
  else if (unit == "m")
    mult = 60 * kSec;
  else
    throw Error(ExitCode::Usage, bad);
  const double ns = value * static_cast<double>(mult);
  if (ns > 1e18)
    throw Error(ExitCode::Usage, bad);
  return static_cast<uint64_t>(std::llround(ns));
}

// The kernel's own rule for a device name (dev_valid_name): 1 to 15 bytes,
// not "." or "..", no '/', ':' or white space. Anything else names no
// interface, and would be a path outside /sys/class/net.
namespace {

// What is wrong with a list of --iface values, "" when nothing is.
std::string iface_list_error(const std::vector<std::string> &ifaces) {
  for (const std::string &name : ifaces) {
    if (is_iface_set_word(name) && ifaces.size() > 1)
      return "'" + name + "' stands alone: it names every interface" + (name == "irq" ? " with IRQ lines" : "") +
             ", not one to add to others";
    if (!is_iface_set_word(name) && !valid_interface_name(name))
      return "'" + name + "' cannot be an interface name (1 to 15 bytes, no '/', ':' or spaces)";
  }
  if (ifaces.size() > kMaxIfaces)
    return "at most " + std::to_string(kMaxIfaces) + " interfaces can be traced at once";
  return "";
}

}  // namespace

void validate(const Options &o) {
  if (o.ifaces.empty() && !o.demo && !o.check)
    throw Error(ExitCode::Usage, "--iface is required (e.g. --iface eth0, --iface all)");
  if (const std::string why = iface_list_error(o.ifaces); !why.empty())
    throw Error(ExitCode::Usage, "--iface: " + why);
  if (!o.irqs.empty() && (o.ifaces.size() != 1 || is_iface_set_word(o.ifaces[0])))
    throw Error(ExitCode::Usage, "--irq names the IRQ lines of one interface: give exactly one --iface NAME with it");
  if (o.ports.empty() && !o.demo && !o.check)
    throw Error(ExitCode::Usage, "at least one --port is required (e.g. --port 5000)");
  if (o.ports.size() > kMaxPorts)
    throw Error(ExitCode::Usage, kTooManyPorts);
  if (o.cgroups.size() > NETLATD_MAX_CGROUP_FILTERS)
    throw Error(ExitCode::Usage, kTooManyCgroups);
  if (!(o.interval_s >= 0.1 && o.interval_s <= 86400))
    throw Error(ExitCode::Usage, "interval must be between 0.1 and 86400 seconds");
  if (o.outliers_max_per_sec == 0 && o.outliers_over_ns)
    throw Error(ExitCode::Usage, "--outliers-max-per-sec must be at least 1");
  if (o.ringbuf_mb < 1 || o.ringbuf_mb > 1024 || (o.ringbuf_mb & (o.ringbuf_mb - 1)))
    throw Error(ExitCode::Usage, "--ringbuf-mb must be a power of two between 1 and 1024");
  if (o.metrics_resolution != 1 && o.metrics_resolution != 2 && o.metrics_resolution != 4 &&
      o.metrics_resolution != 8)
    throw Error(ExitCode::Usage, "--metrics-resolution must be 1, 2, 4 or 8 (buckets per power of two)");
  // The daemon counts the run in int64 nanoseconds: inf or 1e300 would
  // overflow the conversion (undefined behaviour; UBSan's float-cast-overflow).
  if (o.duration_s && !(*o.duration_s > 0 && *o.duration_s <= kMaxDurationS))
    throw Error(ExitCode::Usage, "--duration must be more than 0 and at most 1e9 seconds");
}

void load_config_file(const std::string &path, Options &into, const std::vector<std::string> &set_on_cli) {
  std::ifstream in(path);
  if (!in)
    throw Error(ExitCode::NoInput, "cannot read config file '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();

  toml::table tbl;
  try {
    tbl = toml::parse(buf.str(), path);
  } catch (const toml::parse_error &e) {
    throw Error(ExitCode::Config, toml_where(path, e.source()) + std::string(e.description()));
  }
  auto cli = [&](const char *key) {
    return std::find(set_on_cli.begin(), set_on_cli.end(), key) != set_on_cli.end();
  };
  auto fail = [&](const toml::node &n, const std::string &msg) -> Error {
    return Error(ExitCode::Config, toml_where(path, n.source()) + msg);
  };
  static const std::set<std::string> known = {"iface",          "ports",          "interval",
                                              "output",         "format",         "outliers_over",
                                              "outliers_max_per_sec", "metrics_listen", "verbose",
                                              "ringbuf_mb", "irq", "output_group", "by", "metrics_resolution",
                                              "netns", "cgroups", "aggregate", "aggregate_check"};
  for (auto &&[k, v] : tbl) {
    if (!known.count(std::string(k.str())))
      throw fail(v, "unknown key '" + std::string(k.str()) + "'");
  }
  auto string_of = [&](const char *key) -> std::optional<std::string> {
    const toml::node *n = tbl.get(key);
    if (!n)
      return std::nullopt;
    if (!n->is_string())
      throw fail(*n, std::string(key) + " must be a string");
    return n->value<std::string>();
  };
  auto number_of = [&](const char *key) -> std::optional<double> {
    const toml::node *n = tbl.get(key);
    if (!n)
      return std::nullopt;
    if (!n->is_number())
      throw fail(*n, std::string(key) + " must be a number");
    return n->value<double>();
  };

  if (const toml::node *n = tbl.get("iface"); n && !cli("iface")) {
    // "eth0", or ["eth0", "eth1"], or "all" / "irq".
    std::vector<std::string> names;
    if (n->is_string()) {
      names.push_back(*n->value<std::string>());
    } else if (const toml::array *arr = n->as_array(); arr && !arr->empty()) {
      for (const toml::node &e : *arr) {
        if (!e.is_string())
          throw fail(e, "iface must be a string or an array of strings, e.g. [\"eth0\", \"eth1\"]");
        names.push_back(*e.value<std::string>());
      }
    } else {
      throw fail(*n, "iface must be a string or a non-empty array of strings, e.g. [\"eth0\", \"eth1\"]");
    }
    if (const std::string why = iface_list_error(names); !why.empty())
      throw fail(*n, "iface: " + why);
    into.ifaces = std::move(names);
  }
  if (const toml::node *n = tbl.get("ports"); n && !cli("ports")) {
    const toml::array *arr = n->as_array();
    if (!arr)
      throw fail(*n, "ports must be an array of integers, e.g. [5000, 5001]");
    into.ports.clear();
    for (const toml::node &e : *arr) {
      if (!e.is_integer())
        throw fail(e, "ports must be an array of integers");
      try {
        into.ports.push_back(checked_port(*e.value<int64_t>(), ""));
      } catch (const Error &err) {
        throw fail(e, err.what());
      }
    }
    // Counted as the command line counts them, after duplicates go; a file
    // with too many is a bad file (78, file:line:col), not a usage error.
    std::set<uint16_t> distinct(into.ports.begin(), into.ports.end());
    if (distinct.size() > kMaxPorts)
      throw fail(*n, kTooManyPorts);
  }
  if (auto s = string_of("netns"); s && !cli("netns"))
    into.netns = *s;
  if (const toml::node *n = tbl.get("irq"); n && !cli("irq")) {
    into.irqs = irqs_of(*n, fail);
    // One interface's lines, so one interface named (here or on the command
    // line): the file's mistake, reported at its key (78), not as a usage
    // error of a command line that gave no --irq. --demo names lo later.
    if (!into.irqs.empty() && !into.demo && (into.ifaces.size() != 1 || is_iface_set_word(into.ifaces[0])))
      throw fail(*n, "irq names the IRQ lines of one interface: give exactly one iface name with it");
  }
  if (auto d = number_of("interval"); d && !cli("interval")) {
    if (!(*d >= 0.1 && *d <= 86400))
      throw fail(*tbl.get("interval"), "interval must be between 0.1 and 86400 seconds");
    into.interval_s = *d;
  }
  if (auto s = string_of("output"); s && !cli("output"))
    into.output = *s;
  if (auto s = string_of("output_group"); s && !cli("output-group"))
    into.output_group = *s;
  if (auto s = string_of("format"); s && !cli("format")) {
    try {
      into.format = parse_format(*s, ExitCode::Config, "");
    } catch (const Error &e) {
      throw fail(*tbl.get("format"), e.what());
    }
  }
  if (auto s = string_of("outliers_over"); s && !cli("outliers-over")) {
    try {
      into.outliers_over_ns = parse_duration_ns(*s, kUs);
    } catch (const Error &e) {
      throw fail(*tbl.get("outliers_over"), e.what());
    }
  }
  if (auto d = number_of("outliers_max_per_sec"); d && !cli("outliers-max-per-sec")) {
    if (*d < 1 || *d > 1e6)
      throw fail(*tbl.get("outliers_max_per_sec"), "outliers_max_per_sec must be 1-1000000");
    into.outliers_max_per_sec = static_cast<uint32_t>(*d);
  }
  if (auto s = string_of("metrics_listen"); s && !cli("metrics-listen")) {
    try {
      if (!s->empty())
        parse_listen_address(*s);
    } catch (const std::invalid_argument &e) {
      throw fail(*tbl.get("metrics_listen"), std::string("metrics_listen: ") + e.what());
    }
    into.metrics_listen = *s;
  }
  if (const toml::node *n = tbl.get("by"); n && !cli("by")) {
    const toml::array *arr = n->as_array();
    if (!arr)
      throw fail(*n, "by must be an array of keys, e.g. [\"dport\", \"proto\"] ([] for none)");
    std::string list;
    for (const toml::node &e : *arr) {
      if (!e.is_string())
        throw fail(e, "by must be an array of strings");
      list += (list.empty() ? "" : ",") + *e.value<std::string>();
    }
    try {
      into.by = parse_breakdown(list.empty() ? "none" : list);
    } catch (const std::invalid_argument &e) {
      throw fail(*n, std::string("by: ") + e.what());
    }
  }
  if (const toml::node *n = tbl.get("cgroups"); n && !cli("cgroups")) {
    const toml::array *arr = n->as_array();
    if (!arr)
      throw fail(*n, "cgroups must be an array of cgroup paths, e.g. [\"/system.slice/nginx.service\"]");
    into.cgroups.clear();
    for (const toml::node &e : *arr) {
      if (!e.is_string())
        throw fail(e, "cgroups must be an array of strings");
      try {
        into.cgroups.push_back(normalize_cgroup_arg(*e.value<std::string>(), cgroup2_root()));
      } catch (const std::invalid_argument &err) {
        throw fail(e, std::string("cgroups: ") + err.what());
      }
    }
    sort_unique(into.cgroups);
    if (into.cgroups.size() > NETLATD_MAX_CGROUP_FILTERS)
      throw fail(*n, kTooManyCgroups);
  }
  if (auto d = number_of("metrics_resolution"); d && !cli("metrics-resolution")) {
    if (*d != 1 && *d != 2 && *d != 4 && *d != 8)
      throw fail(*tbl.get("metrics_resolution"), "metrics_resolution must be 1, 2, 4 or 8 (buckets per power of two)");
    into.metrics_resolution = static_cast<unsigned>(*d);
  }
  if (auto d = number_of("ringbuf_mb"); d && !cli("ringbuf-mb")) {
    const auto mb = *d >= 1 && *d <= 1024 ? static_cast<uint32_t>(*d) : 0u;
    if (mb == 0 || *d != static_cast<double>(mb) || (mb & (mb - 1)))
      throw fail(*tbl.get("ringbuf_mb"), "ringbuf_mb must be a power of two between 1 and 1024");
    into.ringbuf_mb = mb;
  }
  // Booleans: each key and the flag that overrides it.
  const struct {
    const char *key, *flag;
    bool Options::*into;
  } switches[] = {{"verbose", "verbose", &Options::verbose},
                  {"aggregate", "aggregate", &Options::aggregate},
                  {"aggregate_check", "aggregate-check", &Options::aggregate_check}};
  for (const auto &sw : switches) {
    const toml::node *n = tbl.get(sw.key);
    if (!n || cli(sw.flag))
      continue;
    if (!n->is_boolean())
      throw fail(*n, std::string(sw.key) + " must be true or false");
    into.*sw.into = *n->value<bool>();
  }
}

CommandLine parse_command_line(int argc, const char *const *argv) {
  CommandLine result;
  Options &o = result.options;
  CLI::App app{"netlatd: where the time goes between a packet reaching the NIC and recvfrom() returning it.\n"
               "Traces every matching packet through the kernel's receive path with BPF and writes\n"
               "per-stage latency histograms as JSON lines, one per interval.",
               "netlatd"};
  o.command_line.assign(argv, argv + argc);
  app.set_version_flag("--version", std::string("netlatd ") + kVersion);
  app.get_formatter()->column_width(34);

  std::vector<int64_t> ports;
  std::vector<std::string> irq_lists, cgroups;
  std::string interval = "10", format = "json", outliers, by;
  app.add_option("-i,--iface", o.ifaces,
                 "Interface to trace (eth0, bond0, eth0.100); repeat for several; all; irq (those with IRQ lines)");
  app.add_option("--netns", o.netns,
                 "Network namespace the interfaces are in: NAME (/run/netns/NAME), PID or a path");
  app.add_option("-p,--port", ports, "Destination port to trace; repeat for several (UDP and TCP)");
  app.add_option("--interval", interval, "Seconds per report line (default 10; 500ms, 2s also work)");
  app.add_option("-o,--output", o.output, "Where JSON lines go: - for stdout (default) or a file (appended)");
  app.add_option("--output-group", o.output_group,
                 "Group that may read the output file and its directory (default adm; \"\" = as created)");
  app.add_option("--format", format, "json (default, for log collectors) or text (for a person)");
  app.add_option("-c,--config", o.config, "TOML config file; command-line flags override it");
  app.add_option("--outliers-over", outliers,
                 "Also write the whole timeline of each packet slower than this (e.g. 500us)");
  app.add_option("--outliers-max-per-sec", o.outliers_max_per_sec, "Rate limit of outlier lines (default 10)");
  app.add_option("--metrics-listen", o.metrics_listen,
                 "Serve Prometheus metrics on ADDR:PORT, or ADDR for port 9659 (e.g. 127.0.0.1)");
  app.add_option("--metrics-resolution", o.metrics_resolution,
                 "Prometheus buckets per power of two, 64 ns to 10.7 s: 1, 2, 4 (default) or 8");
  app.add_option("--by", by,
                 "Split the per-stage histograms by dport,proto (default), family, cgroup; or none");
  app.add_option("--cgroup", cgroups,
                 "Only packets read by tasks in this cgroup's subtree (e.g. /system.slice/nginx.service); repeat "
                 "for several");
  app.add_option("--ringbuf-mb", o.ringbuf_mb, "Size of the kernel-to-daemon ring buffer in MiB (default 2)");
  app.add_option("--irq", irq_lists,
                 "The interface's receive IRQ lines (e.g. 24,25 or 24-31), instead of finding them");
  app.add_flag("--aggregate", o.aggregate,
               "Keep the per-stage histograms in the kernel: a record only for outliers and what it cannot add");
  app.add_flag("--aggregate-check", o.aggregate_check,
               "--aggregate, and every record written too: checks the kernel's histograms against them at exit");
  app.add_option("--duration", o.duration_s, "Stop after this many seconds (default: run until signalled)");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging, including libbpf's own messages and the verifier's walk per program");
  app.add_flag("--check", o.check, "Probe the kernel, print the hook chosen per stage, exit 0 if netlatd can run");
  app.add_flag("--demo", o.demo, "Trace loopback with traffic netlatd generates itself (defaults: lo, port 47000)");
  app.footer("Exit status: 0 ok, 64 usage, 66 config unreadable, 68 no such interface or netns, 69 kernel lacks a\n"
             "feature, 70 internal error or metrics port in use, 73 output not writable, 77 not permitted,\n"
             "78 bad config. SIGHUP reopens the output and reloads --config.\n"
             "See netlatd(8) and docs/OUTPUT.md.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    result.exit_now = 0;
    result.exit_text = app.help();
    return result;
  } catch (const CLI::CallForVersion &) {
    result.exit_now = 0;
    result.exit_text = std::string("netlatd ") + kVersion + "\n";
    return result;
  } catch (const CLI::ParseError &e) {
    std::string msg = e.what();
    if (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    throw Error(ExitCode::Usage, msg + " (see --help)");
  }

  std::vector<std::string> set_on_cli;
  for (const char *name : {"iface", "port", "interval", "output", "format", "outliers-over",
                           "outliers-max-per-sec", "metrics-listen", "ringbuf-mb", "verbose", "irq", "output-group", "by",
                           "metrics-resolution", "netns", "cgroup", "aggregate", "aggregate-check"}) {
    if (app.count(std::string("--") + name) > 0)
      set_on_cli.emplace_back(name == std::string("port")     ? "ports"
                              : name == std::string("cgroup") ? "cgroups"
                                                              : name);
  }
  for (int64_t p : ports)
    o.ports.push_back(checked_port(p, ""));
  for (const std::string &list : irq_lists) {
    auto more = parse_irq_list(list);
    o.irqs.insert(o.irqs.end(), more.begin(), more.end());
  }
  sort_unique(o.irqs);
  o.interval_s = static_cast<double>(parse_duration_ns(interval, kSec)) / 1e9;
  o.format = parse_format(format, ExitCode::Usage, "");
  if (!outliers.empty())
    o.outliers_over_ns = parse_duration_ns(outliers, kUs);
  if (!o.metrics_listen.empty()) {
    try {
      parse_listen_address(o.metrics_listen);
    } catch (const std::invalid_argument &e) {
      throw Error(ExitCode::Usage, std::string("--metrics-listen: ") + e.what());
    }
  }

  for (const std::string &c : cgroups) {
    try {
      o.cgroups.push_back(normalize_cgroup_arg(c, cgroup2_root()));
    } catch (const std::invalid_argument &e) {
      throw Error(ExitCode::Usage, std::string("--cgroup: ") + e.what());
    }
  }
  sort_unique(o.cgroups);
  if (!by.empty()) {
    try {
      o.by = parse_breakdown(by);
    } catch (const std::invalid_argument &e) {
      throw Error(ExitCode::Usage, std::string("--by: ") + e.what());
    }
  }
  if (!o.config.empty())
    load_config_file(o.config, o, set_on_cli);

  if (o.demo) {
    if (o.ifaces.empty())
      o.ifaces = {"lo"};
    if (o.ports.empty())
      o.ports.push_back(47000);
    if (std::find(set_on_cli.begin(), set_on_cli.end(), "interval") == set_on_cli.end() && o.config.empty())
      o.interval_s = 2;
    if (std::find(set_on_cli.begin(), set_on_cli.end(), "format") == set_on_cli.end() && o.config.empty())
      o.format = OutputFormat::Text;
  }
  sort_unique(o.ports);
  // Repeated names trace one interface; the order given is the order shown.
  for (size_t i = 0; i < o.ifaces.size(); ++i)
    for (size_t j = o.ifaces.size() - 1; j > i; --j)
      if (o.ifaces[j] == o.ifaces[i])
        o.ifaces.erase(o.ifaces.begin() + static_cast<std::ptrdiff_t>(j));
  validate(o);
  // Several interfaces: their figures apart, whatever --by says.
  if (traces_several_ifaces(o.ifaces))
    o.by.iface = true;
  if (o.aggregate_check)
    o.aggregate = true;
  if (o.aggregate && o.by.cgroup)
    throw Error(ExitCode::Usage,
                "--aggregate: the kernel side cannot split its histograms by cgroup; drop cgroup from --by, or --aggregate");
  if (o.aggregate && o.by.iface)
    throw Error(ExitCode::Usage, "--aggregate: the kernel side cannot split its histograms by interface (several are "
                                 "always split); trace one interface, or drop --aggregate");
  return result;
}

Options reload_options(const Options &running) {
  if (running.command_line.empty())
    throw Error(ExitCode::Software, "cannot reload: the command line was not kept");
  std::vector<const char *> argv;
  for (const std::string &a : running.command_line)
    argv.push_back(a.c_str());
  CommandLine cl = parse_command_line(static_cast<int>(argv.size()), argv.data());
  if (cl.exit_now)  // --help/--version never start a daemon, so never reload one
    throw Error(ExitCode::Software, "cannot reload: the command line does not run the daemon");
  return cl.options;
}

}  // namespace netlatd
