"""Checks on netlatd's per-packet timelines in a vm tier phase ("type":"outlier",
one per packet because the tier runs netlatd with --outliers-over 1ns), and
the table of stages the tier prints."""
import datetime

from vm_guest import log

# The order of the instants along the receive path (the timelines' names;
# read_start is derived by the daemon). The reader's switch_in and
# call_start are not on the path: they may come before the packet.
STAMP_ORDER = ("irq", "softirq_raise", "softirq_entry", "netif_receive_skb", "sock_queue",
               "wakeup", "read_start", "copy", "recv_return", "syscall_exit")


def stamp_ns(iso):
    """A timeline stamp (2026-11-22T09:35:07.226276630Z) in nanoseconds since the epoch."""
    date, clock = iso.rstrip("Z").split("T", 1)
    h, m, rest = clock.split(":")
    sec, _, frac = rest.partition(".")
    day = (datetime.date.fromisoformat(date) - datetime.date(1970, 1, 1)).days
    return (((day * 24 + int(h)) * 60 + int(m)) * 60 + int(sec)) * 10**9 + int(frac.ljust(9, "0")[:9])


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def percentile(values, q):
    """The q-th percentile (nearest rank) of a non-empty list."""
    values = sorted(values)
    return values[min(len(values) - 1, max(0, -(-len(values) * q // 100) - 1))]


def print_stage_table(intervals, timelines, counts, hooks, applicable, packets, udp, tcp):
    """The guest's stages in one table: counts from the interval lines,
    percentiles from the per-packet timelines (exact, every packet)."""
    durations = {}
    for t in timelines:
        for name, ns in (t.get("stages") or {}).items():
            durations.setdefault(name, []).append(ns)
    names = list(intervals[-1].get("stages") or {}) if intervals else []
    log(f"stages in the guest ({packets} packets: {udp} UDP, {tcp} TCP):")
    log(f"  {'stage':<14}{'count':>7}{'p50 us':>10}{'p99 us':>10}{'max us':>10}  hooks (start -> end)")
    for name in names:
        d = durations.get(name)
        pct = (f"{percentile(d, 50) / 1e3:>10.1f}{percentile(d, 99) / 1e3:>10.1f}{max(d) / 1e3:>10.1f}"
               if d else f"{'-':>10}{'-':>10}{'-':>10}")
        start, end = hooks.get(name, (None, None))
        what = f"{start} -> {end}" if applicable.get(name) else "not applicable"
        log(f"  {name:<14}{counts.get(name, 0):>7}{pct}  {what}")


def judge_timelines(v, netlatd_args, timelines, got, packets, drops, unseen):
    """Checks on the per-packet timelines ("type":"outlier", every packet
    because the test sets --outliers-over 1ns): the bytes netlatd attributes
    to packets must be the bytes the application read, every packet's stamps
    follow the receive path's order, and when a stage count falls short they
    say which packets lack which stamp."""
    if not timelines:
        # Only when --netlatd-args replaced the default (debugging).
        v.check("--outliers-over" not in netlatd_args, "per-packet timelines in the output")
        return
    unordered = []
    for t in timelines:
        offsets = t.get("offsets_ns") or {}
        seq = [offsets[s] for s in STAMP_ORDER if s in offsets]
        if any(b < a for a, b in zip(seq, seq[1:])):
            unordered.append(offsets)
    v.check(not unordered, f"every timeline's stamps in path order ({len(unordered)} not"
            + (f", first: {unordered[0]}" if unordered else "") + ")")
    # One reader thread reads the UDP socket, so the read order is the
    # socket queue's order, and one NIC queue (NAPI runs on one CPU at a
    # time) queues one datagram after the other: a datagram's sock_queue
    # stamp before that of the one read ahead of it belongs to another.
    udp = sorted((t for t in timelines if t.get("proto") == "udp" and "sock_queue" in t.get("stamps", {})
                  and "recv_return" in t.get("stamps", {})),
                 key=lambda t: stamp_ns(t["stamps"]["recv_return"]))
    inversions = []
    for prev, t in zip(udp, udp[1:]):
        back = stamp_ns(prev["stamps"]["sock_queue"]) - stamp_ns(t["stamps"]["sock_queue"])
        if back > 0:
            inversions.append(f"{back / 1e3:.1f} us (woken {prev.get('woken')}->{t.get('woken')})")
    v.check(not inversions, f"UDP sock_queue stamps follow the socket's queue order "
            f"({len(inversions)} earlier than the datagram ahead{': ' + ', '.join(inversions[:5]) if inversions else ''})")
    v.check(drops.get("outliers_rate_limited", 0) == 0 and len(timelines) == packets,
            f"one timeline per packet ({len(timelines)} for {packets})")
    # Each UDP record is of the datagram the application read at that point,
    # and its receive return falls inside the recvfrom() call that read it:
    # the i-th record in read order against nlrx's i-th read (its length and
    # CLOCK_REALTIME before and after the call). The daemon turns monotonic
    # stamps into wall time with an offset read from two clocks; 1 ms covers
    # that, while a record stamped by the next call is one datagram (2 ms) late.
    reads = got.get("udp_reads") or []
    reads = reads[unseen:]
    recorded = sorted((t for t in timelines if t.get("proto") == "udp" and "recv_return" in t.get("stamps", {})),
                      key=lambda t: stamp_ns(t["stamps"]["recv_return"]))
    lens_rec, lens_read = [t.get("len") for t in recorded], [r[0] for r in reads]
    v.check(lens_rec == lens_read, "UDP records are of the datagrams read, in order"
            + ("" if lens_rec == lens_read else f" (first difference at #{first_difference(lens_rec, lens_read)}:"
               f" recorded {lens_rec[:6]}..., read {lens_read[:6]}...)"))
    tol = 1_000_000
    outside = []
    for i, (t, (_, before, after)) in enumerate(zip(recorded, reads)):
        ret = stamp_ns(t["stamps"]["recv_return"])
        if not before - tol <= ret <= after + tol:
            outside.append(f"#{i} {(ret - after) / 1e3:+.0f} us")
    v.check(not outside, f"every UDP record's recv_return inside the call that read it "
            f"({len(outside)} not{': ' + ', '.join(outside[:6]) if outside else ''})")
    for proto in ("udp", "tcp"):
        nbytes = sum(t.get("len", 0) for t in timelines if t.get("proto") == proto)
        want = int(got.get(f"{proto}_bytes", -1))
        if proto == "udp" and unseen:
            want -= sum(r[0] for r in (got.get("udp_reads") or [])[:unseen])
        v.check(nbytes == want, f"{proto} payload bytes in timelines {nbytes} == bytes nlrx read {want}"
                + (" (without the unmeasured first datagram)" if proto == "udp" and unseen else ""))
    judge_untimed_switch_in(v, timelines)
    report_missing_stamps(timelines)


def judge_untimed_switch_in(v, timelines):
    """A read whose reader was on CPU from before its call, its switch-in
    not timed (on_cpu_before_call: a task's first read, sched_switch reads
    no clock for a task without storage): no switch_in stamp, the call's
    start known, and the read starting at the later of the call's start
    and the queueing."""
    flagged = [t for t in timelines if t.get("on_cpu_before_call")]
    log(f"reads on CPU from before their call, switch-in not timed: {len(flagged)}")
    wrong = []
    for t in flagged:
        st = t.get("stamps") or {}
        if "switch_in" in st or "call_start" not in st:
            wrong.append(f"stamps {sorted(st)}")
        elif "sock_queue" in st:
            want = max(stamp_ns(st["call_start"]), stamp_ns(st["sock_queue"]))
            if "read_start" not in st or stamp_ns(st["read_start"]) != want:
                wrong.append(f"read_start {st.get('read_start')} for call_start {st['call_start']}, "
                             f"sock_queue {st['sock_queue']}")
    v.check(not wrong, f"reads with an untimed switch-in have a call start and start at it or the queueing "
            f"({len(wrong)} not{': ' + '; '.join(wrong[:3]) if wrong else ''})")


def report_missing_stamps(timelines):
    """When a stage count falls short: which packets lack which stamp, and
    in what circumstances (ksoftirqd, woken, same CPU)."""
    shapes = {}
    for t in timelines:
        missing = tuple(s for s in ("irq", "softirq_entry", "netif_receive_skb", "sock_queue",
                                    "read_start", "recv_return") if s not in (t.get("stamps") or {}))
        if missing:
            key = (t.get("proto"), missing, f"ksoftirqd={t.get('ksoftirqd')}",
                   f"woken={t.get('woken')}", f"same_cpu={t.get('rx_cpu') == t.get('reader_cpu')}")
            shapes[key] = shapes.get(key, 0) + 1
    for key, n in sorted(shapes.items(), key=lambda kv: -kv[1]):
        log(f"packets lacking stamps: {n} x {key[0]} missing {','.join(key[1])} "
            + " ".join(key[2:]))
