"""netlatd's JSON lines made from samples, by netlatd's own rules
(docs/OUTPUT.md: 64 buckets a power of two, nearest-rank percentiles at the
bucket's midpoint clamped to [min, max]): the inputs of the report's tests
(make_golden.py, make_scale.py)."""
import json
import math

HOOKS = {
    "irq": ("tp_btf/irq_handler_entry", "tp_btf/softirq_entry"),
    "softirq": ("tp_btf/softirq_entry", "tp_btf/netif_receive_skb"),
    "netif_receive": ("tp_btf/netif_receive_skb", "tp_btf/sk_data_ready|tp_btf/tcp_probe"),
    "sock_queue": ("tp_btf/sk_data_ready|tp_btf/tcp_probe", "tp_btf/sched_switch"),
    "oncpu": ("tp_btf/sched_switch", "tp_btf/sock_recv_length"),
    "in_socket": ("tp_btf/sk_data_ready|tp_btf/tcp_probe", "tp_btf/sock_recv_length"),
    "total": ("tp_btf/softirq_raise", "tp_btf/sock_recv_length"),
}
STAGES = list(HOOKS)
DROPS = ["inflight_full", "order_given_up", "order_lost", "outliers_rate_limited", "output_dropped", "reader_forgotten",
         "ringbuf_full", "sock_fifo_full", "sock_state_failed", "stack_dropped", "tcp_copies", "tcp_gap",
         "tcp_range_unknown", "tcp_read_too_many", "tcp_segs_full", "unjoined_expired", "unjoined_reused", "unread_expired",
         "unseen_read"]


def bucket(v):
    if v < 64:
        return v, v + 1
    k = v.bit_length() - 1
    w = (1 << k) // 64
    lo = (1 << k) + (v - (1 << k)) // w * w
    return lo, lo + w


def stats(samples):
    s = sorted(samples)
    out = {"count": len(s)}
    if not s:
        return out
    def pct(p):
        rank = min(max(math.ceil(p / 100 * len(s) - 1e-9), 1), len(s))
        if rank == 1:
            return s[0]
        if rank == len(s):
            return s[-1]
        lo, hi = bucket(s[rank - 1])
        return min(max(lo + (hi - lo - 1) // 2, s[0]), s[-1])
    buckets = {}
    for v in s:
        buckets[bucket(v)] = buckets.get(bucket(v), 0) + 1
    out.update({"min_ns": s[0], "p50_ns": pct(50), "p90_ns": pct(90), "p99_ns": pct(99), "p999_ns": pct(99.9),
                "max_ns": s[-1], "mean_ns": round(sum(s) / len(s), 1),
                "buckets": [[lo, hi, n] for (lo, hi), n in sorted(buckets.items())]})
    return out


def packet(softirq, netif, queue, oncpu, proto="udp"):
    return {"softirq": softirq, "netif_receive": netif, "sock_queue": queue, "oncpu": oncpu,
            "in_socket": queue + oncpu, "total": 100 + softirq + netif + queue + oncpu, "proto": proto}


def stages_of(packets, hooks):
    out = {}
    for st in STAGES:
        if st == "irq":
            if hooks:
                out[st] = {"hook_start": HOOKS[st][0], "hook_end": HOOKS[st][1], "applicable": False,
                           "why_not": "the interface has no IRQ lines (lo, veth and tun deliver in software)"}
            continue
        o = {"hook_start": HOOKS[st][0], "hook_end": HOOKS[st][1], "applicable": True} if hooks else {}
        o.update(stats([p[st] for p in packets if p.get(st) is not None]))
        out[st] = o
    return out


def interval(start, end, packets, drops, **extra):
    line = {"type": "interval", "schema": 2, "time": end, "start": start, "interval_s": 10.0, "host": "web-1",
            "iface": "lo", "ifindex": 1, "ports": [5000], "kernel": "6.18.0-1-amd64", "version": "0.1.0",
            "packets": len(packets), "udp": sum(p["proto"] == "udp" for p in packets),
            "tcp": sum(p["proto"] == "tcp" for p in packets), "stages": stages_of(packets, True),
            "by": ["dport", "proto"], "breakdown": []}
    for proto in ("tcp", "udp"):
        rows = [p for p in packets if p["proto"] == proto]
        if rows:
            line["breakdown"].append({"dport": 5000, "proto": proto, "packets": len(rows),
                                      "stages": stages_of(rows, False)})
    known = {d: drops.get(d, 0) for d in DROPS}
    newer = {k: v for k, v in drops.items() if k not in DROPS and k not in ("ambiguous_reads", "reader_unknown")}
    line["drops"] = dict(sorted({**known, **newer}.items()))
    line.update({"unordered": 0, "ambiguous_reads": drops.get("ambiguous_reads", 0), "untracked_reads": 0, "early_reads": 0,
                 "queue_unseen": 0, "reader_stamps_far": 0, "tcp_bytes": {"read": 0, "reported": 0, "skipped": 0},
                 "hook_misses": {"tp_btf/sock_recv_length": 0}, "reader_unknown": drops.get("reader_unknown", 0)})
    line.update(extra)
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False)


