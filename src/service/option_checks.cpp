// How the option table reads and checks its longer values: the config
// file's lists (iface, ports, by, cgroups, irq) into Options, each error at
// its place in the file, and what validate() asks of --iface and --port. The
// table itself, in --help's order, is option_table.cpp.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "netlatd/net/cgroup.hpp"
#include "option_parts.hpp"

namespace netlatd {

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

}  // namespace netlatd
