// The values of options as text: ports, IRQ lists, durations, formats, and
// where a config file's error points. The command line and the file share them.
#include "netlatd/service/options.hpp"

#include <cctype>
#include <cmath>
#include <sstream>

#include "option_parts.hpp"

namespace netlatd {

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

}  // namespace netlatd
