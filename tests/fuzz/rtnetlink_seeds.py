#!/usr/bin/env python3
"""Writes the rtnetlink harness's seed corpus from this host's own kernel:
lo's RTM_NEWLINK (from an RTM_GETLINK dump), the same as RTM_DELLINK, a
truncated one, lo's RTM_NEWADDR the parser must skip, and all of them in one
buffer ending in NLMSG_DONE. Only lo, so no host's addresses get committed.
Reads link state; creates nothing.

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
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
