// Which hard IRQ lines belong to an interface, and which of them count for
// the `irq` stage. Pure functions over a sysfs tree and the text of
// /proc/interrupts, so tests run them against fixture trees.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "netlatd/net/interface.hpp"

namespace netlatd {
namespace fs = std::filesystem;
namespace {

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int> to_irq(std::string_view s) {
  int v = 0;
  if (!is_digits(s) || s.size() > 9)
    return std::nullopt;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos)
    return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// Cuts the next whitespace-separated token off the front of `s`.
std::string_view next_token(std::string_view &s) {
  s = trim(s);
  const auto end = std::min(s.find_first_of(" \t"), s.size());
  std::string_view tok = s.substr(0, end);
  s.remove_prefix(end);
  return tok;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// After the chip name come the hardware IRQ number and the flow handler:
// "2-edge" (x86, 4.x on), "27 Level" (arm64), nothing at all (3.x, where the
// chip reads "IO-APIC-edge"). The handler names follow.
void skip_hwirq_and_flow(std::string_view &rest) {
  std::string_view probe = rest;
  std::string_view tok = next_token(probe);
  if (is_digits(tok)) {
    rest = probe;
    tok = next_token(probe);
  }
  if (iequals(tok, "level") || iequals(tok, "edge")) {
    rest = probe;
    return;
  }
  const auto dash = tok.find('-');
  if (dash != std::string_view::npos && dash > 0 && is_digits(tok.substr(0, dash)))
    rest = probe;
}

}  // namespace

std::vector<InterruptsLine> parse_proc_interrupts(std::string_view text) {
  std::vector<InterruptsLine> lines;
  while (!text.empty()) {
    const auto eol = std::min(text.find('\n'), text.size());
    std::string_view rest = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));
    std::string_view head = next_token(rest);
    if (head.size() < 2 || head.back() != ':')
      continue;
    const auto irq = to_irq(head.substr(0, head.size() - 1));
    if (!irq)
      continue;  // NMI:, LOC:, a header, or garbage
    InterruptsLine line;
    line.irq = *irq;
    std::string_view probe = rest;
    for (std::string_view tok = next_token(probe); is_digits(tok); tok = next_token(probe))
      rest = probe;  // one count per CPU
    line.chip = std::string(next_token(rest));
    skip_hwirq_and_flow(rest);
    // Names may hold spaces ("PCIe PME"); a shared line lists them with ", ".
    while (!rest.empty()) {
      const auto comma = std::min(rest.find(','), rest.size());
      if (auto name = trim(rest.substr(0, comma)); !name.empty())
        line.actions.emplace_back(name);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

// Where an interface's device keeps its IRQ files, and the names its
// vectors may carry.
struct DeviceView {
  fs::path irq_dir;    // holds msi_irqs/ or irq; empty when there is none
  std::string shown;   // that directory as a user reaches it: "/sys/class/net/eth0/device/.."
  std::vector<std::string> owners;  // interface name, device name (virtio0), PCI address
  bool has_device = false;          // lo, veth, tun, bridges have none
};

bool has_irq_files(const fs::path &dir) {
  std::error_code ec;
  return fs::exists(dir / "msi_irqs", ec) || fs::exists(dir / "irq", ec);
}

DeviceView locate_device(const fs::path &root, const std::string &ifname) {
  DeviceView view;
  view.owners.push_back(ifname);
  const std::string logical = "/sys/class/net/" + ifname + "/device";
  std::error_code ec;
  const fs::path dev = fs::canonical(root / logical.substr(1), ec);
  if (ec)
    return view;
  view.has_device = true;
  view.owners.push_back(dev.filename().string());
  if (has_irq_files(dev)) {
    view.irq_dir = dev;
    view.shown = logical;
  } else if (has_irq_files(dev.parent_path())) {
    // virtio-net: the interface's device is virtio0, a child of the PCI
    // device that owns the vectors.
    view.irq_dir = dev.parent_path();
    view.shown = logical + "/..";
    view.owners.push_back(view.irq_dir.filename().string());
  }
  return view;
}

// The lines sysfs gives: the MSI/MSI-X vectors, else the legacy line.
std::map<int, IrqLine> lines_from_sysfs(const DeviceView &dev) {
  std::map<int, IrqLine> found;
  if (dev.irq_dir.empty())
    return found;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dev.irq_dir / "msi_irqs", ec)) {
    if (auto irq = to_irq(e.path().filename().string()))
      found[*irq] = IrqLine{*irq, "", dev.shown + "/msi_irqs", "", false};
  }
  if (found.empty()) {
    std::ifstream f(dev.irq_dir / "irq");
    int irq = 0;
    if (f >> irq && irq > 0)  // 0: no legacy line wired
      found[irq] = IrqLine{irq, "", dev.shown + "/irq", "", false};
  }
  return found;
}

// `owner` appears in `name` as a whole part: "eth0" in "eth0-rx-0" or
// "i40e-eth0-TxRx-0", not in "veth0" or "eth01".
bool mentions(std::string_view name, std::string_view owner) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (auto pos = name.find(owner); !owner.empty() && pos != std::string_view::npos; pos = name.find(owner, pos + 1)) {
    const auto end = pos + owner.size();
    if ((pos == 0 || !alnum(name[pos - 1])) && (end == name.size() || !alnum(name[end])))
      return true;
  }
  return false;
}

bool mentions_any(std::string_view name, const std::vector<std::string> &owners) {
  return std::any_of(owners.begin(), owners.end(), [&](const std::string &o) { return mentions(name, o); });
}

constexpr std::string_view kReceive = "receive";
constexpr std::string_view kShared = "receive and transmit";
constexpr std::string_view kUnsaid = "queue, direction not named";
constexpr std::string_view kTransmit = "transmit only";
constexpr std::string_view kControl = "device control";
constexpr std::string_view kOther = "other causes (link, errors)";
constexpr std::string_view kDeviceLine = "the device's line";
constexpr std::string_view kUnnamed = "not named in /proc/interrupts";

// The words of a handler's name that say what its vector is for, the
// owners' names taken out: "virtio0-input.0" -> {input}, "mlx5_async0@pci:
// 0000:3b:00.0" -> {mlx, async}, "eth0" -> {}.
std::set<std::string> purpose_words(std::string name, const std::vector<std::string> &owners) {
  for (const std::string &o : owners) {
    for (auto pos = name.find(o); !o.empty() && pos != std::string::npos; pos = name.find(o, pos))
      name.replace(pos, o.size(), " ");
  }
  std::set<std::string> words;
  std::string word;
  for (size_t i = 0; i <= name.size(); ++i) {
    const char c = i < name.size() ? name[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    while (!word.empty() && std::isdigit(static_cast<unsigned char>(word.back())))
      word.pop_back();  // queue numbers: "comp0", "blk3"
    if (!word.empty() && word != "pci")
      words.insert(word);
    word.clear();
  }
  return words;
}

// Vectors for the device itself, never for packets: virtio's config change,
// mlx5's async/pages/cmd events, ena and gve management, i40e misc, mailboxes,
// wake-on-LAN.
const std::set<std::string> kControlWords = {"config", "async", "mgmnt", "mgmt", "ctrl",  "misc", "adminq", "aenq",
                                             "cmd",    "pages", "other", "lsc",  "err",   "error", "mbx",   "mailbox",
                                             "fw",     "link",  "wol",  "wake"};
const std::set<std::string> kReceiveWords = {"rx", "rxq", "input", "txrx", "recv", "rcv"};
const std::set<std::string> kTransmitWords = {"tx", "txq", "output", "xmit", "send"};

bool any_of_words(const std::set<std::string> &words, const std::set<std::string> &wanted) {
  return std::any_of(words.begin(), words.end(), [&](const std::string &w) { return wanted.count(w) > 0; });
}

// Empty for a name that is only the owner's ("eth0"): see find_irq_lines.
std::string_view role_of(const std::string &name, const std::vector<std::string> &owners) {
  if (name.empty())
    return kUnnamed;
  const auto words = purpose_words(name, owners);
  if (words.empty())
    return {};
  if (any_of_words(words, kControlWords))
    return kControl;
  const bool rx = any_of_words(words, kReceiveWords);
  const bool tx = any_of_words(words, kTransmitWords) || words.count("txrx") > 0;
  if (rx)
    return tx ? kShared : kReceive;
  return tx ? kTransmit : kUnsaid;
}

// The handler that names the line after the device, else the only one.
std::string handler_name(const InterruptsLine &l, const std::vector<std::string> &owners) {
  for (const std::string &a : l.actions) {
    if (mentions_any(a, owners))
      return a;
  }
  return l.actions.size() == 1 ? l.actions.front() : "";
}

// The lines of a device located, sysfs's and those its names give.
std::vector<IrqLine> lines_of_device(const DeviceView &dev, std::string_view proc_interrupts) {
  std::map<int, IrqLine> found = lines_from_sysfs(dev);
  const auto table = parse_proc_interrupts(proc_interrupts);
  for (const InterruptsLine &l : table) {
    if (auto it = found.find(l.irq); it != found.end())
      it->second.name = handler_name(l, dev.owners);
  }
  // Names add lines only for a device whose sysfs has no IRQ files (a
  // platform device on an SoC): elsewhere a name alone may be another
  // network namespace's interface of the same name.
  if (found.empty() && dev.has_device) {
    for (const InterruptsLine &l : table) {
      const std::string name = handler_name(l, dev.owners);
      if (!name.empty() && mentions_any(name, dev.owners))
        found.emplace(l.irq, IrqLine{l.irq, name, "/proc/interrupts", "", false});
    }
  }
  // A line named only after the device ("eth0") carries the packets when it
  // is the device's only one (e1000's legacy line, MSI), and the other causes
  // (link changes, errors) beside vectors named for receive (e1000e, igb,
  // ixgbe: "eth0-rx-0", "eth0-TxRx-0").
  bool has_queue_lines = false;
  for (auto &[irq, line] : found) {
    line.role = std::string(role_of(line.name, dev.owners));
    line.counted = line.role != kControl && line.role != kTransmit && !line.role.empty();
    has_queue_lines = has_queue_lines || line.role == kReceive || line.role == kShared;
  }
  std::vector<IrqLine> lines;
  for (auto &[irq, line] : found) {
    if (line.role.empty()) {
      line.role = has_queue_lines ? kOther : kDeviceLine;
      line.counted = !has_queue_lines;
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

std::vector<IrqLine> find_irq_lines(const fs::path &root, const std::string &ifname, std::string_view proc_interrupts) {
  return lines_of_device(locate_device(root, ifname), proc_interrupts);
}

namespace {

// A PCI address as ETHTOOL_GDRVINFO gives it is one path component; anything
// else (a USB path "usb-0000:00:14.0-1", "platform", "N/A") is not looked up.
bool is_bus_address(const std::string &s) {
  return !s.empty() && s.size() < 64 && s[0] != '.' && s.find('/') == std::string::npos;
}

std::string driver_of(const fs::path &dev) {
  std::error_code ec;
  const fs::path drv = fs::read_symlink(dev / "driver", ec);
  return ec ? "" : drv.filename().string();
}

}  // namespace

std::vector<IrqLine> find_irq_lines_by_bus(const fs::path &root, const std::string &ifname, const DriverInfo &driver,
                                           std::string_view proc_interrupts) {
  DeviceView view;
  view.owners.push_back(ifname);
  if (!is_bus_address(driver.bus_info))
    return {};
  const std::string logical = "/sys/bus/pci/devices/" + driver.bus_info;
  std::error_code ec;
  const fs::path pci = fs::canonical(root / logical.substr(1), ec);
  if (ec)
    return {};
  // has_device stays false: a PCI device has its IRQ files, and names alone
  // could be another namespace's interface of the same name.
  view.owners.push_back(pci.filename().string());
  // virtio-net: the interface's driver drives virtio0, a child of the PCI
  // device (whose driver is virtio-pci); its name is in the vectors' names.
  if (!driver.driver.empty() && driver_of(pci) != driver.driver) {
    for (const auto &e : fs::directory_iterator(pci, ec)) {
      std::error_code dir_ec;
      if (e.is_directory(dir_ec) && !e.is_symlink(dir_ec) && driver_of(e.path()) == driver.driver) {
        view.owners.push_back(e.path().filename().string());
        break;
      }
    }
  }
  if (has_irq_files(pci)) {
    view.irq_dir = pci;
    view.shown = logical;
  }
  return lines_of_device(view, proc_interrupts);
}

std::vector<IrqLine> irq_lines_given(const std::vector<int> &irqs, std::string_view proc_interrupts) {
  std::map<int, std::string> names;
  for (const InterruptsLine &l : parse_proc_interrupts(proc_interrupts)) {
    std::string joined;
    for (const std::string &a : l.actions)
      joined += (joined.empty() ? "" : ",") + a;
    names[l.irq] = joined;
  }
  std::vector<IrqLine> lines;
  for (int irq : irqs)
    lines.push_back(IrqLine{irq, names[irq], "--irq", "given", true});
  return lines;
}

std::vector<int> counted_irqs(const std::vector<IrqLine> &lines) {
  std::vector<int> irqs;
  for (const IrqLine &l : lines) {
    if (l.counted)
      irqs.push_back(l.irq);
  }
  std::sort(irqs.begin(), irqs.end());
  irqs.erase(std::unique(irqs.begin(), irqs.end()), irqs.end());
  return irqs;
}

std::vector<std::string> describe_irq_lines(const std::vector<IrqLine> &lines) {
  std::vector<std::string> out;
  for (const IrqLine &l : lines)
    out.push_back(fmt::format("irq {:<5} {:<12} {:<28} {:<20} {}", l.irq, l.counted ? "counted" : "not counted",
                              l.role, l.name.empty() ? "-" : l.name, l.found_by));
  return out;
}

void log_irq_lines(const InterfaceInfo &iface) {
  for (const std::string &line : describe_irq_lines(iface.irq_lines))
    spdlog::info("{}: {}", iface.name, line);
}

}  // namespace netlatd
