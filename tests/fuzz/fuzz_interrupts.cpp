// How the IRQ lines of an interface are found: the names in
// /sys/class/net/IFACE/device/msi_irqs/, device/irq and /proc/interrupts, as
// irqs_of_interface() parses them. The input is four parts split at the
// first three NUL bytes: the interface name, the msi_irqs entries (one a
// line), the content of device/irq, and /proc/interrupts. The lines found
// must be sorted, without duplicates, and each one's digits must be in the
// input ("+07" gives 7): an IRQ no file names would be traced for nothing.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "netlatd/interface.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string input(reinterpret_cast<const char *>(data), size);
  std::vector<std::string> parts;
  size_t from = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t nul = input.find('\0', from);
    if (nul == std::string::npos)
      break;
    parts.push_back(input.substr(from, nul - from));
    from = nul + 1;
  }
  parts.push_back(input.substr(from));
  parts.resize(4);

  std::vector<std::string> msi_entries;
  std::istringstream msi_list(parts[1]);
  for (std::string entry; std::getline(msi_list, entry);)
    msi_entries.push_back(entry);
  std::istringstream legacy(parts[2]), proc_interrupts(parts[3]);

  const std::vector<int> irqs = netlatd::irqs_of_interface(parts[0], msi_entries, legacy, proc_interrupts);
  for (size_t i = 0; i < irqs.size(); ++i) {
    if (i > 0 && irqs[i - 1] >= irqs[i])
      nlfuzz::fail("IRQ lines are sorted, without duplicates", std::to_string(irqs[i]));
    std::string digits = std::to_string(irqs[i]);
    if (digits[0] == '-')
      digits.erase(0, 1);
    if (input.find(digits) == std::string::npos)
      nlfuzz::fail("every IRQ line found is a number in the input", std::to_string(irqs[i]));
  }
  return 0;
}
