#pragma once
// Everything a run is configured by: command line (CLI11) over config file
// (TOML, --config) over defaults.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <linux/types.h>

#include "netlatd/abi.h"
#include "netlatd/model/breakdown.hpp"
#include "netlatd/net/interface.hpp"

namespace netlatd {

enum class OutputFormat { Json, Text };

struct Options {
  // --iface, repeatable: interface names, or one of the words "all" (every
  // interface) and "irq" (every interface with IRQ lines) alone.
  std::vector<std::string> ifaces;
  // --netns: the network namespace the interfaces are in (a name under
  // /run/netns, a pid, or a path); empty = the daemon's own.
  std::string netns;
  std::vector<uint16_t> ports;
  double interval_s = 10.0;
  std::string output = "-";  // "-" = stdout, else a file appended to
  // Group that may read the output file and enter its directory (log
  // collectors run as their own user in it); empty = leave both as created.
  std::string output_group = "adm";
  OutputFormat format = OutputFormat::Json;
  std::string config;        // path of the TOML file, empty = none
  std::optional<uint64_t> outliers_over_ns;
  uint32_t outliers_max_per_sec = 10;
  std::string metrics_listen;  // "ADDR:PORT" (validated), empty = off; address defaults to 127.0.0.1
  unsigned metrics_resolution = 4;  // Prometheus `le` bounds per power of two: 1, 2, 4 or 8
  BreakdownSpec by;                 // --by: what the per-stage histograms are split by
  // --cgroup: only packets read by tasks in these cgroup subtrees (paths under
  // the cgroup2 mount, normalized, sorted, unique); empty = every reader.
  std::vector<std::string> cgroups;
  uint32_t ringbuf_mb = 2;
  // --stash-entries: the UDP stash's entries (abi.h), checked by
  // stash_entries_error.
  uint32_t stash_entries = NETLATD_STASH_ENTRIES_DEFAULT;
  // --sample N: one in N matching packets is kept, chosen in the kernel's
  // filter before any per-packet state (1 = every packet).
  uint32_t sample = 1;
  // --count-ops: the BPF programs count their lock pairs, ring reservations,
  // map lookups and updates and clock reads ("ops" in each JSON line).
  bool count_ops = false;
  // --irq: the interface's receive IRQ lines, replacing their discovery
  // (sorted, unique); empty = discover them (see find_irq_lines).
  std::vector<int> irqs;
  bool verbose = false;
  // --aggregate: the kernel side keeps the per-stage histograms and writes a
  // record only for an outlier or what it cannot add (docs/OUTPUT.md).
  // --aggregate-check: and writes every record too, to check one against the
  // other at exit (implies aggregate).
  bool aggregate = false;
  bool aggregate_check = false;
  bool check = false;
  bool demo = false;
  std::optional<double> duration_s;  // stop by itself after this long (demo, tests); at most 1e9 s
  // argv as given (argv[0] included): SIGHUP re-reads --config under the same
  // command line, which still wins over the file.
  std::vector<std::string> command_line;
};

// What parse_command_line() decided: run with the options, or exit at once
// (--help, --version) with the text to print.
struct CommandLine {
  Options options;
  std::optional<int> exit_now;
  std::string exit_text;
};

// Parses argv, loads --config if given (the command line wins), validates.
// Throws Error(Usage|NoInput|Config, "one line") on bad input.
CommandLine parse_command_line(int argc, const char *const *argv);

// Loads a TOML config into `into`, skipping the keys ("ports", "outliers_over")
// in `set_on_cli`: the command line gave them.
// Throws Error(NoInput) when unreadable, Error(Config, "file:line:col: msg") when invalid.
void load_config_file(const std::string &path, Options &into, const std::vector<std::string> &set_on_cli);

// "250us", "2ms", "1.5s", "100ns", "3m"; a bare number means `bare_unit_ns`.
// Throws Error(Usage) when malformed or negative.
uint64_t parse_duration_ns(const std::string &text, uint64_t bare_unit_ns);

// "24,25", "24-31", "24-27,40": IRQ numbers netlatd can trace, sorted and
// unique. Throws Error(Usage, "--irq: ...") when malformed or out of range.
std::vector<int> parse_irq_list(const std::string &text);

// Checks values that do not depend on the machine (ports, interval, ...):
// each option's own check, from the option table.
void validate(const Options &o);

// Whether a SIGHUP reload may change an option.
enum class Reload {
  Applies,       // at once
  NeedsRestart,  // built into the loaded programs, or read once at start: keeps its running value
  CommandLine,   // no config key: the command line, which a reload parses again unchanged
};

// One option as the table in option_table.cpp declares it: that one entry makes
// its flag and --help line (CLI11), its config file key (TOML), how each is
// read and checked, and its reload rule. netlatd(8) lists the same options
// (a unit test compares them).
struct OptionInfo {
  const char *flags;  // CLI11's names: "-p,--port"
  const char *key;    // the config file's key, "" when only on the command line
  const char *help;
  Reload reload;
  // NeedsRestart: when `next` differs from `running` in this option, puts the
  // running value back into `next` and returns the line saying a restart applies it.
  std::optional<std::string> (*keep)(const Options &running, Options &next) = nullptr;
};
// Every option, in --help's order.
std::span<const OptionInfo> option_table();
// "--port" of "-p,--port".
std::string long_flag(const OptionInfo &info);

// The options a SIGHUP reload runs with: `running.command_line` parsed again,
// so the config file is re-read and command-line flags still override it (a
// key removed from the file falls back to its default). Throws like
// parse_command_line(): Error(NoInput) or Error(Config, "file:line:col: msg").
Options reload_options(const Options &running);

}  // namespace netlatd
