// rtnetlink link notifications as LinkMonitor::read_events() hands them to
// parse_link_messages(), and the parts of a link dump as dump_links() does
// (the nested IFLA_LINKINFO of a VLAN, IFLA_MASTER, IFLA_LINK_NETNSID, how
// the dump ended): one datagram of at most 16 KiB in a buffer aligned for
// nlmsghdr, any bytes at all. It must never read outside the buffer (ASan),
// a name or kind it reports holds no NUL and fits its attribute, a VLAN id
// belongs to a "vlan", and an error is an errno.
#include <linux/netlink.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "fuzz_check.hpp"
#include "netlatd/net/interface.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // read_events() receives into 16 KiB; a longer datagram is truncated there.
  constexpr size_t kDatagram = 16384;
  if (size > kDatagram)
    return -1;
  // Exactly `size` bytes, so ASan sees a read one byte past the datagram.
  auto *buf = static_cast<uint8_t *>(::operator new(size ? size : 1, std::align_val_t{alignof(nlmsghdr)}));
  if (size)
    std::memcpy(buf, data, size);
  netlatd::LinkBatchEnd end;
  const auto events = netlatd::parse_link_messages(buf, size, &end);
  ::operator delete(buf, std::align_val_t{alignof(nlmsghdr)});
  if (events.size() > size / NLMSG_LENGTH(0))
    nlfuzz::fail("at most one event per message header", std::to_string(events.size()));
  for (const netlatd::LinkEvent &e : events)
    if (e.name.find('\0') != std::string::npos || e.name.size() > size)
      nlfuzz::fail("a link name has no NUL and fits the datagram", e.name);
  for (const netlatd::LinkEvent &e : events) {
    if (e.type.find('\0') != std::string::npos || e.type.size() > size)
      nlfuzz::fail("a link kind has no NUL and fits the datagram", e.type);
    if (e.vlan_id != 0 && e.type != "vlan")
      nlfuzz::fail("a VLAN id only for a link of kind vlan", e.type);
  }
  if (end.error < 0)
    nlfuzz::fail("an error is an errno", std::to_string(end.error));
  return 0;
}
