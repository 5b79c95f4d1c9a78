#pragma once
// Inside the options (src/service only): the value parsers both the command
// line and the config file use, and the shape of an option table entry.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <linux/types.h>
#include <toml++/toml.h>

#include "netlatd/abi.h"
#include "netlatd/base/errors.hpp"
#include "netlatd/service/options.hpp"

namespace netlatd {

inline constexpr uint64_t kNs = 1;
inline constexpr uint64_t kUs = 1000;
inline constexpr uint64_t kMs = 1000 * kUs;
inline constexpr uint64_t kSec = 1000 * kMs;
// NETLATD_MAX_PORTS: the BPF programs' table of watched ports.
inline constexpr size_t kMaxPorts = 16;
inline constexpr double kMaxDurationS = 1e9;  // 31 years; 2^63 ns is 292
inline const std::string kTooManyPorts = "at most " + std::to_string(kMaxPorts) + " ports can be watched at once";
inline const std::string kTooManyCgroups =
    "at most " + std::to_string(NETLATD_MAX_CGROUP_FILTERS) + " cgroups can be given with --cgroup";
// The kernel side keeps the IRQ lines as a bitmap over IRQ numbers.
inline constexpr int kMaxIrq = NETLATD_IRQ_BITMAP_WORDS * 64 - 1;

uint16_t checked_port(int64_t v, const std::string &where);
OutputFormat parse_format(const std::string &s, ExitCode code, const std::string &where);
std::string toml_where(const std::string &path, const toml::source_region &r);
int checked_irq(const std::string &text, const std::string &where);
// What is wrong with a list of --iface values, "" when nothing is.
std::string iface_list_error(const std::vector<std::string> &ifaces);

template <typename T> void sort_unique(std::vector<T> &v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
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

// The table of option_table.cpp, in --help's order.
std::span<const OptionSpec> option_specs();

// option_checks.cpp: the config file's lists into Options (the table's
// from_toml), and what validate() asks of --iface and --port (its check).
void toml_iface(const toml::node &n, const TomlFile &f);
void toml_ports(const toml::node &n, const TomlFile &f);
void toml_by(const toml::node &n, const TomlFile &f);
void toml_cgroups(const toml::node &n, const TomlFile &f);
void toml_irq(const toml::node &n, const TomlFile &f);
void check_iface(const Options &o);
void check_ports(const Options &o);

}  // namespace netlatd
