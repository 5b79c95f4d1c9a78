#!/usr/bin/env python3
"""The vm test tier: netlatd on a real (emulated) NIC's receive path.

Boots one guest (see GUESTS: a Debian 12 kernel and a qemu NIC) under qemu
(TCG here; KVM when usable) with an initramfs holding busybox, the NIC's
modules, the freshly built netlatd and nlrx (tests/tools/nlrx.c). In that one
boot the guest runs tests/vm/guest-init.sh's phases (see PHASES) one after
the other; the host sends each phase's traffic through qemu's user-mode
network (hostfwd on 127.0.0.1 only), then judges the serial console log.

Why a VM at all: the build machine's kernel has no kprobes, refuses fentry
and has no NIC IRQ on lo/veth, so the IRQ stage, the MSI-X and virtio-net
interrupt lines and the 6.1 fallback hooks (no sock:sk_data_ready /
sock:sock_recv_length tracepoints) can only be exercised on other kernels
with a NIC (../shared/KERNEL-NOTES.md).

Exit status: 0 pass, 1 fail, 77 skipped (the reason is printed).
"""
import argparse
import collections
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

from vm_accel import choose_accel
from vm_guest import (MARK, build_initramfs, drive, fetch_kernel, free_port, host_cpu_times,
                      log, module_load_order, qemu_command, report_host_cpu, report_lockup, skip,
                      tcg_artifact)
from vm_judge import (Verdict, judge_boot, judge_check_netns, judge_irq_activity, judge_receiver, marker,
                      phase_lines, section)
from vm_judge_netlatd import json_records, judge_netlatd
from vm_judge_veth import judge_badcsum, judge_stacked

# Each guest: the kernel series (scripts/vm-fetch-kernel.sh), the qemu NIC,
# the driver and modules it needs, the IRQ lines netlatd --check must count
# for it (names in /proc/interrupts, and where in sysfs they are found), and
# the phases its one boot runs (see PHASES). The phase "stacked" needs the
# modules veth, 8021q and bonding as well.
ALL_PHASES = ("bare", "e2e", "reader_first")
# TCG with the guest's vCPUs taking turns on one host thread. Multi-threaded
# TCG lets one vCPU run a stale translation of kernel text that another has
# just patched: when netlatd attaches, text_poke_bp() flips tracepoint static
# keys, and a 6.12 guest could die of "Oops: int3" in handle_softirqs (about
# one boot in five; twice in a row once, which the retry did not cover).
TCG = os.environ.get("NETLATD_VM_TCG", "tcg,thread=single")
GUESTS = {
    "6.1-e1000": dict(series="6.1", nic="e1000", driver="e1000", modules=["e1000", "veth", "8021q", "bonding"],
                      counted_irq_names=["eth0"], irq_found_by="/device/irq", phases=ALL_PHASES + ("stacked", "stacked_netns", "badcsum", "busypoll", "peek", "backlog", "aggregate")),
    "6.12-e1000e": dict(series="6.12", nic="e1000e", driver="e1000e", modules=["e1000e"],
                        counted_irq_names=["eth0-rx-0"], irq_found_by="/device/msi_irqs", phases=ALL_PHASES),
    "6.12-virtio-net": dict(series="6.12", nic="virtio-net-pci", driver="virtio_net",
                            modules=["virtio_net", "veth", "8021q", "bonding"],
                            counted_irq_names=["virtio0-input.0"], irq_found_by="/device/../msi_irqs",
                            phases=ALL_PHASES + ("stacked", "stacked_netns", "badcsum", "reuse", "busypoll", "peek", "backlog", "aggregate")),
}

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


def boot(args, ctx, qemu, accel, kernel, image, work):
    cmd = qemu_command(qemu, accel, kernel, image, ctx.guest["nic"],
                       [("udp", ctx.udp_port, 5000), ("tcp", ctx.tcp_port, 5001)], args.timeout)
    started = time.monotonic()
    traffic = {p: (lambda p=p: PHASES[p].traffic(ctx)) for p in args.phases if PHASES[p].traffic}
    guest, sent = drive(cmd, os.path.join(work, "console.log"), args.phases, traffic, started,
                        started + args.timeout)
    return guest, sent, started


def boot_with_retry(args, ctx, qemu, accel, kernel, image, work, kvm):
    cpu_before = host_cpu_times()
    guest, sent, started = boot(args, ctx, qemu, accel, kernel, image, work)
    artifact = tcg_artifact(guest.lines)
    if artifact and not kvm:
        # Under TCG the guest's CPUs are host threads that a busy host can
        # starve for seconds, and the guest's watchdog then reports them as
        # locked up; and a vCPU can run a stale translation of code another
        # vCPU has just patched (a stray int3, vm_guest.STRAY_INT3_RE). One
        # more boot tells either from a fault netlatd causes (which repeats);
        # the first console is kept, and its traces shown.
        log("RETRY: the guest locked up or hit a stray int3 under TCG (no KVM here); "
            "what the host ran meanwhile:")
        report_host_cpu(cpu_before, host_cpu_times())
        report_lockup(artifact)
        first = os.path.join(work, "console-first-attempt.log")
        os.replace(os.path.join(work, "console.log"), first)
        log(f"first attempt's console kept in {first}; booting again")
        cpu_before = host_cpu_times()
        guest, sent, started = boot(args, ctx, qemu, accel, kernel, image, work)
    return guest, sent, started, cpu_before


def arrival(guest, prefix, started):
    """Seconds from qemu's start to the first console line with prefix."""
    return next((t - started for l, t in zip(guest.lines, guest.arrived) if l.startswith(prefix)), None)


def judge_run(args, ctx, guest, sent, started):
    v = Verdict()
    ctx.irq_rows = judge_boot(v, guest.lines, ctx.guest, not args.no_netlatd)
    for phase in args.phases:
        v.prefix, ctx.phase = f"{phase}: ", phase
        lines = phase_lines(guest.lines, phase)
        if phase not in sent and PHASES[phase].traffic:
            v.check(False, "the guest got ready for the traffic")
            continue
        PHASES[phase].judge(v, lines, sent.get(phase), ctx)
    v.prefix = ""
    if not args.no_netlatd:
        judge_check_netns(v, guest.lines, ctx.guest)
    boot_s = arrival(guest, MARK + "ETH0", started)
    timing = ", ".join(f"{p} {arrival(guest, f'{MARK}PHASE-END {p}', started) or 0:.1f} s" for p in args.phases)
    log(f"SUMMARY {args.guest}: eth0 up {boot_s or 0:.1f} s after qemu started; phases ended at: {timing}")
    for phase, s in ctx.stats.items():
        if s.get("packets"):
            log(f"SUMMARY {args.guest} {phase}: irq stage {s['irq']} of {s['packets']} packets "
                f"({100.0 * s['irq'] / s['packets']:.1f} %), irq stamp on {s.get('datagrams_irq', 0)} of "
                f"{s.get('datagrams', 0)} UDP datagrams, unordered {s['unordered']}"
                + (f", busy polled (no softirq) {s['busy_polled']}" if "busy_polled" in s else "")
                + (f", added in the kernel {s['added']}" if "added" in s else ""))
    return v


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guest", required=True, choices=sorted(GUESTS))
    ap.add_argument("--phases", help=f"phases to run, in order (of {', '.join(PHASES)}); "
                                     "default: the guest's, or bare with --no-netlatd")
    ap.add_argument("--source-dir", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--netlatd", help="netlatd binary to test")
    ap.add_argument("--no-netlatd", action="store_true", help="boot, network and nlrx only")
    ap.add_argument("--nlrx", required=True)
    ap.add_argument("--static-bin", action="append", default=[],
                    help="another static binary for the guest's /bin (a phase's own test program)")
    ap.add_argument("--work", help="directory for the initramfs and console.log")
    ap.add_argument("--datagrams", type=int, default=200)
    ap.add_argument("--tcp-writes", type=int, default=50)
    ap.add_argument("--tcp-size", type=int, default=100)
    # Every packet's timeline is written so the judge can compare bytes with
    # what nlrx read and explain any stage that misses packets.
    ap.add_argument("--netlatd-args", default="--outliers-over 1ns --outliers-max-per-sec 1000000",
                    help="extra netlatd options, e.g. --verbose")
    ap.add_argument("--extra-bin", action="append", default=[],
                    help="another host binary (with its libraries) to ship to /usr/bin")
    ap.add_argument("--stall-bpf", help="stall.bpf.o, the phase reuse's test program")
    ap.add_argument("--bpftool", default="/usr/sbin/bpftool", help="bpftool, which loads it in the guest")
    ap.add_argument("--extra-file", action="append", default=[],
                    help="a file copied as is to the guest's /opt (debugging)")
    ap.add_argument("--guest-cmd", default="", help="shell command the guest runs first (debugging)")
    ap.add_argument("--guest-post-cmd", default="",
                    help="shell command the guest runs after the phases (debugging), "
                         "e.g. 'cat /sys/kernel/tracing/trace' for bpf_printk output")
    ap.add_argument("--timeout", type=int, default=280, help="seconds for the whole guest run")
    args = ap.parse_args()
    if not args.no_netlatd and not args.netlatd:
        ap.error("--netlatd or --no-netlatd")
    if args.phases is None:
        args.phases = "bare" if args.no_netlatd else " ".join(GUESTS[args.guest]["phases"])
    args.phases = args.phases.split()
    for p in args.phases:
        if p not in PHASES:
            ap.error(f"unknown phase {p}")
        if PHASES[p].netlatd and args.no_netlatd:
            ap.error(f"phase {p} needs netlatd")
    return args


def main():
    args = parse_args()
    # SIGTERM (CTest, a person) unwinds through the finally: that kills qemu.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
    for tool in ("cpio", "gzip", "ldd", "apt-get", "dpkg", "modinfo", "xz"):
        if not shutil.which(tool):
            skip(f"{tool} not installed")

    t0 = time.monotonic()
    guest_def = GUESTS[args.guest]
    work = args.work or tempfile.mkdtemp(prefix="netlatd-vm.")
    os.makedirs(work, exist_ok=True)
    kernel = fetch_kernel(args.source_dir, guest_def["series"])
    modules = [os.path.join(kernel["MODULES"], m + ".ko")
               for m in module_load_order(kernel["MODULES"], guest_def["modules"])]
    conf = dict(NETLATD="" if args.no_netlatd else "/usr/bin/netlatd", NETLATD_ARGS=args.netlatd_args,
                UDP_EXPECT=args.datagrams, IDLE_MS=8000, PHASES=" ".join(args.phases),
                GUEST_CMD=args.guest_cmd, GUEST_POST_CMD=args.guest_post_cmd)
    dynamic = ([] if args.no_netlatd else [args.netlatd]) + args.extra_bin
    if "reuse" in args.phases:
        for what, path in (("--stall-bpf", args.stall_bpf), ("--bpftool", args.bpftool)):
            if not path or not os.path.exists(path):
                sys.exit(f"run_vm_test.py: the phase reuse needs {what} (not found: {path})")
        dynamic.append(args.bpftool)
        args.extra_file.append(args.stall_bpf)
    image = build_initramfs(work, args.source_dir, modules, [args.nlrx] + args.static_bin, dynamic,
                            args.extra_file, conf)

    # KVM only where a guest kernel boots under it (vm_accel.py), else TCG.
    accel, kvm, why = choose_accel(qemu, kernel["VMLINUZ"], TCG, cache_dir=os.path.dirname(os.path.abspath(work)))
    log(f"accelerator: {why}")
    ctx = Context(args, guest_def)
    guest, sent, started, cpu_before = boot_with_retry(args, ctx, qemu, accel, kernel, image, work, kvm)
    if not args.work:  # a temporary directory: keep only the console log
        os.remove(image)
    v = judge_run(args, ctx, guest, sent, started)
    log(f"took {time.monotonic() - t0:.1f} s; console in {os.path.join(work, 'console.log')}")
    if v.failures:
        artifact = tcg_artifact(guest.lines)
        if artifact:
            report_host_cpu(cpu_before, host_cpu_times())
            report_lockup(artifact)
        dmesg, _ = section(guest.lines, "DMESG")
        if dmesg:
            log("the guest's dmesg, last 40 lines:")
            for line in dmesg[-40:]:
                print("| " + line)
        log(f"FAILED: {len(v.failures)} check(s)")
        return 1
    log("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
