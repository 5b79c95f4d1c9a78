#!/usr/bin/env python3
"""The vm test tier: netlatd on a real (emulated) NIC's receive path.

Boots one guest (see GUESTS: a Debian 12 kernel and a qemu NIC) under qemu
(TCG here; KVM when usable) with an initramfs holding busybox, the NIC's
modules, the freshly built netlatd and nlrx (tests/tools/nlrx.c). In that one
boot the guest runs tests/vm/guest-init.sh's phases (see PHASES in
vm_phases.py) one after the other; the host sends each phase's traffic through qemu's user-mode
network (hostfwd on 127.0.0.1 only), then judges the serial console log.

Why a VM at all: the build machine's kernel has no kprobes, refuses fentry
and has no NIC IRQ on lo/veth, so the IRQ stage, the MSI-X and virtio-net
interrupt lines and the 6.1 fallback hooks (no sock:sk_data_ready /
sock:sock_recv_length tracepoints) can only be exercised on other kernels
with a NIC (../shared/KERNEL-NOTES.md).

Exit status: 0 pass, 1 fail, 77 skipped (the reason is printed).
"""
import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

from vm_accel import choose_accel
from vm_guest import (MARK, build_initramfs, drive, fetch_kernel, host_cpu_times, log, module_load_order,
                      qemu_command, report_host_cpu, report_lockup, skip, tcg_artifact)
from vm_judge import Verdict, judge_boot, judge_check_netns, phase_lines, section
from vm_phases import PHASES, Context

# Each guest: the kernel series (scripts/vm-fetch-kernel.sh), the qemu NIC,
# the driver and modules it needs, the IRQ lines netlatd --check must count
# for it (names in /proc/interrupts, and where in sysfs they are found), and
# the phases its one boot runs (see PHASES, vm_phases.py). The phase
# "stacked" needs the modules veth, 8021q and bonding as well.
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
