"""Judging a vm tier guest's console: the boot, netlatd --check and its IRQ
lines, and the receiver. netlatd's output in each phase is judged in
vm_judge_netlatd.py, the phases over the guest's own veths in
vm_judge_veth.py, per-packet timelines in vm_timelines.py."""
import re

from vm_guest import MARK, log

CRASH_RE = re.compile(r"\bBUG:|Oops|Kernel panic|general protection fault|kernel BUG at")

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
