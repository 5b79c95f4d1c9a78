"""The vm tier's phases, host side (PHASES): what the host sends in each and
how each is judged, and the Context of the run they are given. The guest
side of a phase is phase_<name> in guest-init.sh; run_vm_test.py runs them."""
import collections
import re
import socket
import time

from vm_guest import MARK, free_port, log
from vm_judge import judge_irq_activity, judge_receiver, marker, section
from vm_judge_netlatd import json_records, judge_netlatd
from vm_judge_veth import judge_badcsum, judge_stacked

# What the host sends in a phase, how the phase is judged, and whether it
# runs netlatd. The guest side is phase_<name> in guest-init.sh. A phase
# whose guest makes its own traffic has traffic=None (the guest then never
# says READY) and judges its own section of the console.
Phase = collections.namedtuple("Phase", "traffic judge netlatd")


def datagram_len(i):
    """Datagram i's payload length: consecutive datagrams differ, so a record
    joined to the wrong datagram shows in its length."""
    return 32 + (i * 37) % 101


def send_udp_tcp(ctx):
    """The host's datagrams (2 ms apart) and TCP writes to nlrx; returns
    (datagrams sent, TCP bytes sent)."""
    a = ctx.args
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(a.datagrams):
        udp.sendto(f"netlatd-vm {i:06d} ".encode().ljust(datagram_len(i), b"."), ("127.0.0.1", ctx.udp_port))
        time.sleep(0.002)
    udp.close()
    sent_tcp = 0
    # slirp accepts the host connection before the guest does; a refused
    # guest connection shows up as an early close, which nlrx reports.
    with socket.create_connection(("127.0.0.1", ctx.tcp_port), timeout=30) as tcp:
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(a.tcp_writes):
            tcp.sendall(b"t" * a.tcp_size)
            sent_tcp += a.tcp_size
            time.sleep(0.002)
        tcp.shutdown(socket.SHUT_WR)
    return a.datagrams, sent_tcp


def judge_bare(v, lines, sent, ctx):
    judge_receiver(v, lines, sent)
    judge_irq_activity(v, lines, ctx.irq_rows)


def judge_traced(reader_first):
    def judge(v, lines, sent, ctx):
        got = judge_receiver(v, lines, sent)
        judge_irq_activity(v, lines, ctx.irq_rows)
        ctx.stats[ctx.phase] = {}
        judge_netlatd(v, lines, got, ctx.guest, reader_first, ctx.args.netlatd_args, ctx.stats[ctx.phase])
        return got
    return judge


# stall.bpf.c's hold of each read, and the least share of reads it must have
# held for the phase to have tested anything.
STALL_MS = 3.0


def judge_reuse(v, lines, sent, ctx):
    """As e2e (every record of the datagram its read returned, in order), with
    each read held after its skb was freed while the next datagram arrives on
    the same CPU; and proof that the hold happened."""
    v.check(any(l.startswith(f"{MARK}STALL-ATTACHED") for l in lines),
            "the test program holding reads after skb_consume_udp is attached")
    irqs = [l[len(MARK) + len("REUSE-IRQS "):] for l in lines if l.startswith(f"{MARK}REUSE-IRQS")]
    log(f"reuse: the NIC's IRQs moved to CPU 1: {'; '.join(irqs) or 'none found'}")
    got = judge_traced(False)(v, lines, sent, ctx)
    reads = got.get("udp_reads") or []
    held = sum(1 for _, before, after in reads if after - before >= STALL_MS * 1e6)
    v.check(reads and held >= 0.9 * len(reads),
            f"reads held >= {STALL_MS:g} ms after their skb was freed: {held} of {len(reads)}")


def netstat_value(lines, which, name):
    """TcpExt `name` from the guest's NETSTAT-`which` section, or None."""
    sect, _ = section(lines, f"NETSTAT-{which}")
    rows = [l.split() for l in sect or [] if l.startswith("TcpExt:")]
    if len(rows) == 2 and name in rows[0]:
        return int(rows[1][rows[0].index(name)])
    return None


def judge_busypoll(v, lines, sent, ctx):
    """As e2e, the reader busy polling: most datagrams received in its own
    call (BusyPollRxPackets), with no IRQ or softirq stamp of another
    packet's given to them."""
    before, after = (netstat_value(lines, w, "BusyPollRxPackets") for w in ("BEFORE", "AFTER"))
    busy = after - before if before is not None and after is not None else None
    log(f"busypoll: BusyPollRxPackets +{busy}")
    got = judge_receiver(v, lines, sent)
    v.check(busy is not None and busy >= 0.5 * (sent[0] if sent else 0),
            f"datagrams received by busy polling (BusyPollRxPackets) +{busy} >= half of {sent[0] if sent else '?'}")
    ctx.stats[ctx.phase] = {}
    judge_netlatd(v, lines, got, ctx.guest, False, ctx.args.netlatd_args, ctx.stats[ctx.phase], busy_poll=busy or 0)
    return got


AGGREGATE_CHECKED = re.compile(r"aggregate check: the kernel side's histograms equal its (\d+) records' \((\d+) added\)")


def judge_aggregate(v, lines, sent, ctx):
    """As e2e, the histograms kept in the kernel (--aggregate-check): each
    record added there and written too, the two found equal at exit, bucket
    by bucket; the interval lines count every datagram nlrx read, with the
    NIC's irq stage among the stages the kernel added."""
    got = judge_receiver(v, lines, sent)
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd --aggregate-check exited 0 after SIGTERM ({exit_line})")
    err, _ = section(lines, "NETLATD-STDERR")
    said = [l for l in err or [] if "aggregate" in l]
    m = next((AGGREGATE_CHECKED.search(l) for l in said if AGGREGATE_CHECKED.search(l)), None)
    v.check(m is not None, "the kernel's histograms equal the records': " + (m.group(0) if m else "; ".join(said) or "no line"))
    intervals = [r for r in json_records(v, lines) if r.get("type") == "interval"]
    udp = sum(r.get("udp", 0) for r in intervals)
    udp_rx = int(got.get("udp_datagrams", -1))
    v.check(udp == udp_rx, f"netlatd UDP packets {udp} == datagrams nlrx received {udp_rx}")
    # How many stay under --outliers-over (1 ms) is the guest's speed, not
    # netlatd's: TCG starved for a while can push most past it. The
    # equality above is what is checked; here only that the kernel added
    # some.
    added = int(m.group(2)) if m else 0
    v.check(added > 0, f"records added in the kernel: {added} of {m.group(1) if m else '?'} (datagrams {udp_rx})")
    irq = sum(((r.get("stages") or {}).get("irq") or {}).get("count", 0) for r in intervals)
    v.check(irq > 0, f"irq stage counted ({irq} packets)")
    unordered = sum(r.get("unordered", 0) for r in intervals)
    v.check(unordered == 0, f"no unordered records ({unordered})")
    ctx.stats[ctx.phase] = {"packets": sum(r.get("packets", 0) for r in intervals), "added": added, "irq": irq,
                            "unordered": unordered}
    return got


PHASES = {
    # Boot, NIC, hostfwd and nlrx alone: if this fails, a failure of the
    # phases below is not netlatd's.
    "bare": Phase(send_udp_tcp, judge_bare, False),
    # netlatd ready (READY=1 on its notify socket), then the receiver.
    "e2e": Phase(send_udp_tcp, judge_traced(False), True),
    # The receiver blocked in recvfrom()/accept() before netlatd attaches.
    "reader_first": Phase(send_udp_tcp, judge_traced(True), True),
    # A VLAN and a bond over veths to a peer namespace in the guest, traced
    # by name; the guest makes the traffic.
    "stacked": Phase(None, lambda v, lines, sent, ctx: judge_stacked(v, lines), True),
    # The same in a namespace of its own, netlatd outside it with --netns.
    "stacked_netns": Phase(None, lambda v, lines, sent, ctx: judge_stacked(v, lines, netns=True), True),
    # Bad UDP checksums among good datagrams over a veth in the guest, found
    # by the reads; the guest makes the traffic.
    "badcsum": Phase(None, lambda v, lines, sent, ctx: judge_badcsum(v, lines, ctx.args.netlatd_args), True),
    # e2e with each read held after the kernel freed its skb (stall.bpf.c),
    # while the next datagram arrives on the same CPU: it usually gets the
    # freed skb's address before the read returns (docs/JOIN.md).
    "reuse": Phase(send_udp_tcp, judge_reuse, True),
    # e2e with the reader busy polling (SO_BUSY_POLL): datagrams received in
    # the reader's own call, no interrupt, no softirq.
    "busypoll": Phase(send_udp_tcp, judge_busypoll, True),
    # e2e with a reader that peeks before each read (dnsmasq): a record for
    # every datagram, of the read's call, not the peek's.
    "peek": Phase(send_udp_tcp, judge_traced(False), True),
    # e2e with ~200 datagrams queued before the first read: each read of
    # the backlog named, of the right datagram.
    "backlog": Phase(send_udp_tcp, judge_traced(False), True),
    # e2e with the histograms kept in the kernel, checked against every
    # record (--aggregate-check): the 6.1 verifier's stack limit, fexit and
    # the join by the datagram the kernel names.
    "aggregate": Phase(send_udp_tcp, judge_aggregate, True),
}


class Context:
    """What a phase's traffic and judge need to know of the run."""

    def __init__(self, args, guest):
        self.args, self.guest = args, guest
        self.udp_port, self.tcp_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
        self.irq_rows = []  # the NIC's IRQ lines as --check listed them
        self.phase = None   # the phase being judged
        self.stats = {}     # {phase: figures for the summary}
