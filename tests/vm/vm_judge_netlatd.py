"""Judging netlatd's output in a vm tier phase whose traffic the host sends,
against what nlrx read: its exit, its counts and stages, the verifier's walk,
the hooks it chose on 6.1, and a busy-polling reader's datagrams. Also the
JSON records and their sums, which vm_judge_veth.py and vm_phases.py read
too. Per-packet timeline checks are in vm_timelines.py."""
import collections
import json
import re

from vm_guest import log
from vm_judge import marker, section
from vm_timelines import judge_timelines, print_stage_table

# Stages whose count must equal the number of packets netlatd reported.
# The guests' kernels have fentry: every read's call start is known, so
# sock_queue and oncpu are as exact as the others (but for a call begun
# before netlatd attached: read_begun_before_attach).
EXACT_STAGES = ("softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total")
READ_START_STAGES = ("sock_queue", "oncpu")
# Tracepoints that do not exist on 6.1 (added in 6.3 and 6.5).
ABSENT_ON_61 = ("tp_btf/sk_data_ready", "tp_btf/sock_recv_length")


def json_records(v, lines):
    records = []
    json_lines, _ = section(lines, "JSON")
    for l in json_lines or []:
        if not l.strip():
            continue
        try:
            records.append(json.loads(l))
        except json.JSONDecodeError as e:
            v.check(False, f"JSON line parses ({e}): {l[:120]}")
    return records


def sum_over(intervals, key):
    """Per-name sums of a dict member ("drops") over the interval lines."""
    total = {}
    for r in intervals:
        for k, n in (r.get(key) or {}).items():
            total[k] = total.get(k, 0) + n
    return total


def stage_summary(intervals):
    counts, hooks, applicable = {}, {}, {}
    for r in intervals:
        for name, s in (r.get("stages") or {}).items():
            counts[name] = counts.get(name, 0) + s.get("count", 0)
            hooks.setdefault(name, (s.get("hook_start"), s.get("hook_end")))
            applicable.setdefault(name, s.get("applicable"))
    return counts, hooks, applicable


def unmeasured_first_read(v, intervals, udp, udp_rx, reader_first):
    """With the receiver started first, its UDP thread sits in recvfrom() when
    netlatd attaches. Where the receive return is an fexit (6.1) that call's
    return cannot be seen: netlatd may miss that one datagram, the first,
    and must say so in its drop counters; every other one must be exact.
    (Where it is a tracepoint the call's return is seen like any other.)"""
    recv_hook = next((r["stages"]["oncpu"].get("hook_end", "") for r in intervals
                      if "oncpu" in (r.get("stages") or {})), "")
    if not (reader_first and recv_hook.startswith("fexit/") and udp == udp_rx - 1):
        return 0
    log("the datagram the receiver was already waiting for at attach was not measured "
        "(its recvfrom() began before the fexit existed)")
    v.check(sum_over(intervals, "drops").get("unseen_read", 0) == 1,
            "netlatd counted the datagram it could not measure as unseen_read")
    return 1


def read_begun_before_attach(udp_timelines, reader_first):
    """With the receiver started first, its UDP thread sits in recvfrom() when
    netlatd attaches, and that call's start (fentry/sock_recvmsg) is never
    seen. Where the return is a tracepoint, the call's datagram (the first
    read) is recorded, right, and its read start is known only if the wake-up
    that ended the call was tied to the socket; a CI run at 1682ed5 had one
    (6.12 e1000e: woken false, a switch-in but no call start), and netlatd
    leaves a read start it cannot tie out. So the first datagram's record,
    and only it, may lack sock_queue and oncpu. Returns 1 when it does."""
    if not reader_first or not udp_timelines:
        return 0
    first = min(udp_timelines, key=lambda t: (t.get("stamps_mono_ns") or {}).get("recv_return", 0))
    lacks = "oncpu" not in (first.get("stages") or {})
    if lacks and "call_start" not in (first.get("stamps_mono_ns") or {}):
        log("the first datagram's read began before netlatd attached: its read start is unknown")
        return 1
    return 0


def judge_verifier_walk(v, lines):
    """The start line names the program the guest's verifier walked most:
    it must leave 40% of the 1M-instruction budget free, on this kernel's
    verifier as on the host's (the service test checks the host's)."""
    stderr, _ = section(lines, "NETLATD-STDERR")
    walked = None
    for l in stderr or []:
        m = re.search(r"most walked: (\w+), (\d+) instructions", l)
        if m:
            walked = (m.group(1), int(m.group(2)))
    v.check(walked is not None, "the start line names the most walked program")
    if walked:
        log(f"verifier: most walked {walked[0]}, {walked[1]} instructions")
        v.check(walked[1] <= 600_000, f"{walked[0]} walked {walked[1]} of the verifier's 1,000,000 (at most 600,000)")


def judge_netlatd(v, lines, got, guest, reader_first, netlatd_args, stats, busy_poll=None):
    """netlatd's output in one phase against what nlrx read. Fills `stats`
    with the figures the tier reports (irq coverage, unordered). `busy_poll`:
    the reader busy polled, and the kernel received this many packets in
    busy polls (BusyPollRxPackets), with no IRQ or softirq."""
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")
    judge_verifier_walk(v, lines)
    records = json_records(v, lines)
    intervals = [r for r in records if r.get("type") == "interval"]
    v.check(len(intervals) >= 1, f"{len(intervals)} interval lines")
    if not intervals:
        return
    v.check(intervals[-1].get("final") is True, "the last interval line has \"final\":true")
    packets, udp, tcp = (sum(r.get(k, 0) for r in intervals) for k in ("packets", "udp", "tcp"))
    udp_rx = int(got.get("udp_datagrams", -1))
    log(f"netlatd: packets={packets} udp={udp} tcp={tcp}")
    unseen = unmeasured_first_read(v, intervals, udp, udp_rx, reader_first)
    v.check(udp == udp_rx - unseen, f"netlatd UDP packets {udp} == datagrams nlrx received {udp_rx}"
            + (f" - {unseen} read by a call begun before netlatd attached" if unseen else ""))
    v.check(tcp >= 1, f"netlatd saw TCP packets ({tcp})")
    # A recv() with a 64 KiB buffer consumes at least one whole skb, so there
    # are at least as many TCP packets as reads.
    tcp_reads = int(got.get("tcp_reads", 0))
    v.check(tcp >= tcp_reads, f"netlatd TCP packets {tcp} >= nlrx TCP reads {tcp_reads}")
    v.check(packets == udp + tcp, f"packets {packets} == udp + tcp {udp + tcp}")

    unordered = sum(r.get("unordered", 0) for r in intervals)
    v.check(unordered == 0, f"no unordered records ({unordered})")
    drops = sum_over(intervals, "drops")
    log(f"drops: {drops}")
    counts, hooks, applicable = stage_summary(intervals)
    timelines = [r for r in records if r.get("type") == "outlier"]
    print_stage_table(intervals, timelines, counts, hooks, applicable, packets, udp, tcp)
    stats.update(packets=packets, irq=counts.get("irq", 0), unordered=unordered)
    v.check(applicable.get("irq") is True, f"irq stage is applicable on {guest['driver']}")
    udp_timelines = [t for t in timelines if t.get("proto") == "udp"]
    stats.update(datagrams=len(udp_timelines),
                 datagrams_irq=sum("irq" in (t.get("stamps") or {}) for t in udp_timelines))
    if busy_poll:
        judge_busy_polled(v, udp_timelines, counts, packets, busy_poll, stats)
        judge_timelines(v, netlatd_args, timelines, got, packets, drops, unseen)
        return
    v.check(counts.get("irq", 0) >= 0.95 * packets and packets > 0,
            f"irq stage count {counts.get('irq', 0)} >= 95% of {packets} packets")
    begun = read_begun_before_attach(udp_timelines, reader_first)
    for name in EXACT_STAGES:
        want = packets - begun if name in READ_START_STAGES else packets
        v.check(counts.get(name) == want, f"{name} stage count {counts.get(name)} == {want}"
                + (" (the first read began before netlatd attached)" if want != packets else ""))
    judge_timelines(v, netlatd_args, timelines, got, packets, drops, unseen)
    if udp_timelines:
        v.check(stats["datagrams_irq"] >= 0.95 * len(udp_timelines),
                f"irq stamped for {stats['datagrams_irq']} >= 95% of {len(udp_timelines)} UDP datagrams")
    if guest["series"] == "6.1":
        judge_61_hooks(v, hooks)


def judge_busy_polled(v, udp_timelines, counts, packets, busy_rx, stats):
    """Datagrams a busy-polling reader received in its own call: no interrupt
    and no NET_RX softirq led to them, so none may carry an irq, raise or
    softirq stamp (it would be another packet's). Those without a softirq
    stamp are most of the datagrams (the kernel's BusyPollRxPackets is not a
    bound: the poll that ends a busy poll receives packets it does not count);
    the stages from netif_receive_skb on are every packet's."""
    kinds = collections.Counter(tuple(sorted((t.get("stamps") or {}).keys())) for t in udp_timelines)
    log("busypoll: UDP timelines by stamps: " + "; ".join(f"{n} x {' '.join(k)}" for k, n in kinds.most_common()))
    polled = [t for t in udp_timelines if "softirq_entry" not in (t.get("stamps") or {})]
    stats.update(busy_polled=len(polled))
    v.check(len(polled) >= 0.5 * len(udp_timelines) > 0,
            f"UDP datagrams with no softirq (busy polled) {len(polled)}: at least half of {len(udp_timelines)} "
            f"(the kernel's BusyPollRxPackets: {busy_rx})")
    stray = [t for t in polled if {"irq", "softirq_raise"} & set((t.get("stamps") or {}).keys())]
    v.check(not stray, f"no busy-polled datagram with an irq or raise stamp ({len(stray)} have one)")
    for name in ("netif_receive", "sock_queue", "oncpu", "in_socket", "total"):
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")


def judge_61_hooks(v, hooks):
    # "a|b" names both hooks of a stage end (UDP|TCP).
    used = {h for pair in hooks.values() for side in pair if side for h in side.split("|")}
    for h in ABSENT_ON_61:
        v.check(h not in used, f"hook {h} not chosen on 6.1")
    # Where 6.1 lacks the tracepoints, the enqueue (netif_receive's end) and
    # the receive return (oncpu's end) must come from function hooks.
    func = re.compile(r"^(fentry|fexit|kprobe|kretprobe)/")
    enqueue = (hooks.get("netif_receive", (None, None))[1] or "").split("|")
    recv_return = (hooks.get("oncpu", (None, None))[1] or "").split("|")
    v.check(any(func.match(h) for h in enqueue), f"enqueue hook is a function hook on 6.1 ({enqueue})")
    v.check(all(func.match(h) for h in recv_return),
            f"receive-return hook is a function hook on 6.1 ({recv_return})")
    sock_hooks = hooks.get("sock_queue", (None, None))
    v.check(all(sock_hooks), f"sock_queue hooks named {sock_hooks}")
