// The devices below a bond or a VLAN, from a dump of the links as rtnetlink
// gives it (src/interface.cpp parse_link_messages, src/watch.cpp
// lower_devices): messages built here with the kernel's own structs and
// alignment, as RTM_GETLINK answers, and the IRQ lines of an interface of
// another namespace found through its bus device (fixture trees of
// tests/unit/fixtures/irq).
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <arpa/inet.h>
#include <net/if_arp.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/net/interface.hpp"
#include "netlatd/net/watch.hpp"
#include "scratch.hpp"

using namespace netlatd;

namespace {

// One netlink datagram, messages appended as the kernel lays them out.
class Datagram {
public:
  // Starts a message; attributes go into it until the next one.
  Datagram &message(uint16_t type, uint16_t flags = NLM_F_MULTI) {
    align();
    start_ = bytes_.size();
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    h.nlmsg_seq = 1;
    put(&h, sizeof(h));
    fix_length();
    return *this;
  }
  Datagram &link(uint16_t type, int ifindex, uint16_t flags = NLM_F_MULTI) {
    message(type, flags);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_type = ARPHRD_ETHER;
    ifi.ifi_index = ifindex;
    put(&ifi, sizeof(ifi));
    fix_length();
    return *this;
  }
  Datagram &attr(uint16_t type, const void *data, size_t len) {
    align();
    rtattr a{};
    a.rta_type = type;
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
    put(&a, sizeof(a));
    put(data, len);
    align();
    fix_length();
    return *this;
  }
  Datagram &str(uint16_t type, const std::string &s) { return attr(type, s.c_str(), s.size() + 1); }
  Datagram &u32(uint16_t type, uint32_t v) { return attr(type, &v, sizeof(v)); }
  // A nested attribute: what is added until end_nest() is inside it.
  Datagram &nest(uint16_t type) {
    align();
    nests_.push_back(bytes_.size());
    rtattr a{};
    a.rta_type = type;
    put(&a, sizeof(a));
    fix_length();
    return *this;
  }
  Datagram &end_nest() {
    const size_t at = nests_.back();
    nests_.pop_back();
    const auto len = static_cast<unsigned short>(bytes_.size() - at);
    std::memcpy(bytes_.data() + at + offsetof(rtattr, rta_len), &len, sizeof(len));
    return *this;
  }
  // RTM_NEWLINK of a link, as a dump gives it.
  Datagram &vlan(int ifindex, const std::string &name, uint32_t real, uint16_t id) {
    link(RTM_NEWLINK, ifindex).str(IFLA_IFNAME, name).u32(IFLA_LINK, real);
    // The kernel marks these nests on newer paths; the parser must not care.
    nest(IFLA_LINKINFO | NLA_F_NESTED).str(IFLA_INFO_KIND, "vlan").nest(IFLA_INFO_DATA);
    attr(IFLA_VLAN_ID, &id, sizeof(id));
    const uint16_t proto = htons(0x8100);
    attr(IFLA_VLAN_PROTOCOL, &proto, sizeof(proto));
    return end_nest().end_nest();
  }
  Datagram &device(int ifindex, const std::string &name, const std::string &kind = "", uint32_t master = 0) {
    link(RTM_NEWLINK, ifindex).str(IFLA_IFNAME, name).u32(IFLA_MTU, 1500);
    if (master)
      u32(IFLA_MASTER, master);
    if (!kind.empty())
      nest(IFLA_LINKINFO).str(IFLA_INFO_KIND, kind).end_nest();
    return *this;
  }
  Datagram &done() {
    const int zero = 0;
    return message(NLMSG_DONE).raw(&zero, sizeof(zero));
  }

  std::vector<LinkEvent> parse(LinkBatchEnd *end = nullptr) {
    // A copy in memory aligned as the socket's buffer is.
    std::vector<nlmsghdr> aligned(bytes_.size() / sizeof(nlmsghdr) + 1);
    std::memcpy(aligned.data(), bytes_.data(), bytes_.size());
    return parse_link_messages(aligned.data(), bytes_.size(), end);
  }
  // A message's fixed header (ifaddrmsg, nlmsgerr) as it is.
  Datagram &raw(const void *p, size_t n) {
    put(p, n);
    fix_length();
    return *this;
  }
  std::vector<char> &bytes() { return bytes_; }

private:
  void put(const void *p, size_t n) {
    const auto *c = static_cast<const char *>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  void align() { bytes_.resize(NLMSG_ALIGN(bytes_.size())); }
  void fix_length() {
    const auto len = static_cast<uint32_t>(bytes_.size() - start_);
    std::memcpy(bytes_.data() + start_, &len, sizeof(len));
  }
  std::vector<char> bytes_;
  size_t start_ = 0;
  std::vector<size_t> nests_;
};

const LinkEvent &named(const std::vector<LinkEvent> &links, const std::string &name) {
  for (const LinkEvent &l : links)
    if (l.name == name)
      return l;
  FAIL("no link " << name);
  return links.front();
}

// A namespace with every kind of device below: two bonds, VLANs over a
// device, over a bond and over a VLAN, a macvlan and a bridge.
std::vector<LinkEvent> stacked_links() {
  Datagram d;
  d.device(1, "lo").device(2, "eth0", "", 5).device(3, "eth1", "", 5).device(4, "eth2").device(5, "bond0", "bond");
  d.vlan(6, "eth2.100", 4, 100).vlan(7, "bond0.7", 5, 7).vlan(8, "eth2.100.5", 6, 5);
  d.link(RTM_NEWLINK, 9).str(IFLA_IFNAME, "macv0").u32(IFLA_LINK, 4);
  d.nest(IFLA_LINKINFO).str(IFLA_INFO_KIND, "macvlan").end_nest();
  d.device(10, "br0", "bridge").device(11, "eth3", "", 10);
  d.device(12, "eth4", "", 13).device(13, "bond1", "bond");
  d.done();
  return d.parse();
}

}  // namespace

TEST_CASE("a link dump parses: name, master, link, kind, VLAN id, the other namespace's link", "[interface][rtnetlink]") {
  Datagram d;
  d.device(1, "lo").device(2, "eth0", "", 5).device(5, "bond0", "bond").vlan(6, "eth0.100", 2, 100);
  // A veth whose peer is in another namespace, and a VLAN moved into this one
  // away from its real device: their IFLA_LINK is an ifindex of there.
  d.link(RTM_NEWLINK, 7).str(IFLA_IFNAME, "veth0").u32(IFLA_LINK, 31);
  const int32_t netnsid = 3;
  d.attr(IFLA_LINK_NETNSID, &netnsid, sizeof(netnsid));
  d.nest(IFLA_LINKINFO).str(IFLA_INFO_KIND, "veth").end_nest();
  d.vlan(8, "moved.9", 2, 9);
  const int32_t zero = 0;
  d.attr(IFLA_LINK_NETNSID, &zero, sizeof(zero));
  // An address message between them is not a link's.
  d.message(RTM_NEWADDR);
  ifaddrmsg ifa{};
  d.raw(&ifa, sizeof(ifa));
  d.link(RTM_NEWLINK, 9);  // no attributes at all
  d.done();
  // After NLMSG_DONE nothing is read.
  d.device(10, "late");

  LinkBatchEnd end;
  const auto links = d.parse(&end);
  CHECK(end.done);
  CHECK(end.error == 0);
  CHECK(!end.interrupted);
  REQUIRE(links.size() == 7);
  CHECK(links[0].ifindex == 1);
  CHECK(links[0].name == "lo");
  CHECK(links[0].type.empty());
  CHECK(links[0].master == 0);
  CHECK(links[0].link == 0);
  CHECK(named(links, "eth0").master == 5);
  CHECK(named(links, "bond0").type == "bond");
  const LinkEvent &v = named(links, "eth0.100");
  CHECK(v.ifindex == 6);
  CHECK(v.type == "vlan");
  CHECK(v.link == 2);
  CHECK(v.vlan_id == 100);
  CHECK(!v.link_netnsid);
  CHECK(named(links, "veth0").link == 31);
  CHECK(named(links, "veth0").link_netnsid == 3);
  CHECK(named(links, "veth0").vlan_id == 0);
  CHECK(named(links, "moved.9").link_netnsid == 0);
  CHECK(links[6].ifindex == 9);
  CHECK(links[6].name.empty());
}

TEST_CASE("a link dump's end: an error, an interrupted dump, short attributes", "[interface][rtnetlink]") {
  SECTION("NLMSG_ERROR carries a negative errno") {
    Datagram d;
    d.message(NLMSG_ERROR, 0);
    nlmsgerr err{};
    err.error = -EPERM;
    d.raw(&err, sizeof(err));
    LinkBatchEnd end;
    CHECK(d.parse(&end).empty());
    CHECK(end.error == EPERM);
    CHECK(!end.done);
  }
  SECTION("NLM_F_DUMP_INTR on any part asks for the dump again") {
    Datagram d;
    d.device(1, "lo").link(RTM_NEWLINK, 2, NLM_F_MULTI | NLM_F_DUMP_INTR).str(IFLA_IFNAME, "eth0").done();
    LinkBatchEnd end;
    CHECK(d.parse(&end).size() == 2);
    CHECK(end.interrupted);
    CHECK(end.done);
  }
  SECTION("an attribute too short for its value gives none") {
    Datagram d;
    const uint8_t one = 7;
    d.link(RTM_NEWLINK, 3).str(IFLA_IFNAME, "v").attr(IFLA_MASTER, &one, 1).attr(IFLA_LINK, &one, 1);
    d.nest(IFLA_LINKINFO).str(IFLA_INFO_KIND, "vlan").nest(IFLA_INFO_DATA).attr(IFLA_VLAN_ID, &one, 1);
    d.end_nest().end_nest().done();
    const auto links = d.parse();
    REQUIRE(links.size() == 1);
    CHECK(links[0].master == 0);
    CHECK(links[0].link == 0);
    CHECK(links[0].type == "vlan");
    CHECK(links[0].vlan_id == 0);
  }
  SECTION("a message cut short ends the walk") {
    Datagram d;
    d.device(1, "lo").device(2, "eth0");
    const auto whole = d.parse();
    REQUIRE(whole.size() == 2);
    d.bytes().resize(d.bytes().size() - 4);
    CHECK(d.parse().size() == 1);
  }
}

TEST_CASE("lower devices: a bond's slaves untagged, a VLAN's real device with its tag, nested, and what is not followed",
          "[watch][rtnetlink]") {
  const auto links = stacked_links();
  std::string problem;
  CHECK(lower_devices(links, "bond0", problem) == std::vector<LowerDevice>{{"eth0", 0}, {"eth1", 0}});
  CHECK(problem.empty());
  CHECK(lower_devices(links, "eth2.100", problem) == std::vector<LowerDevice>{{"eth2", 100}});
  // A VLAN over a bond: the slaves carry the VLAN's tag.
  CHECK(lower_devices(links, "bond0.7", problem) ==
        std::vector<LowerDevice>{{"bond0", 7}, {"eth0", 7}, {"eth1", 7}});
  CHECK(lower_devices(links, "bond1", problem) == std::vector<LowerDevice>{{"eth4", 0}});
  CHECK(lower_devices(links, "eth0", problem).empty());
  CHECK(lower_devices(links, "macv0", problem).empty());  // the lower device carries other traffic too
  CHECK(lower_devices(links, "br0", problem).empty());    // a bridge hands its packets up itself
  CHECK(lower_devices(links, "eth9", problem).empty());   // not there
  CHECK(problem.empty());
  // 802.1ad: two tags; the filter matches one, so nothing below is followed.
  CHECK(lower_devices(links, "eth2.100.5", problem).empty());
  CHECK(problem == "eth2.100 is a VLAN inside a VLAN (802.1ad); netlatd matches one tag");
}

TEST_CASE("lower devices: a VLAN whose real device is in another namespace is not guessed at", "[watch][rtnetlink]") {
  Datagram d;
  // eth0 here has ifindex 2, as the real device there may too.
  d.device(1, "lo").device(2, "eth0").vlan(3, "vlan9", 2, 9);
  const int32_t netnsid = 0;
  d.attr(IFLA_LINK_NETNSID, &netnsid, sizeof(netnsid));
  d.device(4, "bond0", "bond").vlan(5, "vlan8", 2, 8);
  d.attr(IFLA_LINK_NETNSID, &netnsid, sizeof(netnsid));
  d.u32(IFLA_MASTER, 4);
  d.device(6, "eth1", "", 4).done();
  const auto links = d.parse();
  std::string problem;
  CHECK(lower_devices(links, "vlan9", problem).empty());
  CHECK(problem == "the real device of VLAN vlan9 is in another network namespace (netnsid 0)");
  // Below a bond, the whole set is left out: a part would count some of its packets.
  CHECK(lower_devices(links, "bond0", problem).empty());
  CHECK(problem == "the real device of VLAN vlan8 is in another network namespace (netnsid 0)");
}

namespace {

const std::string kFixtures = std::string(NETLATD_SOURCE_DIR) + "/tests/unit/fixtures/irq/";

std::vector<IrqLine> by_bus(const std::string &fixture, const DriverInfo &driver) {
  return find_irq_lines_by_bus(kFixtures + fixture, "eth0", driver,
                               nltest::read_file(kFixtures + fixture + "/interrupts"));
}

}  // namespace

TEST_CASE("another namespace's interface: its IRQ lines through its PCI address", "[interface][irq][netns]") {
  SECTION("e1000: the legacy line") {
    const auto lines = by_bus("e1000", {"e1000", "0000:00:03.0"});
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].irq == 11);
    CHECK(lines[0].counted);
    CHECK(lines[0].name == "eth0");
    CHECK(lines[0].found_by == "/sys/bus/pci/devices/0000:00:03.0/irq");
  }
  SECTION("e1000e: the receive vector of its MSI-X vectors") {
    const auto lines = by_bus("e1000e", {"e1000e", "0000:00:03.0"});
    CHECK(lines.size() == 3);
    CHECK(counted_irqs(lines) == std::vector<int>{24});
    CHECK(lines[0].found_by == "/sys/bus/pci/devices/0000:00:03.0/msi_irqs");
  }
  SECTION("virtio-net: the PCI device's vectors, virtio0 found as the child its driver drives") {
    const auto lines = by_bus("virtio-net", {"virtio_net", "0000:00:03.0"});
    REQUIRE(lines.size() == 3);
    CHECK(counted_irqs(lines) == std::vector<int>{25});
    CHECK(lines[1].name == "virtio0-input.0");
    CHECK(lines[0].role == "device control");
    CHECK(lines[2].role == "transmit only");
  }
  SECTION("no PCI address, or one that is not a device here: no lines") {
    CHECK(by_bus("e1000", {"veth", ""}).empty());
    CHECK(by_bus("e1000", {"bonding", ""}).empty());
    CHECK(by_bus("e1000", {"e1000", "0000:00:09.0"}).empty());
    CHECK(by_bus("e1000", {"e1000", "../../../devices/pci0000:00/0000:00:03.0"}).empty());
    CHECK(by_bus("e1000", {"e1000", ".."}).empty());
    CHECK(by_bus("e1000", {"e1000", "usb-0000:00:14.0-1"}).empty());
  }
}
