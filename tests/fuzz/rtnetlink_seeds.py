#!/usr/bin/env python3
"""Writes the rtnetlink harness's seed corpus from this host's own kernel:
lo's RTM_NEWLINK (from an RTM_GETLINK dump), the same as RTM_DELLINK, a
truncated one, lo's RTM_NEWADDR the parser must skip, and all of them in one
buffer ending in NLMSG_DONE. Only lo, so no host's addresses get committed.
Reads link state; creates nothing. Then the parts of a dump that the lower
devices are read from, laid out here as the kernel lays them out (a kernel
without 8021q or bonding has none to show): a bond slave's IFLA_MASTER, a
VLAN's IFLA_LINK and nested IFLA_LINKINFO/IFLA_INFO_DATA/IFLA_VLAN_ID, a
veth's IFLA_LINK_NETNSID, an NLMSG_ERROR, a part flagged NLM_F_DUMP_INTR.

    tests/fuzz/rtnetlink_seeds.py tests/fuzz/corpus/rtnetlink
"""
import os
import socket
import struct
import sys

NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_DONE, RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK = 3, 16, 17, 18
RTM_GETADDR = 22


def dump(msg_type, body):
    """Every datagram of one dump request, concatenated as the socket gives them."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.sendto(struct.pack("=IHHII", 16 + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body, (0, 0))
    out = b""
    while True:
        data = s.recv(65536)
        out += data
        if struct.unpack_from("=H", data, 4)[0] == NLMSG_DONE:
            return out


def messages(buf):
    off = 0
    while off + 16 <= len(buf):
        length = struct.unpack_from("=I", buf, off)[0]
        yield buf[off:off + length]
        off += (length + 3) & ~3


NLMSG_ERROR, NLM_F_MULTI, NLM_F_DUMP_INTR, NLA_F_NESTED = 2, 0x2, 0x10, 0x8000
IFLA_IFNAME, IFLA_LINK, IFLA_MASTER, IFLA_LINKINFO, IFLA_LINK_NETNSID = 3, 5, 10, 18, 37
IFLA_INFO_KIND, IFLA_INFO_DATA, IFLA_VLAN_ID, IFLA_VLAN_PROTOCOL = 1, 2, 1, 5


def attr(kind, payload):
    data = struct.pack("=HH", 4 + len(payload), kind) + payload
    return data + b"\0" * (-len(data) % 4)


def link_msg(ifindex, name, attrs=b"", flags=NLM_F_MULTI, msg_type=RTM_NEWLINK):
    body = struct.pack("=BxHiII", socket.AF_UNSPEC, 1, ifindex, 0, 0) + attr(IFLA_IFNAME, name + b"\0") + attrs
    return struct.pack("=IHHII", 16 + len(body), msg_type, flags, 1, 0) + body


def kind(name, data=b""):
    inner = attr(IFLA_INFO_KIND, name + b"\0") + (attr(IFLA_INFO_DATA | NLA_F_NESTED, data) if data else b"")
    return attr(IFLA_LINKINFO | NLA_F_NESTED, inner)


def crafted():
    done = struct.pack("=IHHIIi", 20, NLMSG_DONE, NLM_F_MULTI, 1, 0, 0)
    slave = link_msg(2, b"eth0", attr(IFLA_MASTER, struct.pack("=I", 4)))
    bond = link_msg(4, b"bond0", kind(b"bond"))
    vlan_data = attr(IFLA_VLAN_ID, struct.pack("=H", 100)) + attr(IFLA_VLAN_PROTOCOL, struct.pack(">H", 0x8100))
    vlan = link_msg(5, b"eth0.100", attr(IFLA_LINK, struct.pack("=I", 2)) + kind(b"vlan", vlan_data))
    veth = link_msg(6, b"veth0", attr(IFLA_LINK, struct.pack("=I", 9)) + attr(IFLA_LINK_NETNSID, struct.pack("=i", 0))
                    + kind(b"veth"))
    error = struct.pack("=IHHIIi", 36, NLMSG_ERROR, 0, 1, 0, -1) + struct.pack("=IHHII", 32, RTM_GETLINK, 0x301, 1, 0)
    return {
        "dump-stacked": slave + bond + vlan + veth + done,
        "vlan": vlan,
        "veth-netnsid": veth,
        "dump-interrupted": link_msg(1, b"lo", flags=NLM_F_MULTI | NLM_F_DUMP_INTR) + done,
        "error": error,
    }


def main():
    out = sys.argv[1]
    links = dump(RTM_GETLINK, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0))
    first = next(messages(links))  # lo, index 1
    deleted = first[:4] + struct.pack("=H", RTM_DELLINK) + first[6:]
    addrs = dump(RTM_GETADDR, struct.pack("=BBBBI", socket.AF_INET, 0, 0, 0, 0))
    newaddr = next(messages(addrs))
    done = list(messages(links))[-1]
    seeds = {
        "newlink-lo": first,
        "dellink-lo": deleted,
        "batch-until-done": first + newaddr + deleted + done,
        "truncated": first[: len(first) // 2],
        "newaddr": newaddr,
    }
    seeds.update(crafted())
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
