"""Judging a vm tier guest's console: the boot, netlatd --check and its IRQ
lines, the receiver, and netlatd's output in each phase. Per-packet
timeline checks are in vm_timelines.py."""
import collections
import json
import re

from vm_guest import MARK, log
from vm_timelines import judge_timelines, print_stage_table

CRASH_RE = re.compile(r"\bBUG:|Oops|Kernel panic|general protection fault|kernel BUG at")
# Stages whose count must equal the number of packets netlatd reported.
# The guests' kernels have fentry: every read's call start is known, so
# sock_queue and oncpu are as exact as the others (but for a call begun
# before netlatd attached: read_begun_before_attach).
EXACT_STAGES = ("softirq", "netif_receive", "sock_queue", "oncpu", "in_socket", "total")
READ_START_STAGES = ("sock_queue", "oncpu")
# Tracepoints that do not exist on 6.1 (added in 6.3 and 6.5).
ABSENT_ON_61 = ("tp_btf/sk_data_ready", "tp_btf/sock_recv_length")
# A row of --check's IRQ lines: "irq 25    counted      receive    virtio0-input.0    /sys/..."
IRQ_ROW_RE = re.compile(r"^\s*irq (\d+)\s+(counted|not counted)\s+(.*\S)\s+(\S+)\s+(\S+)$")


class Verdict:
    def __init__(self):
        self.failures = []
        self.prefix = ""

    def check(self, ok, what):
        what = self.prefix + what
        log(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            self.failures.append(what)


def section(lines, name):
    """Console lines between '@@NLVM NAME-BEGIN' and '@@NLVM NAME-END...'."""
    begin = None
    for i, line in enumerate(lines):
        if line == f"{MARK}{name}-BEGIN":
            begin = i
        elif begin is not None and line.startswith(f"{MARK}{name}-END"):
            return lines[begin + 1:i], line
    return None, None


def marker(lines, name):
    for line in lines:
        if line.startswith(MARK + name):
            return line[len(MARK + name):].strip()
    return None


def phase_lines(lines, phase):
    """The console lines of one phase (empty if it never began)."""
    out, inside = [], False
    for line in lines:
        if line.startswith(f"{MARK}PHASE-BEGIN {phase} ") or line == f"{MARK}PHASE-BEGIN {phase}":
            inside = True
        elif line.startswith(f"{MARK}PHASE-END {phase}"):
            break
        elif inside:
            out.append(line)
    return out


def irq_counts(lines):
    """{irq: interrupts summed over CPUs} from a copy of /proc/interrupts."""
    counts = {}
    for line in lines or []:
        m = re.match(r"^\s*(\d+):((?:\s+\d+)+)", line)
        if m:
            counts[int(m.group(1))] = sum(int(x) for x in m.group(2).split())
    return counts


def check_irq_lines(lines):
    """The IRQ lines netlatd --check listed: [{irq, counted, role, name, found_by}]."""
    rows = []
    for line in lines or []:
        m = IRQ_ROW_RE.match(line)
        if m:
            rows.append(dict(irq=int(m.group(1)), counted=m.group(2) == "counted", role=m.group(3),
                             name=m.group(4), found_by=m.group(5)))
    return rows


def judge_boot(v, lines, guest, with_netlatd):
    """The boot as a whole; returns the IRQ lines --check found."""
    crash = [l for l in lines if CRASH_RE.search(l)]
    v.check(not crash, f"no kernel crash on the console {crash[:3] if crash else ''}")
    end = marker(lines, "END")
    v.check(end == "ok", f"guest finished its script (END {end})")
    v.check(f"driver={guest['driver']}" in (marker(lines, "ETH0") or ""),
            f"eth0 is driven by {guest['driver']} ({marker(lines, 'ETH0')})")
    if not with_netlatd:
        return []
    check_out, check_end = section(lines, "CHECK")
    v.check(check_end is not None and check_end.endswith("rc=0"), f"netlatd --check exited 0 ({check_end})")
    rows = check_irq_lines(check_out)
    counted = [r for r in rows if r["counted"]]
    log(f"IRQ lines --check found: " + "; ".join(
        f"{r['irq']} {r['name']} {'counted' if r['counted'] else 'not counted'} ({r['role']}, {r['found_by']})"
        for r in rows))
    v.check([r["name"] for r in counted] == guest["counted_irq_names"],
            f"--check counts the IRQ lines {guest['counted_irq_names']} ({[r['name'] for r in counted]})")
    v.check(bool(counted) and all(r["found_by"].endswith(guest["irq_found_by"]) for r in counted),
            f"--check found them in {guest['irq_found_by']} ({[r['found_by'] for r in counted]})")
    return rows


def judge_receiver(v, lines, sent):
    """nlrx's result against what the host sent; returns what nlrx got."""
    udp_sent, tcp_sent = sent
    res = next((l for l in lines if l.startswith("nlrx: result ")), None)
    v.check(res is not None, "nlrx printed its result")
    got = dict(kv.split("=", 1) for kv in res.split()[2:]) if res else {}
    got["udp_reads"] = parse_reads(next((l for l in lines if l.startswith("nlrx: udp_reads ")), ""))
    udp_rx = int(got.get("udp_datagrams", -1))
    tcp_bytes = int(got.get("tcp_bytes", -1))
    # qemu's user-mode network may drop a datagram under TCG load; the
    # comparison with netlatd is exact, this one only sanity.
    v.check(udp_rx >= udp_sent * 0.9, f"nlrx received {udp_rx} of {udp_sent} UDP datagrams")
    v.check(tcp_bytes == tcp_sent, f"nlrx received {tcp_bytes} of {tcp_sent} TCP bytes")
    return got


def judge_check_netns(v, lines, guest):
    """The NIC moved into a namespace of its own: netlatd --check --netns
    counts the same IRQ lines, found under its PCI address."""
    out, end = section(lines, "CHECK-NETNS")
    v.check(end is not None and end.endswith("rc=0"), f"netlatd --check --netns exited 0 ({end})")
    rows = check_irq_lines(out)
    counted = [r for r in rows if r["counted"]]
    log("IRQ lines --check --netns found: " + "; ".join(
        f"{r['irq']} {r['name']} {'counted' if r['counted'] else 'not counted'} ({r['role']}, {r['found_by']})"
        for r in rows))
    v.check([r["name"] for r in counted] == guest["counted_irq_names"],
            f"--check --netns counts the IRQ lines {guest['counted_irq_names']} ({[r['name'] for r in counted]})")
    last = "/" + guest["irq_found_by"].rsplit("/", 1)[1]
    v.check(bool(counted) and all(r["found_by"].startswith("/sys/bus/pci/devices/") and r["found_by"].endswith(last)
                                  for r in counted),
            f"--check --netns found them in /sys/bus/pci/devices/ADDR{last} ({[r['found_by'] for r in counted]})")


def judge_irq_activity(v, lines, irq_rows):
    """How often each of the NIC's lines fired during the traffic; the
    counted ones must have."""
    if not irq_rows:
        return  # no --check (a run without netlatd): the NIC's lines are not known
    before, _ = section(lines, "INTERRUPTS-BEFORE")
    after, _ = section(lines, "INTERRUPTS-AFTER")
    b, a = irq_counts(before), irq_counts(after)
    deltas = {r["irq"]: a.get(r["irq"], 0) - b.get(r["irq"], 0) for r in irq_rows}
    log("NIC interrupts during the traffic: " + ", ".join(
        f"{r['irq']} {r['name']} +{deltas[r['irq']]}{' (counted)' if r['counted'] else ''}" for r in irq_rows))
    counted = [r for r in irq_rows if r["counted"]]
    v.check(bool(counted) and all(deltas[r["irq"]] > 0 for r in counted),
            "the counted IRQ lines fired during the traffic")


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


def parse_reads(line):
    """nlrx's "udp_reads base_ns=B len:before:after,..." as [(len, before_ns, after_ns)]."""
    parts = line.split()
    if len(parts) < 3 or not parts[2].startswith("base_ns="):
        return []
    base = int(parts[2].split("=", 1)[1])
    reads = []
    for item in (parts[3].split(",") if len(parts) > 3 else []):
        n, before, after = (int(x) for x in item.split(":"))
        reads.append((n, base + before, base + after))
    return reads


# phase_stacked in guest-init.sh: what the peer namespace sends, per target.
STACKED = dict(tagged=(40, 100, "va.100"), untagged=(30, 60, None), bonded=(40, 140, "bond0"))


def judge_stacked(v, lines, netns=False):
    """A VLAN and a bond over veths, traced by their names: each datagram
    once under the upper device's name; the VLAN's lower device's untagged
    datagrams not at all. `netns`: they are in another namespace, traced
    with --netns (the devices below found from its links)."""
    setup = marker(lines, "STACKED-SETUP")
    v.check(setup is not None and setup.startswith("ok"), f"the guest made the VLAN and the bond ({setup})")
    res = next((l for l in lines if l.startswith("nlrx: result ")), None)
    got = dict(kv.split("=", 1) for kv in res.split()[2:]) if res else {}
    sent = sum(n for n, _, _ in STACKED.values())
    v.check(int(got.get("udp_datagrams", -1)) == sent, f"nlrx received {got.get('udp_datagrams')} of {sent} datagrams")
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")
    stderr, _ = section(lines, "NETLATD-STDERR")
    v.check(any("va.100: its packets arrive first on va" in l for l in stderr or []),
            "netlatd said where the VLAN's packets arrive first")
    v.check(any("bond0: its packets arrive first on vb" in l for l in stderr or []),
            "netlatd said where the bond's packets arrive first")
    if netns:
        v.check(any("tracing in network namespace" in l for l in stderr or []),
                "netlatd traced them in the other namespace (--netns)")
    records = json_records(v, lines)
    intervals = [r for r in records if r.get("type") == "interval"]
    timelines = [r for r in records if r.get("type") == "outlier"]
    want = {iface: n for n, _, iface in STACKED.values() if iface}
    packets, udp, by_iface = 0, 0, {}
    for r in intervals:
        packets += r.get("packets", 0)
        udp += r.get("udp", 0)
        by_iface[r.get("iface")] = by_iface.get(r.get("iface"), 0) + r.get("packets", 0)
    log(f"netlatd: packets={packets} udp={udp} per interface {by_iface}")
    v.check(packets == udp == sum(want.values()), f"netlatd counted {packets} packets, {udp} UDP; "
            f"the VLAN's and the bond's {sum(want.values())} only")
    counts, _, _ = stage_summary(intervals)
    for name in EXACT_STAGES:
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")
    records_by_iface, lens_by_iface = {}, {}
    for t in timelines:
        records_by_iface[t.get("iface")] = records_by_iface.get(t.get("iface"), 0) + 1
        lens_by_iface.setdefault(t.get("iface"), set()).add(t.get("len"))
    v.check(records_by_iface == want, f"timelines per interface {records_by_iface} == {want}")
    want_lens = {iface: {size} for _, size, iface in STACKED.values() if iface}
    v.check(lens_by_iface == want_lens, f"their lengths per interface {lens_by_iface} == {want_lens}")


# phase_badcsum in guest-init.sh: datagrams sent, every how many one has a
# bad checksum, and datagram i's length.
BADCSUM_SENT, BADCSUM_EVERY = 89, 3


def badcsum_len(i):
    return 40 + (i * 37) % 101


def udp_snmp(lines, name):
    """The Udp row of /proc/net/snmp a marker holds, as {field: value}."""
    words = (marker(lines, name) or "").split()
    half = len(words) // 2
    if half < 2 or words[0] != "Udp:" or words[half] != "Udp:":
        return {}
    return dict(zip(words[1:half], (int(x) for x in words[half + 1:])))


def judge_badcsum(v, lines, netlatd_args):
    """Bad checksums among good datagrams, found by the reads: nlrx reads
    every good one, the kernel counts every bad one, and netlatd names every
    good read (its record of the datagram read, in order) and counts every
    bad one as stack_dropped, with no record of it."""
    setup = marker(lines, "BADCSUM-SETUP")
    v.check(setup is not None and setup.startswith("ok"), f"the guest made the veth, checksum offload off ({setup})")
    bad = [i for i in range(BADCSUM_SENT) if i % BADCSUM_EVERY == BADCSUM_EVERY - 1]
    good_lens = [badcsum_len(i) for i in range(BADCSUM_SENT) if i not in bad]
    sent = next((l for l in lines if l.startswith("nlrx: sent ") and "bad checksum" in l), None)
    v.check(sent is not None and sent.startswith(f"nlrx: sent {BADCSUM_SENT} of {BADCSUM_SENT} ({len(bad)} with"),
            f"the peer sent {BADCSUM_SENT} datagrams, {len(bad)} with a bad checksum ({sent})")
    before, after = udp_snmp(lines, "BADCSUM-SNMP-BEFORE"), udp_snmp(lines, "BADCSUM-SNMP-AFTER")
    csum = after.get("InCsumErrors", -1) - before.get("InCsumErrors", 0)
    v.check(csum == len(bad), f"the kernel dropped {csum} datagrams for their checksum (Udp InCsumErrors), of {len(bad)}")
    got = judge_receiver(v, lines, (len(good_lens), 0))
    read_lens = [r[0] for r in got["udp_reads"]]
    v.check(read_lens == good_lens, f"nlrx read the good datagrams, in order ({len(read_lens)} of {len(good_lens)})")
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")
    records = json_records(v, lines)
    intervals = [r for r in records if r.get("type") == "interval"]
    timelines = [r for r in records if r.get("type") == "outlier"]
    packets, udp = (sum(r.get(k, 0) for r in intervals) for k in ("packets", "udp"))
    drops = sum_over(intervals, "drops")
    log(f"netlatd: packets={packets} udp={udp}; drops: {drops}")
    v.check(packets == udp == len(good_lens), f"netlatd counted {packets} packets, {udp} UDP: the good ones only")
    v.check(drops.get("stack_dropped", 0) == len(bad),
            f"netlatd counted {drops.get('stack_dropped', 0)} stack_dropped, the {len(bad)} bad datagrams")
    counts, _, _ = stage_summary(intervals)
    for name in EXACT_STAGES:
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")
    judge_timelines(v, netlatd_args, timelines, got, packets, drops, 0)
