// The option table: one entry per option, its flag and --help text
// (CLI11), its config file key (TOML), how each form is read and checked,
// what validate() asks of it, and whether a reload may change it. The order
// is --help's. options.cpp and reload.cpp go through it; nothing else names
// an option. The longer readers and checks it names are option_checks.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "netlatd/kernel/tracer.hpp"
#include "netlatd/net/cgroup.hpp"
#include "netlatd/output/http.hpp"
#include "option_parts.hpp"

namespace netlatd {
namespace {

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

bool valid_ringbuf_mb(uint32_t mb) { return mb >= 1 && mb <= 1024 && !(mb & (mb - 1)); }
bool valid_resolution(double n) { return n == 1 || n == 2 || n == 4 || n == 8; }
bool valid_interval(double s) { return s >= 0.1 && s <= 86400; }
const std::string kIntervalRange = "interval must be between 0.1 and 86400 seconds";
bool valid_sample(double n) { return n >= 1 && n <= 65536 && n == static_cast<double>(static_cast<uint32_t>(n)); }
const std::string kSampleRange = "sample must be a whole number from 1 to 65536";
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
    {{"--stash-entries", "stash_entries",
      "Datagrams the kernel side can hold between arrival and read: a power of two from 4096 to 1048576, 56 "
      "bytes each (default 32768, 1.75 MiB); raise it for deeper unread UDP queues",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        // The table is sized when the programs load.
        return keep_if_changed<&Options::stash_entries>(
            running, next,
            fmt::format("stash_entries {} differs from the running {}; restart netlatd to apply it",
                        next.stash_entries, running.stash_entries));
      }},
     bind_value<&Options::stash_entries>, nullptr,
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "stash_entries");
       const auto entries = d >= 1 && d <= NETLATD_STASH_ENTRIES_MAX ? static_cast<uint32_t>(d) : 0u;
       if (d != static_cast<double>(entries) || !stash_entries_error(entries).empty())
         throw f.fail(n, "stash_entries " + stash_entries_error(0));
       f.into.stash_entries = entries;
     },
     [](const Options &o) {
       if (const std::string why = stash_entries_error(o.stash_entries); !why.empty())
         throw Error(ExitCode::Usage, "--stash-entries " + why);
     }},
    {{"--sample", "sample",
      "Trace one in N matching packets (default 1: all); TCP keeps or leaves out whole flows", Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        // The bound is built into the loaded programs.
        return keep_if_changed<&Options::sample>(
            running, next,
            fmt::format("sample {} differs from the running {}; restart netlatd to apply it", next.sample,
                        running.sample));
      }},
     bind_value<&Options::sample>, nullptr,
     [](const toml::node &n, const TomlFile &f) {
       const double d = f.number(n, "sample");
       if (!valid_sample(d))
         throw f.fail(n, kSampleRange);
       f.into.sample = static_cast<uint32_t>(d);
     },
     [](const Options &o) {
       if (!valid_sample(o.sample))
         throw Error(ExitCode::Usage, "--" + kSampleRange);
     }},
    {{"--count-ops", "count_ops",
      "Diagnostic: count the BPF programs' lock pairs, ring reservations, map lookups and updates, clock reads",
      Reload::NeedsRestart,
      [](const Options &running, Options &next) {
        return keep_if_changed<&Options::count_ops>(
            running, next, "count_ops differs from the running one; restart netlatd to apply it");
      }},
     bind_flag<&Options::count_ops>, nullptr,
     [](const toml::node &n, const TomlFile &f) { f.into.count_ops = f.boolean(n, "count_ops"); }},
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

}  // namespace

std::span<const OptionSpec> option_specs() { return kOptions; }

std::span<const OptionInfo> option_table() {
  static const std::vector<OptionInfo> infos = [] {
    std::vector<OptionInfo> out;
    for (const OptionSpec &s : option_specs())
      out.push_back(s.info);
    return out;
  }();
  return infos;
}

std::string long_flag(const OptionInfo &info) {
  const std::string_view flags = info.flags;
  return std::string(flags.substr(flags.rfind(',') + 1));
}

}  // namespace netlatd
