#include "netlatd/service/options.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
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

// ---------------------------------------------------------------- the option table
//
// One entry per option: its flag and help (CLI11), its config file key
// (TOML), how each form's value is read and checked, what validate() asks of
// the result, and whether a reload may change it (reload.cpp). The order is
// --help's.

namespace {

// What the command line gives before it becomes Options (parsed after CLI11).
struct CliValues {
  std::vector<int64_t> ports;
  std::vector<std::string> irq_lists, cgroups;
  std::string interval = "10", format = "json", outliers, by;
};

// A config file being read: where its errors point.
struct TomlFile {
  const std::string &path;
  Options &into;
  Error fail(const toml::node &n, const std::string &msg) const {
    return Error(ExitCode::Config, toml_where(path, n.source()) + msg);
  }
  std::string string(const toml::node &n, const char *key) const {
    if (!n.is_string())
      throw fail(n, std::string(key) + " must be a string");
    return *n.value<std::string>();
  }
  double number(const toml::node &n, const char *key) const {
    if (!n.is_number())
      throw fail(n, std::string(key) + " must be a number");
    return *n.value<double>();
  }
  bool boolean(const toml::node &n, const char *key) const {
    if (!n.is_boolean())
      throw fail(n, std::string(key) + " must be true or false");
    return *n.value<bool>();
  }
  // A value's own check, its message at the value's place in the file.
  template <typename F> auto at(const toml::node &n, const std::string &prefix, F &&f) const {
    try {
      return f();
    } catch (const Error &e) {
      throw fail(n, prefix + e.what());
    } catch (const std::invalid_argument &e) {
      throw fail(n, prefix + e.what());
    }
  }
};

struct OptionSpec {
  OptionInfo info;
  // Registers the flag; the value lands in Options or in CliValues.
  CLI::Option *(*bind)(CLI::App &app, const OptionInfo &info, Options &o, CliValues &v);
  // What the command line gave, into Options (Error(Usage) when bad). Optional.
  void (*from_cli)(Options &o, const CliValues &v) = nullptr;
  // The config file's key, into Options. Set exactly when info.key is.
  void (*from_toml)(const toml::node &n, const TomlFile &f) = nullptr;
  // What validate() asks of the final value (Error(Usage) when not met). Optional.
  void (*check)(const Options &o) = nullptr;
};

template <auto Member> CLI::Option *bind_value(CLI::App &app, const OptionInfo &i, Options &o, CliValues &) {
  return app.add_option(i.flags, o.*Member, i.help);
}
template <auto Member> CLI::Option *bind_scratch(CLI::App &app, const OptionInfo &i, Options &, CliValues &v) {
  return app.add_option(i.flags, v.*Member, i.help);
}
template <bool Options::*Member> CLI::Option *bind_flag(CLI::App &app, const OptionInfo &i, Options &o, CliValues &) {
  return app.add_flag(i.flags, o.*Member, i.help);
}

// A restart-only option whose value differs: the running value back into
// `next`, and the line that says so.
template <auto Member>
std::optional<std::string> keep_if_changed(const Options &running, Options &next, const std::string &line) {
  if (next.*Member == running.*Member)
    return std::nullopt;
  next.*Member = running.*Member;
  return line;
}

const char *aggregate_mode(const Options &o) { return o.aggregate_check ? "check" : o.aggregate ? "on" : "off"; }

void check_iface(const Options &o) {
  if (o.ifaces.empty() && !o.demo && !o.check)
    throw Error(ExitCode::Usage, "--iface is required (e.g. --iface eth0, --iface all)");
  if (const std::string why = iface_list_error(o.ifaces); !why.empty())
    throw Error(ExitCode::Usage, "--iface: " + why);
}

void toml_iface(const toml::node &n, const TomlFile &f) {
  // "eth0", or ["eth0", "eth1"], or "all" / "irq".
  std::vector<std::string> names;
  if (n.is_string()) {
    names.push_back(*n.value<std::string>());
  } else if (const toml::array *arr = n.as_array(); arr && !arr->empty()) {
    for (const toml::node &e : *arr) {
      if (!e.is_string())
        throw f.fail(e, "iface must be a string or an array of strings, e.g. [\"eth0\", \"eth1\"]");
      names.push_back(*e.value<std::string>());
    }
  } else {
    throw f.fail(n, "iface must be a string or a non-empty array of strings, e.g. [\"eth0\", \"eth1\"]");
  }
  if (const std::string why = iface_list_error(names); !why.empty())
    throw f.fail(n, "iface: " + why);
  f.into.ifaces = std::move(names);
}

void toml_ports(const toml::node &n, const TomlFile &f) {
  const toml::array *arr = n.as_array();
  if (!arr)
    throw f.fail(n, "ports must be an array of integers, e.g. [5000, 5001]");
  f.into.ports.clear();
  for (const toml::node &e : *arr) {
    if (!e.is_integer())
      throw f.fail(e, "ports must be an array of integers");
    f.into.ports.push_back(f.at(e, "", [&] { return checked_port(*e.value<int64_t>(), ""); }));
  }
  // Counted as the command line counts them, after duplicates go; a file
  // with too many is a bad file (78, file:line:col), not a usage error.
  std::set<uint16_t> distinct(f.into.ports.begin(), f.into.ports.end());
  if (distinct.size() > kMaxPorts)
    throw f.fail(n, kTooManyPorts);
}

void check_ports(const Options &o) {
  if (o.ports.empty() && !o.demo && !o.check)
    throw Error(ExitCode::Usage, "at least one --port is required (e.g. --port 5000)");
  if (o.ports.size() > kMaxPorts)
    throw Error(ExitCode::Usage, kTooManyPorts);
}

void toml_by(const toml::node &n, const TomlFile &f) {
  const toml::array *arr = n.as_array();
  if (!arr)
    throw f.fail(n, "by must be an array of keys, e.g. [\"dport\", \"proto\"] ([] for none)");
  std::string list;
  for (const toml::node &e : *arr) {
    if (!e.is_string())
      throw f.fail(e, "by must be an array of strings");
    list += (list.empty() ? "" : ",") + *e.value<std::string>();
  }
  f.into.by = f.at(n, "by: ", [&] { return parse_breakdown(list.empty() ? "none" : list); });
}

void toml_cgroups(const toml::node &n, const TomlFile &f) {
  const toml::array *arr = n.as_array();
  if (!arr)
    throw f.fail(n, "cgroups must be an array of cgroup paths, e.g. [\"/system.slice/nginx.service\"]");
  f.into.cgroups.clear();
  for (const toml::node &e : *arr) {
    if (!e.is_string())
      throw f.fail(e, "cgroups must be an array of strings");
    f.into.cgroups.push_back(
        f.at(e, "cgroups: ", [&] { return normalize_cgroup_arg(*e.value<std::string>(), cgroup2_root()); }));
  }
  sort_unique(f.into.cgroups);
  if (f.into.cgroups.size() > NETLATD_MAX_CGROUP_FILTERS)
    throw f.fail(n, kTooManyCgroups);
}

void toml_irq(const toml::node &n, const TomlFile &f) {
  f.into.irqs = irqs_of(n, [&](const toml::node &at, const std::string &msg) { return f.fail(at, msg); });
  // One interface's lines, so one interface named (here or on the command
  // line): the file's mistake, reported at its key (78), not as a usage
  // error of a command line that gave no --irq. --demo names lo later.
  const Options &o = f.into;
  if (!o.irqs.empty() && !o.demo && (o.ifaces.size() != 1 || is_iface_set_word(o.ifaces[0])))
    throw f.fail(n, "irq names the IRQ lines of one interface: give exactly one iface name with it");
}

bool valid_ringbuf_mb(uint32_t mb) { return mb >= 1 && mb <= 1024 && !(mb & (mb - 1)); }
bool valid_resolution(double n) { return n == 1 || n == 2 || n == 4 || n == 8; }
bool valid_interval(double s) { return s >= 0.1 && s <= 86400; }
const std::string kIntervalRange = "interval must be between 0.1 and 86400 seconds";
const std::string kResolutionValues = "must be 1, 2, 4 or 8 (buckets per power of two)";
const std::string kRingbufValues = "must be a power of two between 1 and 1024";

const OptionSpec kOptions[] = {
    {{"-i,--iface", "iface",
      "Interface to trace (eth0, bond0, eth0.100); repeat for several; all; irq (those with IRQ lines)",
      Reload::Applies},
     bind_value<&Options::ifaces>, nullptr, toml_iface, check_iface},
    {{"--irq", "irq", "The interface's receive IRQ lines (e.g. 24,25 or 24-31), instead of finding them",
      Reload::Applies},
     bind_scratch<&CliValues::irq_lists>,
     [](Options &o, const CliValues &v) {
       for (const std::string &list : v.irq_lists) {
         auto more = parse_irq_list(list);
         o.irqs.insert(o.irqs.end(), more.begin(), more.end());
       }
       sort_unique(o.irqs);
     },
     toml_irq,
     [](const Options &o) {
       if (!o.irqs.empty() && (o.ifaces.size() != 1 || is_iface_set_word(o.ifaces[0])))
         throw Error(ExitCode::Usage,
                     "--irq names the IRQ lines of one interface: give exactly one --iface NAME with it");
     }},
    {{"-p,--port", "ports", "Destination port to trace; repeat for several (UDP and TCP)", Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        return keep_if_changed<&Options::ports>(
            running, next,
            fmt::format("ports [{}] differ from the running [{}]; restart netlatd to apply them, still tracing [{}]",
                        fmt::join(next.ports, ","), fmt::join(running.ports, ","), fmt::join(running.ports, ",")));
      }},
     bind_scratch<&CliValues::ports>,
     [](Options &o, const CliValues &v) {
       for (int64_t p : v.ports)
         o.ports.push_back(checked_port(p, ""));
     },
     toml_ports, check_ports},
    {{"--interval", "interval", "Seconds per report line (default 10; 500ms, 2s also work)", Reload::Applies},
     bind_scratch<&CliValues::interval>,
     [](Options &o, const CliValues &v) {
       o.interval_s = static_cast<double>(parse_duration_ns(v.interval, kSec)) / 1e9;
     },
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "interval");
       if (!valid_interval(d))
         throw f.fail(n, kIntervalRange);
       f.into.interval_s = d;
     },
     [](const Options &o) {
       if (!valid_interval(o.interval_s))
         throw Error(ExitCode::Usage, kIntervalRange);
     }},
    {{"-o,--output", "output", "Where JSON lines go: - for stdout (default) or a file (appended)", Reload::Applies},
     bind_value<&Options::output>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.output = f.string(n, "output"); }},
    {{"--output-group", "output_group",
      "Group that may read the output file and its directory (default adm; \"\" = as created)", Reload::Applies},
     bind_value<&Options::output_group>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.output_group = f.string(n, "output_group"); }},
    {{"--format", "format", "json (default, for log collectors) or text (for a person)", Reload::Applies},
     bind_scratch<&CliValues::format>,
     [](Options &o, const CliValues &v) { o.format = parse_format(v.format, ExitCode::Usage, ""); },
     [](const toml::node &n, const TomlFile &f) {
       const std::string s = f.string(n, "format");
       f.into.format = f.at(n, "", [&] { return parse_format(s, ExitCode::Config, ""); });
     }},
    {{"-c,--config", "", "TOML config file; command-line flags override it", Reload::CommandLine},
     bind_value<&Options::config>},
    {{"--outliers-over", "outliers_over",
      "Also write the whole timeline of each packet slower than this (e.g. 500us)", Reload::Applies},
     bind_scratch<&CliValues::outliers>,
     [](Options &o, const CliValues &v) {
       if (!v.outliers.empty())
         o.outliers_over_ns = parse_duration_ns(v.outliers, kUs);
     },
     [](const toml::node &n, const TomlFile &f) {
       const std::string s = f.string(n, "outliers_over");
       f.into.outliers_over_ns = f.at(n, "", [&] { return parse_duration_ns(s, kUs); });
     }},
    {{"--outliers-max-per-sec", "outliers_max_per_sec", "Rate limit of outlier lines (default 10)", Reload::Applies},
     bind_value<&Options::outliers_max_per_sec>, nullptr,
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "outliers_max_per_sec");
       if (d < 1 || d > 1e6)
         throw f.fail(n, "outliers_max_per_sec must be 1-1000000");
       f.into.outliers_max_per_sec = static_cast<uint32_t>(d);
     },
     [](const Options &o) {
       if (o.outliers_max_per_sec == 0 && o.outliers_over_ns)
         throw Error(ExitCode::Usage, "--outliers-max-per-sec must be at least 1");
     }},
    {{"--metrics-listen", "metrics_listen",
      "Serve Prometheus metrics on ADDR:PORT, or ADDR for port 9659 (e.g. 127.0.0.1)", Reload::Applies},
     bind_value<&Options::metrics_listen>,
     [](Options &o, const CliValues &) {
       if (o.metrics_listen.empty())
         return;
       try {
         parse_listen_address(o.metrics_listen);
       } catch (const std::invalid_argument &e) {
         throw Error(ExitCode::Usage, std::string("--metrics-listen: ") + e.what());
       }
     },
     [](const toml::node &n, const TomlFile &f) {
       const std::string s = f.string(n, "metrics_listen");
       if (!s.empty())
         f.at(n, "metrics_listen: ", [&] { return parse_listen_address(s); });
       f.into.metrics_listen = s;
     }},
    {{"--metrics-resolution", "metrics_resolution",
      "Prometheus buckets per power of two, 64 ns to 10.7 s: 1, 2, 4 (default) or 8", Reload::Applies},
     bind_value<&Options::metrics_resolution>, nullptr,
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "metrics_resolution");
       if (!valid_resolution(d))
         throw f.fail(n, "metrics_resolution " + kResolutionValues);
       f.into.metrics_resolution = static_cast<unsigned>(d);
     },
     [](const Options &o) {
       if (!valid_resolution(o.metrics_resolution))
         throw Error(ExitCode::Usage, "--metrics-resolution " + kResolutionValues);
     }},
    {{"--by", "by", "Split the per-stage histograms by dport,proto (default), family, cgroup; or none",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        // The series are the Prometheus labels, and the reader's cgroup is
        // built into the loaded programs.
        return keep_if_changed<&Options::by>(
            running, next,
            fmt::format("by [{}] differs from the running [{}]; restart netlatd to apply it",
                        fmt::join(breakdown_keys(next.by), ","), fmt::join(breakdown_keys(running.by), ",")));
      }},
     bind_scratch<&CliValues::by>,
     [](Options &o, const CliValues &v) {
       if (v.by.empty())
         return;
       try {
         o.by = parse_breakdown(v.by);
       } catch (const std::invalid_argument &e) {
         throw Error(ExitCode::Usage, std::string("--by: ") + e.what());
       }
     },
     toml_by},
    {{"--cgroup", "cgroups",
      "Only packets read by tasks in this cgroup's subtree (e.g. /system.slice/nginx.service); repeat for several",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        // The kept cgroups are filled into the loaded programs' map at start.
        return keep_if_changed<&Options::cgroups>(
            running, next,
            fmt::format("cgroups [{}] differ from the running [{}]; restart netlatd to apply them",
                        fmt::join(next.cgroups, ","), fmt::join(running.cgroups, ",")));
      }},
     bind_scratch<&CliValues::cgroups>,
     [](Options &o, const CliValues &v) {
       for (const std::string &c : v.cgroups) {
         try {
           o.cgroups.push_back(normalize_cgroup_arg(c, cgroup2_root()));
         } catch (const std::invalid_argument &e) {
           throw Error(ExitCode::Usage, std::string("--cgroup: ") + e.what());
         }
       }
       sort_unique(o.cgroups);
     },
     toml_cgroups,
     [](const Options &o) {
       if (o.cgroups.size() > NETLATD_MAX_CGROUP_FILTERS)
         throw Error(ExitCode::Usage, kTooManyCgroups);
     }},
    {{"--ringbuf-mb", "ringbuf_mb", "Size of the kernel-to-daemon ring buffer in MiB (default 2)",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        return keep_if_changed<&Options::ringbuf_mb>(
            running, next,
            fmt::format("ringbuf_mb {} differs from the running {}; restart netlatd to apply it", next.ringbuf_mb,
                        running.ringbuf_mb));
      }},
     bind_value<&Options::ringbuf_mb>, nullptr,
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "ringbuf_mb");
       const auto mb = d >= 1 && d <= 1024 ? static_cast<uint32_t>(d) : 0u;
       if (d != static_cast<double>(mb) || !valid_ringbuf_mb(mb))
         throw f.fail(n, "ringbuf_mb " + kRingbufValues);
       f.into.ringbuf_mb = mb;
     },
     [](const Options &o) {
       if (!valid_ringbuf_mb(o.ringbuf_mb))
         throw Error(ExitCode::Usage, "--ringbuf-mb " + kRingbufValues);
     }},
    {{"--aggregate", "aggregate",
      "Keep the per-stage histograms in the kernel: a record only for outliers and what it cannot add",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) -> std::optional<std::string> {
        // Built into the loaded programs; one line for --aggregate and --aggregate-check.
        if (next.aggregate == running.aggregate && next.aggregate_check == running.aggregate_check)
          return std::nullopt;
        std::string line = fmt::format("aggregate {} differs from the running {}; restart netlatd to apply it",
                                       aggregate_mode(next), aggregate_mode(running));
        next.aggregate = running.aggregate;
        next.aggregate_check = running.aggregate_check;
        return line;
      }},
     bind_flag<&Options::aggregate>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.aggregate = f.boolean(n, "aggregate"); }},
    {{"--aggregate-check", "aggregate_check",
      "--aggregate, and every record written too: checks the kernel's histograms against them at exit",
      Reload::NeedsRestart,
      // --aggregate's line covers it.
      [](const Options &, Options &) -> std::optional<std::string> { return std::nullopt; }},
     bind_flag<&Options::aggregate_check>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.aggregate_check = f.boolean(n, "aggregate_check"); }},
    {{"--netns", "netns", "Network namespace the interfaces are in: NAME (/run/netns/NAME), PID or a path",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        return keep_if_changed<&Options::netns>(
            running, next,
            fmt::format("netns '{}' differs from the running '{}'; restart netlatd to apply it", next.netns,
                        running.netns));
      }},
     bind_value<&Options::netns>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.netns = f.string(n, "netns"); }},
    {{"--duration", "", "Stop after this many seconds (default: run until signalled)", Reload::CommandLine},
     bind_value<&Options::duration_s>, nullptr, nullptr,
     [](const Options &o) {
       // The daemon counts the run in int64 nanoseconds: inf or 1e300 would
       // overflow the conversion (undefined behaviour; UBSan's float-cast-overflow).
       if (o.duration_s && !(*o.duration_s > 0 && *o.duration_s <= kMaxDurationS))
         throw Error(ExitCode::Usage, "--duration must be more than 0 and at most 1e9 seconds");
     }},
    {{"-v,--verbose", "verbose",
      "Debug logging, including libbpf's own messages and the verifier's walk per program", Reload::Applies},
     bind_flag<&Options::verbose>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.verbose = f.boolean(n, "verbose"); }},
    {{"--check", "", "Probe the kernel, print the hook chosen per stage, exit 0 if netlatd can run",
      Reload::CommandLine},
     bind_flag<&Options::check>},
    {{"--demo", "", "Trace loopback with traffic netlatd generates itself (defaults: lo, port 47000)",
      Reload::CommandLine},
     bind_flag<&Options::demo>},
};

bool named(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// --demo's defaults, where neither the command line nor a config file says.
void apply_demo_defaults(Options &o, const std::vector<std::string> &set_on_cli) {
  if (!o.demo)
    return;
  if (o.ifaces.empty())
    o.ifaces = {"lo"};
  if (o.ports.empty())
    o.ports.push_back(47000);
  if (!named(set_on_cli, "interval") && o.config.empty())
    o.interval_s = 2;
  if (!named(set_on_cli, "format") && o.config.empty())
    o.format = OutputFormat::Text;
}

// What follows from the options together, after each is valid on its own.
void settle(Options &o) {
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
}

const char *kAbout = "netlatd: where the time goes between a packet reaching the NIC and recvfrom() returning it.\n"
                     "Traces every matching packet through the kernel's receive path with BPF and writes\n"
                     "per-stage latency histograms as JSON lines, one per interval.";
const char *kFooter = "Exit status: 0 ok, 64 usage, 66 config unreadable, 68 no such interface or netns, 69 kernel "
                      "lacks a\n"
                      "feature, 70 internal error or metrics port in use, 73 output not writable, 77 not permitted,\n"
                      "78 bad config. SIGHUP reopens the output and reloads --config.\n"
                      "See netlatd(8) and docs/OUTPUT.md.";

// CLI11's parse; nullopt when the options are to be used, else the exit.
std::optional<CommandLine> parse_or_exit(CLI::App &app, int argc, const char *const *argv) {
  CommandLine exit;
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp &) {
    exit.exit_text = app.help();
  } catch (const CLI::CallForVersion &) {
    exit.exit_text = std::string("netlatd ") + kVersion + "\n";
  } catch (const CLI::ParseError &e) {
    std::string msg = e.what();
    if (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    throw Error(ExitCode::Usage, msg + " (see --help)");
  }
  exit.exit_now = 0;
  return exit;
}

}  // namespace

std::span<const OptionInfo> option_table() {
  static const std::vector<OptionInfo> infos = [] {
    std::vector<OptionInfo> out;
    for (const OptionSpec &s : kOptions)
      out.push_back(s.info);
    return out;
  }();
  return infos;
}

std::string long_flag(const OptionInfo &info) {
  const std::string_view flags = info.flags;
  return std::string(flags.substr(flags.rfind(',') + 1));
}

void validate(const Options &o) {
  for (const OptionSpec &s : kOptions)
    if (s.check)
      s.check(o);
}

void load_config_file(const std::string &path, Options &into, const std::vector<std::string> &set_on_cli) {
  std::ifstream in(path);
  if (!in)
    throw Error(ExitCode::NoInput, "cannot read config file '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  const TomlFile file{path, into};
  toml::table tbl;
  try {
    tbl = toml::parse(buf.str(), path);
  } catch (const toml::parse_error &e) {
    throw Error(ExitCode::Config, toml_where(path, e.source()) + std::string(e.description()));
  }
  for (auto &&[k, v] : tbl) {
    const std::string key(k.str());
    const auto known = std::find_if(std::begin(kOptions), std::end(kOptions),
                                    [&](const OptionSpec &s) { return *s.info.key && key == s.info.key; });
    if (known == std::end(kOptions))
      throw file.fail(v, "unknown key '" + key + "'");
  }
  for (const OptionSpec &s : kOptions)
    if (const toml::node *n = *s.info.key ? tbl.get(s.info.key) : nullptr; n && !named(set_on_cli, s.info.key))
      s.from_toml(*n, file);
}

CommandLine parse_command_line(int argc, const char *const *argv) {
  CommandLine result;
  Options &o = result.options;
  CLI::App app{kAbout, "netlatd"};
  o.command_line.assign(argv, argv + argc);
  app.set_version_flag("--version", std::string("netlatd ") + kVersion);
  app.get_formatter()->column_width(34);
  CliValues values;
  std::vector<CLI::Option *> bound;
  for (const OptionSpec &s : kOptions)
    bound.push_back(s.bind(app, s.info, o, values));
  app.footer(kFooter);
  if (auto exit = parse_or_exit(app, argc, argv))
    return *exit;

  // The keys the command line gave: the config file does not override them.
  std::vector<std::string> set_on_cli;
  for (size_t i = 0; i < std::size(kOptions); ++i)
    if (*kOptions[i].info.key && bound[i]->count() > 0)
      set_on_cli.emplace_back(kOptions[i].info.key);
  for (const OptionSpec &s : kOptions)
    if (s.from_cli)
      s.from_cli(o, values);
  if (!o.config.empty())
    load_config_file(o.config, o, set_on_cli);
  apply_demo_defaults(o, set_on_cli);
  settle(o);
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
