#!/usr/bin/env python3
"""A day of netlatd output for the report's scale check: N 10-second interval
lines (default 8,640) with a daily swell in sock_queue and a few bad minutes,
and M outlier lines (default 100,000) spread over the day, plus a truncated
line. Deterministic (seeded).

    tests/page/make_scale.py OUT.jsonl [INTERVALS [OUTLIERS]]"""
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlatd_lines import interval, packet  # noqa: E402

T0 = 1795860000  # 2026-11-28T10:00:00Z


def stamp(t):
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(t))) + ".%03dZ" % int(round((t % 1) * 1000))


def packets(rng, i, n):
    swell = 1 + 3 * math.sin(math.pi * i / 8640) ** 2  # busier mid-day
    bad = 1 + 40 * (4000 <= i < 4030)  # a bad five minutes
    out = []
    for k in range(n):
        q = int(rng.lognormvariate(math.log(9000 * swell * bad), 0.6))
        out.append(packet(int(rng.lognormvariate(7.2, 0.2)), int(rng.lognormvariate(8.0, 0.25)), q,
                          int(rng.lognormvariate(7.7, 0.3)), "tcp" if k % 4 == 0 else "udp"))
    return out


def outlier(rng, t):
    stages = {"softirq": int(rng.lognormvariate(7.5, 0.5)), "netif_receive": int(rng.lognormvariate(8.2, 0.4)),
              "sock_queue": int(rng.lognormvariate(11.5, 1.0)), "oncpu": int(rng.lognormvariate(8.0, 0.6))}
    offs, at = {"softirq_raise": 0, "softirq_entry": 100}, 100
    for st, stamp_name in (("softirq", "netif_receive_skb"), ("netif_receive", "sock_queue"),
                           ("sock_queue", "read_start")):
        at += stages[st]
        offs[stamp_name] = at
    offs["switch_in"] = offs["read_start"]
    offs["recv_return"] = at + stages["oncpu"]
    stages["in_socket"] = stages["sock_queue"] + stages["oncpu"]
    stages["total"] = offs["recv_return"]
    tid = 4000 + rng.randrange(8)
    return json.dumps({
        "type": "outlier", "schema": 2, "time": stamp(t), "host": "web-1", "iface": "lo", "ports": [5000],
        "dport": 5000, "proto": rng.choice(["udp", "tcp"]), "family": "ipv4", "len": 512,
        "total_ns": stages["total"], "sport": 40000 + rng.randrange(1000),
        "stamps": {k: stamp(t) for k in offs}, "stamps_mono_ns": {k: 8123456789000 + v for k, v in offs.items()},
        "offsets_ns": offs, "stages": stages, "rx_cpu": rng.randrange(2), "ksoftirqd": rng.random() < 0.1,
        "reader_cpu": rng.randrange(2), "reader_pid": 4000, "reader_tid": tid, "reader_comm": "worker-%d" % (tid - 4000),
        "woken": True, "slept_in_call": True}, separators=(",", ":"))


def main():
    out, n_int = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8640
    n_out = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
    rng = random.Random(34)
    with open(out, "w") as f:
        for i in range(n_int):
            t = T0 + 10 * i
            drops = {"stack_dropped": rng.randrange(3) if rng.random() < 0.05 else 0,
                     "ringbuf_full": 50 if 4000 <= i < 4010 else 0}
            f.write(interval(stamp(t), stamp(t + 10), packets(rng, i, 40), drops) + "\n")
            per = (i + 1) * n_out // n_int - i * n_out // n_int
            for k in range(per):
                f.write(outlier(rng, t + 10 * k / per) + "\n")
        f.write('{"type":"interval","schema":2,"time":"2026-11-2\n')


main()
