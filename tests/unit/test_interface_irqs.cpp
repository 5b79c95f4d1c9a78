// Finding an interface's IRQ lines, against fixture trees of sysfs and
// /proc/interrupts as the NICs in question present them (tests/unit/fixtures/irq:
// e1000, e1000e and virtio-net copied from Debian 6.1/6.12 guests in qemu;
// mlx5, gve, ena, igb-like and an SoC device modelled on their drivers' names).
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/base/errors.hpp"
#include "netlatd/net/interface.hpp"
#include "netlatd/service/options.hpp"
#include "scratch.hpp"

using namespace netlatd;

namespace {

const std::string kFixtures = std::string(NETLATD_SOURCE_DIR) + "/tests/unit/fixtures/irq/";

std::vector<IrqLine> lines_of(const std::string &fixture, const std::string &ifname,
                              const std::string &interrupts_from = "") {
  const std::string root = kFixtures + fixture;
  return find_irq_lines(root, ifname, nltest::read_file(kFixtures + (interrupts_from.empty() ? fixture : interrupts_from) +
                                                "/interrupts"));
}

const IrqLine &line(const std::vector<IrqLine> &lines, int irq) {
  for (const IrqLine &l : lines) {
    if (l.irq == irq)
      return l;
  }
  FAIL("no IRQ line " << irq);
  return lines.front();
}

std::vector<int> irqs_of(const std::vector<IrqLine> &lines) {
  std::vector<int> irqs;
  for (const IrqLine &l : lines)
    irqs.push_back(l.irq);
  return irqs;
}

}  // namespace

TEST_CASE("e1000: the legacy line from device/irq", "[interface][irq]") {
  auto lines = lines_of("e1000", "eth0");
  REQUIRE(irqs_of(lines) == std::vector<int>{11});
  CHECK(line(lines, 11).name == "eth0");
  CHECK(line(lines, 11).found_by == "/sys/class/net/eth0/device/irq");
  CHECK(line(lines, 11).counted);
  CHECK(line(lines, 11).role == "the device's line");
}

TEST_CASE("e1000e: the receive vector counts, not transmit nor other causes", "[interface][irq]") {
  auto lines = lines_of("e1000e", "eth0");
  // device/irq holds the unused INTx line 11: not a line of this device while it uses MSI-X.
  REQUIRE(irqs_of(lines) == std::vector<int>{24, 25, 26});
  CHECK(counted_irqs(lines) == std::vector<int>{24});
  CHECK(line(lines, 24).role == "receive");
  CHECK(line(lines, 25).role == "transmit only");
  CHECK(line(lines, 26).role == "other causes (link, errors)");
  CHECK(line(lines, 26).name == "eth0");
  for (const IrqLine &l : lines)
    CHECK(l.found_by == "/sys/class/net/eth0/device/msi_irqs");
}

TEST_CASE("virtio-net: the vectors of the PCI parent of virtio0", "[interface][irq]") {
  auto lines = lines_of("virtio-net", "eth0");
  REQUIRE(irqs_of(lines) == std::vector<int>{24, 25, 26});
  CHECK(counted_irqs(lines) == std::vector<int>{25});
  CHECK(line(lines, 25).name == "virtio0-input.0");
  CHECK(line(lines, 25).found_by == "/sys/class/net/eth0/device/../msi_irqs");
  CHECK(line(lines, 24).role == "device control");
  CHECK(line(lines, 26).role == "transmit only");
}

TEST_CASE("mlx5-like: completion vectors of this port only, async events left out", "[interface][irq]") {
  auto port0 = lines_of("mlx5", "enp59s0f0np0");
  REQUIRE(irqs_of(port0) == std::vector<int>{120, 121, 122, 123, 124});
  CHECK(counted_irqs(port0) == std::vector<int>{121, 122, 123, 124});
  CHECK(line(port0, 120).role == "device control");
  CHECK(line(port0, 122).name == "mlx5_comp1@pci:0000:3b:00.0");
  CHECK(line(port0, 122).role == "queue, direction not named");
  auto port1 = lines_of("mlx5", "enp59s0f1np1");
  CHECK(counted_irqs(port1) == std::vector<int>{126, 127, 128, 129});
}

TEST_CASE("gve, ena and TxRx vectors; a name alone is not a line", "[interface][irq]") {
  auto gve = lines_of("cloud", "ens4");
  CHECK(counted_irqs(gve) == std::vector<int>{41, 42});
  CHECK(line(gve, 40).role == "device control");
  auto ena = lines_of("cloud", "ens5");
  CHECK(counted_irqs(ena) == std::vector<int>{51, 52});
  CHECK(line(ena, 51).name == "ena-net-io-0");
  auto txrx = lines_of("cloud", "eth2");
  CHECK(counted_irqs(txrx) == std::vector<int>{60, 61});
  CHECK(line(txrx, 60).role == "receive and transmit");
  CHECK(line(txrx, 62).role == "other causes (link, errors)");
  // eth20-TxRx-0 and veth2 are not eth2's; ens6 has no device, so the
  // ens6-rx-0 line is another namespace's interface of that name.
  CHECK(lines_of("cloud", "ens6").empty());
  CHECK(lines_of("cloud", "nosuch0").empty());
}

TEST_CASE("a device without IRQ files in sysfs: lines named after it", "[interface][irq]") {
  auto lines = lines_of("platform", "eth0");
  REQUIRE(irqs_of(lines) == std::vector<int>{24, 35});
  CHECK(line(lines, 35).found_by == "/proc/interrupts");
  CHECK(line(lines, 35).counted);
  CHECK(line(lines, 35).role == "the device's line");
  // The shared line's handler named after the interface is the one shown.
  CHECK(line(lines, 24).name == "eth0:wol");
  CHECK(line(lines, 24).role == "device control");
}

TEST_CASE("/proc/interrupts: odd lines are skipped, never thrown on", "[interface][irq]") {
  auto table = parse_proc_interrupts(nltest::read_file(kFixtures + "odd/interrupts"));
  std::vector<int> irqs;
  for (const InterruptsLine &l : table)
    irqs.push_back(l.irq);
  CHECK(irqs == std::vector<int>{24, 25, 26, 28, 30, 31, 32, 29});
  CHECK(table[0].actions.empty());
  CHECK(table[2].chip == "PCI-MSIX-0000:00:03.0");
  CHECK(table[2].actions.empty());
  CHECK(table[3].chip == "IO-APIC-fasteoi");  // 3.x: chip and flow in one word
  CHECK(table[3].actions == std::vector<std::string>{"eth0-rx-2"});
  CHECK(table[4].actions == std::vector<std::string>{"eth0-rx-4", "uhci_hcd:usb1"});
  CHECK(table[5].actions == std::vector<std::string>{"eth0-rx-5"});
  CHECK(table[6].actions.at(0).size() == 5000);
  CHECK(table[7].actions == std::vector<std::string>{"eth0-rx-3"});

  // Whatever the text says, the device's own vectors are its lines.
  auto lines = lines_of("e1000e", "eth0", "odd");
  CHECK(irqs_of(lines) == std::vector<int>{24, 25, 26});
  CHECK(counted_irqs(lines) == std::vector<int>{24, 25, 26});
  CHECK(line(lines, 24).role == "not named in /proc/interrupts");
  CHECK(find_irq_lines(kFixtures + "e1000e", "eth0", "").size() == 3);
  CHECK(parse_proc_interrupts("").empty());
  CHECK(parse_proc_interrupts(std::string("\0\0 7:\0", 6)).empty());
}

TEST_CASE("arm64 and shared lines parse", "[interface][irq]") {
  auto table = parse_proc_interrupts(nltest::read_file(kFixtures + "platform/interrupts"));
  REQUIRE(table.size() == 4);
  CHECK(table[0].chip == "GICv3");
  CHECK(table[0].actions == std::vector<std::string>{"arch_timer"});
  CHECK(table[1].actions == std::vector<std::string>{"mmc0", "eth0:wol"});
  auto mlx = parse_proc_interrupts(nltest::read_file(kFixtures + "mlx5/interrupts"));
  CHECK(mlx.at(3).actions == std::vector<std::string>{"PCIe PME", "pciehp"});
}

TEST_CASE("the lines --irq gives are all counted", "[interface][irq][cli]") {
  CHECK(parse_irq_list("24,25") == std::vector<int>{24, 25});
  CHECK(parse_irq_list("27-29,24,28") == std::vector<int>{24, 27, 28, 29});
  CHECK(parse_irq_list("0") == std::vector<int>{0});
  auto given = irq_lines_given({25, 31}, nltest::read_file(kFixtures + "e1000e/interrupts"));
  CHECK(counted_irqs(given) == std::vector<int>{25, 31});
  CHECK(given[0].found_by == "--irq");
  CHECK(given[0].name == "eth0-tx-0");
  CHECK(given[1].name.empty());
  auto rows = describe_irq_lines(lines_of("virtio-net", "eth0"));
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].rfind("irq 25    counted      receive", 0) == 0);
  CHECK(rows[1].find("virtio0-input.0") != std::string::npos);
  CHECK(rows[1].find("/sys/class/net/eth0/device/../msi_irqs") != std::string::npos);
}
