// Reading the options: the command line (CLI11), then the config file it
// names (TOML), then what follows from them together; each option's part
// comes from the table (option_table.cpp).
#include "netlatd/service/options.hpp"

#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "netlatd/version.hpp"
#include "option_parts.hpp"

namespace netlatd {
namespace {

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
                      "netlatd report [--output PAGE] FILE... writes one HTML page of where the time went from\n"
                      "the JSON lines (netlatd report --help).\n"
                      "See netlatd(8), docs/OUTPUT.md and docs/REPORT.md.";

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

void validate(const Options &o) {
  for (const OptionSpec &s : option_specs())
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
    const auto known = std::find_if(option_specs().begin(), option_specs().end(),
                                    [&](const OptionSpec &s) { return *s.info.key && key == s.info.key; });
    if (known == option_specs().end())
      throw file.fail(v, "unknown key '" + key + "'");
  }
  for (const OptionSpec &s : option_specs())
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
  for (const OptionSpec &s : option_specs())
    bound.push_back(s.bind(app, s.info, o, values));
  app.footer(kFooter);
  if (auto exit = parse_or_exit(app, argc, argv))
    return *exit;

  // The keys the command line gave: the config file does not override them.
  std::vector<std::string> set_on_cli;
  for (size_t i = 0; i < option_specs().size(); ++i)
    if (*option_specs()[i].info.key && bound[i]->count() > 0)
      set_on_cli.emplace_back(option_specs()[i].info.key);
  for (const OptionSpec &s : option_specs())
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
