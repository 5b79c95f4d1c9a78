// How the IRQ lines of an interface are found (src/interface_irqs.cpp): the
// text of /proc/interrupts against a sysfs tree. The input's first byte picks
// one of the sysfs fixtures of tests/unit/fixtures/irq/, the bytes up to the
// first NUL are the interface name, the rest is /proc/interrupts. Promises:
// nothing throws; lines come sorted by IRQ without duplicates; each IRQ found
// is a number in the text or in the fixture (an IRQ no file names would be
// traced for nothing); --irq's lines are all counted; the description is one
// line per IRQ line.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/service/options.hpp"

namespace fs = std::filesystem;

namespace {

struct Fixture {
  fs::path root;
  std::set<int> irqs;  // the numbers its msi_irqs/ entries and irq files give
};

std::vector<Fixture> load_fixtures() {
  std::vector<Fixture> out;
  std::error_code ec;
  for (const auto &dir : fs::directory_iterator(NETLATD_IRQ_FIXTURES, ec)) {
    Fixture f{dir.path(), {}};
    for (auto it = fs::recursive_directory_iterator(dir.path(), fs::directory_options::none, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::path &p = it->path();
      if (p.parent_path().filename() == "msi_irqs")
        f.irqs.insert(std::atoi(p.filename().c_str()));
      else if (p.filename() == "irq" && it->is_regular_file()) {
        std::ifstream in(p);
        int n = 0;
        if (in >> n)
          f.irqs.insert(n);
      }
    }
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const Fixture &a, const Fixture &b) { return a.root < b.root; });
  if (out.empty())
    nlfuzz::fail("the sysfs fixtures are there", NETLATD_IRQ_FIXTURES);
  return out;
}

void check_sorted(const std::vector<netlatd::IrqLine> &lines, const std::string &what) {
  for (size_t i = 1; i < lines.size(); ++i)
    if (lines[i - 1].irq >= lines[i].irq)
      nlfuzz::fail(("IRQ lines are sorted, without duplicates: " + what).c_str(), std::to_string(lines[i].irq));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::vector<Fixture> fixtures = load_fixtures();
  if (size < 1)
    return 0;
  const Fixture &fx = fixtures[data[0] % fixtures.size()];
  const std::string rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string ifname = rest.substr(0, nul);
  const std::string text = nul == std::string::npos ? std::string() : rest.substr(nul + 1);

  const std::vector<netlatd::InterruptsLine> parsed = netlatd::parse_proc_interrupts(text);
  std::vector<int> given;
  for (const auto &l : parsed) {
    if (l.irq < 0 || text.find(std::to_string(l.irq)) == std::string::npos)
      nlfuzz::fail("a parsed line's IRQ is a number in the text", std::to_string(l.irq));
    given.push_back(l.irq);
  }

  // The daemon refuses other names before it looks anything up.
  if (netlatd::valid_interface_name(ifname)) {
    const auto lines = netlatd::find_irq_lines(fx.root, ifname, text);
    check_sorted(lines, "found");
    for (const auto &l : lines)
      if (!fx.irqs.count(l.irq) && text.find(std::to_string(l.irq)) == std::string::npos)
        nlfuzz::fail("every IRQ line found is named by a file or the text", std::to_string(l.irq));
    const std::vector<int> counted = netlatd::counted_irqs(lines);
    for (size_t i = 1; i < counted.size(); ++i)
      if (counted[i - 1] >= counted[i])
        nlfuzz::fail("counted IRQs are sorted, without duplicates", std::to_string(counted[i]));
    const auto described = netlatd::describe_irq_lines(lines);
    if (described.size() != lines.size())
      nlfuzz::fail("one description line per IRQ line", std::to_string(described.size()));
    for (const auto &d : described)
      if (d.find('\n') != std::string::npos)
        nlfuzz::fail("a description is one line", d);
  }

  const auto forced = netlatd::irq_lines_given(given, text);
  for (const auto &l : forced)
    if (!l.counted)
      nlfuzz::fail("an IRQ line --irq names is counted", std::to_string(l.irq));
  return 0;
}
