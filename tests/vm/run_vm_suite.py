#!/usr/bin/env python3
"""The vm tier's join suite: the bpf tier's join tests in a Debian guest.

The build machine's kernel refuses fentry, so there the bpf tier's join
tests (several readers on one socket, socket churn, bulk TCP, odd packets,
epoll readers) only exercise the queue-order join. The kernels users run
allow fentry, and there netlatd names the skb each UDP read took
(`fentry/skb_consume_udp`; on 6.1 the receive return is `fexit/sock_recvmsg`).
This runs the same test binary (netlatd_bpf_tests) on those kernels: one
boot of a Debian 12 kernel (scripts/vm-fetch-kernel.sh) under qemu with a
Debian 12 root file system (make-rootfs.sh, debootstrap, cached under the
build directory) as its initramfs, the test binary, netlatd and the tools
the tests exec at the paths the build gave them, and each test run there in
a process of its own (suite-init.sh). The guest has no NIC: the tests make
their own namespaces and veth pairs, as on the host. The host judges each
test from the console's markers.

Exit status: 0 every test passed, 1 a test failed (or the guest did not
finish), 77 skipped (the reason is printed; also when every test skipped).
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

from run_vm_test import TCG
from vm_accel import choose_accel
from vm_guest import (MARK, Guest, cpio_gz, fetch_kernel, host_cpu_times, log, module_load_order, report_host_cpu,
                      report_lockup, shared_libs, skip, tcg_artifact)

HERE = os.path.dirname(os.path.abspath(__file__))

# The suite, in the order it runs: (Catch2 test name, why it is here). The
# same list on both kernels; what a kernel cannot run is left out per guest
# below, with the reason. Sizes: NETLATD_TEST_SCALE (the guest's --scale)
# cuts the bursts of the reader tests, the rounds of socket churn and the
# 10,000 connections; the odd-packet tests send their 512 datagrams (or 200
# crafted ones) as on the host.
SUITE = [
    # Several threads on one socket in bursts from both CPUs: distinct and
    # equal lengths, IPv4 and IPv6, every receive call.
    ("readers: 4 threads on one UDP socket, IPv4, recvfrom, distinct lengths", "threads"),
    ("readers: 4 threads on one UDP socket, IPv6, recv, distinct lengths", "threads"),
    ("readers: 8 threads on one UDP socket, IPv4, recvmsg, distinct lengths", "threads"),
    ("readers: 8 threads on one UDP socket, IPv6, recvmmsg, distinct lengths", "threads"),
    ("readers: 16 threads on one UDP socket, IPv4, recvmmsg, distinct lengths", "threads"),
    ("readers: 16 threads on one UDP socket, IPv6, recvfrom, distinct lengths", "threads"),
    ("readers: 4 threads on one UDP socket, IPv6, recvmsg, equal lengths", "threads"),
    ("readers: 8 threads on one UDP socket, IPv4, recv, equal lengths", "threads"),
    ("readers: 16 threads on one UDP socket, IPv4, recvmmsg, equal lengths", "threads"),
    ("readers: 8 threads on one UDP socket, 2 of them held at each return, equal lengths", "threads"),
    ("UDP bursts from one CPU: every read named, each the datagram it returned", "threads"),
    ("UDP bursts from two CPUs at once: every record right, the rest counted", "threads"),
    ("IPv6 UDP and a TCP stream, several ports", "threads"),
    # Socket churn, thousands of TCP connections, bulk TCP.
    ("readers: 2000 UDP sockets opened and closed at one address", "churn"),
    ("readers: 2000 TCP connections with one request each", "churn"),
    ("readers: one TCP connection per request to a TCP_DEFER_ACCEPT listener", "churn"),
    ("readers: 10000 concurrent TCP connections to one watched port", "churn"),
    ("readers: bulk TCP streams at full speed over the veth (iperf3 -P 4)", "bulk"),
    ("readers: one TCP read of a hundred segments and more reports each", "bulk"),
    ("readers: one TCP read of over 4,096 segments counts the rest by name", "bulk"),
    # Odd packets: PEEK, TRUNC, fragments, bad checksums a read finds.
    ("odd packets: every read preceded by a MSG_PEEK of the same datagram", "odd"),
    ("odd packets: MSG_TRUNC reads into a buffer shorter than the datagram", "odd"),
    ("odd packets: IPv4 datagrams fragmented over a 1500-byte MTU veth", "odd"),
    ("odd packets: IPv6 datagrams fragmented over a 1500-byte MTU veth", "odd"),
    ("odd packets: IPv4 datagrams with IP options", "odd"),
    ("odd packets: IPv6 datagrams with extension headers", "odd"),
    ("odd packets: zero-length UDP datagrams", "odd"),
    ("odd packets: UDP datagrams whose bad checksum the read finds", "odd"),
    ("odd packets: bad checksums the reads find, 4 threads, equal lengths", "odd"),
    ("odd packets: bad checksums dropped by FIONREAD before each read", "odd"),
    ("odd packets: bad checksums dropped by a poll before each read", "odd"),
    # Epoll readers.
    ("readers: an epoll reader that works before it reads", "epoll"),
    ("readers: one TCP connection per request, read after epoll_wait", "epoll"),
    ("readers: one TCP connection per request, work between accept and read", "epoll"),
    # --sample: a datagram left out is counted at its read, a TCP flow whole.
    ("sample: one datagram in 4 traced, each left out counted at the filter and at its read", "sample"),
    ("sample: TCP connections kept or left out whole, one in 4", "sample"),
    # --stash-entries: this kernel's verifier on the sized table, and a queue
    # that only a large one holds where the kernel names reads.
    ("stash: --check and the start log say the size --stash-entries gave", "stash"),
    ("stash: the smallest, 4096 entries, loads and traces bursts with no wrong record", "stash"),
    ("stash: the largest, 1048576 entries (56 MiB), loads and traces bursts with no wrong record", "stash"),
    ("stash: 20000 datagrams queued unread, traced whole by 1048576 entries", "stash"),
    ("stash: 20000 datagrams queued unread, counted by the smallest 4096 entries", "stash"),
]
# Per guest kernel: tests left out, and why.
LEFT_OUT = {
    "6.1": {
        # Its test program hooks tp_btf/sock_recv_length (6.3+).
        "readers: 8 threads on one UDP socket, 2 of them held at each return, equal lengths":
            "the test program that holds reads needs the sock_recv_length tracepoint (6.3+)",
    },
    "6.12": {},
}
# The guest's modules: the tests' veth pairs.
MODULES = ["veth"]
# What the /init of a guest booted from the root file system sources first.
GUEST_BASE = "/lib/netlatd-vm/guest-base.sh"


def catch_spec(name):
    """A test name as a Catch2 test spec: , [ ] \\ are special there."""
    return re.sub(r"([\\,\[\]])", r"\\\1", name)


def place(root, path, src, strip=False):
    """src copied into the guest's tree at path (absolute)."""
    dst = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if not strip or subprocess.run(["strip", "--strip-debug", "-o", dst, src]).returncode != 0:
        shutil.copy(src, dst)
    shutil.copymode(src, dst)


def build_overlay(args, work, modules, tests):
    """The second archive of the initramfs: /init, the test binary, netlatd,
    the tools and their libraries at their own paths, the modules, and what
    to run."""
    root = os.path.join(work, "overlay")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    place(root, "/init", os.path.join(HERE, "suite-init.sh"))
    place(root, GUEST_BASE, os.path.join(HERE, "guest-base.sh"))
    os.chmod(os.path.join(root, "init"), 0o755)
    dynamic = [args.tests_bin, args.netlatd, args.bpftool]
    for path in dynamic + [args.nlreaders, args.nlsenders, args.hold_read_bpf]:
        place(root, os.path.abspath(path), path, strip=path in dynamic)
    # The host is Debian 12 as the guest is: its libraries (libbpf and
    # Catch2 from bookworm-backports, spdlog, ...) at their own paths.
    for binary in dynamic:
        for lib in shared_libs(binary):
            place(root, lib, os.path.realpath(lib))
    for m in modules:
        place(root, "/lib/modules/netlatd-suite/" + os.path.basename(m), m)
    conf = dict(TESTS_BIN=os.path.abspath(args.tests_bin), TEST_SCALE=args.scale, TEST_PATIENCE=args.patience,
                TEST_TIMEOUT=args.test_timeout,
                MODULES=" ".join(os.path.basename(m)[:-3] for m in modules))
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc", "netlatd-suite.conf"), "w") as f:
        for k, v in conf.items():
            f.write(f"{k}={shlex.quote(str(v))}\n")
    with open(os.path.join(root, "etc", "netlatd-suite.tests"), "w") as f:
        for name in tests:
            f.write(catch_spec(name) + "\n")
    image = os.path.join(work, "overlay.cpio.gz")
    cpio_gz(root, image, owner="0:0")
    shutil.rmtree(root)
    return image


def rootfs_archive(args, extra=""):
    """The root file system's archive (make-rootfs.sh), with the packages of
    `extra` (a comma list) added in one of its own."""
    r = subprocess.run([os.path.join(HERE, "make-rootfs.sh"), args.cache] + ([extra] if extra else []),
                       capture_output=True, text=True, timeout=1800)
    sys.stderr.write(r.stderr)
    if r.returncode == 77:
        skip("no Debian 12 root file system for the guest: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    if r.returncode != 0:
        raise RuntimeError(f"make-rootfs.sh failed with {r.returncode}")
    return r.stdout.strip().splitlines()[-1]


def qemu_command(qemu, accel, vmlinuz, initrd, timeout):
    # timeout(1) bounds qemu's life even if this script is SIGKILLed; no
    # NIC: the tests' traffic stays in the guest's own namespaces.
    return ["timeout", "-s", "KILL", str(timeout + 30), qemu, *accel, "-m", "2048", "-smp", "2", "-nographic",
            "-no-reboot", "-nic", "none", "-kernel", vmlinuz, "-initrd", initrd,
            "-append", "console=ttyS0 quiet panic=-1 softlockup_panic=1 softlockup_all_cpu_backtrace=1 rdinit=/init"]


def run_guest(cmd, console, deadline):
    log("qemu: " + " ".join(cmd))
    guest = Guest(cmd, console)
    try:
        line = guest.wait_for((f"{MARK}END",), deadline - time.monotonic())
        if line is None:
            log("the guest did not finish by its deadline: killing qemu")
        elif not guest.wait_exit(30):
            log("the guest did not power off: killing qemu")
    finally:
        guest.kill()
    return guest


def boot_overlay(qemu, accel, vmlinuz, work, base, overlay, timeout):
    """One boot of the root file system `base` with `overlay` on top, the two
    archives as one initramfs (the kernel unpacks concatenated archives in
    order, later files replacing earlier ones); both temporary files are
    removed. Returns the Guest once it ended."""
    initrd = os.path.join(work, "initrd.cpio.gz")
    with open(initrd, "wb") as out:
        for part in (base, overlay):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    os.remove(overlay)
    log(f"initramfs {os.path.getsize(initrd) // (1 << 20)} MiB")
    started = time.monotonic()
    guest = run_guest(qemu_command(qemu, accel, vmlinuz, initrd, timeout),
                      os.path.join(work, "console.log"), started + timeout)
    os.remove(initrd)
    log(f"guest: {time.monotonic() - started:.1f} s from qemu's start to its end")
    return guest


TEST_END = re.compile(r"TEST-END (\d+) rc=(-?\d+) secs=([\d.]+)")


def after(out, heading, most=1):
    """Catch2's console report: the lines after each line ending in heading
    (a failed check and its expansion; a skip's message), up to a blank."""
    found = []
    for j, line in enumerate(out):
        if line.rstrip().endswith(heading):
            for k in out[j + 1:j + 1 + most]:
                if not k.strip() or set(k.strip()) <= set("-=."):
                    break
                if k.strip() != "with expansion:":
                    found.append(k.strip())
    return found


def judge(lines, tests):
    """{index: (verdict, seconds, detail)} for the tests that ended."""
    results, current, out = {}, None, []
    for line in lines:
        if line.startswith(f"{MARK}TEST-BEGIN "):
            current, out = int(line.split()[2]), []
            continue
        m = TEST_END.match(line[len(MARK):]) if line.startswith(MARK) else None
        if m:
            i, rc, secs = int(m.group(1)), int(m.group(2)), float(m.group(3))
            text = "\n".join(out)
            if rc == 0 and re.search(r"All tests passed", text):
                verdict, detail = "PASSED", ""
            elif rc == 4:
                verdict, detail = "SKIPPED", "; ".join(after(out, "explicitly with message:")) or "see the log"
            elif rc == 124 or rc == 137:
                verdict, detail = "FAILED", "timed out in the guest"
            elif rc == 2 or "No test cases matched" in text:
                verdict, detail = "FAILED", "no such test in the test binary"
            else:
                checks = after(out, "FAILED:", 4)
                verdict, detail = "FAILED", f"rc {rc}; " + (" | ".join(checks[:8]) or "see the log")
            results[i] = (verdict, secs, detail)
            current = None
            continue
        if current is not None:
            out.append(line)
    return results


def bad_kernel_lines(lines):
    return [l for l in lines if re.search(r"\bBUG:|Oops|Kernel panic|WARNING: CPU", l)
            and "sysrq" not in l.lower()]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", required=True, choices=["6.1", "6.12"])
    ap.add_argument("--source-dir", default=os.path.abspath(os.path.join(HERE, "..", "..")))
    ap.add_argument("--tests-bin", required=True, help="netlatd_bpf_tests")
    ap.add_argument("--netlatd", required=True)
    ap.add_argument("--nlreaders", required=True)
    ap.add_argument("--nlsenders", required=True)
    ap.add_argument("--hold-read-bpf", required=True, help="hold_read.bpf.o")
    ap.add_argument("--bpftool", default="/usr/sbin/bpftool")
    ap.add_argument("--cache", required=True, help="directory for the guest's root file system (cached)")
    ap.add_argument("--work", required=True, help="directory for the initramfs and console.log")
    ap.add_argument("--tests", help="only the tests whose names contain this (case-insensitive)")
    ap.add_argument("--scale", type=int, default=int(os.environ.get("NETLATD_VM_SUITE_SCALE", "25")),
                    help="NETLATD_TEST_SCALE in the guest: percent of the reader tests' traffic")
    ap.add_argument("--patience", type=int, default=4,
                    help="NETLATD_TEST_PATIENCE in the guest: how many times longer a test waits for a process "
                         "(its exit, READY=1) than on the host; never what it checks")
    ap.add_argument("--test-timeout", type=int, default=240, help="seconds for one test in the guest")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds for the whole guest run")
    return ap.parse_args()


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    t0 = time.monotonic()
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
    for tool in ("cpio", "gzip", "ldd", "strip", "apt-get", "dpkg", "modinfo", "xz"):
        if not shutil.which(tool):
            skip(f"{tool} not installed")
    for what in ("tests_bin", "netlatd", "nlreaders", "nlsenders", "hold_read_bpf", "bpftool"):
        if not os.path.exists(getattr(args, what)):
            sys.exit(f"run_vm_suite.py: --{what.replace('_', '-')} {getattr(args, what)} not found")
    left_out = LEFT_OUT[args.series]
    tests = [n for n, _ in SUITE if n not in left_out
             and (not args.tests or args.tests.lower() in n.lower())]
    for name, why in left_out.items():
        log(f"left out on {args.series}: {name}: {why}")
    if not tests:
        sys.exit(f"run_vm_suite.py: no test matches {args.tests!r}")

    os.makedirs(args.work, exist_ok=True)
    kernel = fetch_kernel(args.source_dir, args.series)
    modules = [os.path.join(kernel["MODULES"], m + ".ko") for m in module_load_order(kernel["MODULES"], MODULES)]
    base = rootfs_archive(args)
    log(f"root file system and kernel ready {time.monotonic() - t0:.1f} s after start")

    # KVM only where a guest kernel boots under it (vm_accel.py), else TCG;
    # the verdict is shared with the tier's other guests.
    accel, kvm, why = choose_accel(qemu, kernel["VMLINUZ"], TCG,
                                 cache_dir=os.path.dirname(os.path.abspath(args.work)))
    log(f"accelerator: {why}")

    def boot(names):
        """One boot running `names`: (guest, {index in names: result})."""
        overlay = build_overlay(args, args.work, modules, names)
        log(f"{len(names)} tests, scale {args.scale} %")
        guest = boot_overlay(qemu, accel, kernel["VMLINUZ"], args.work, base, overlay, args.timeout)
        return guest, judge(guest.lines, names)

    cpu_before = host_cpu_times()
    guest_t0 = time.monotonic()
    guest, first = boot(tests)
    results = {tests[i]: r for i, r in first.items()}
    artifact = tcg_artifact(guest.lines)
    if artifact and not kvm:
        # Under TCG a busy host can starve the guest's vCPUs until its
        # watchdog calls them locked up, and a vCPU can run a stale
        # translation of code just patched (run_vm_test.py): the tests that
        # did not finish get one more boot; a fault netlatd causes repeats.
        log("RETRY: the guest locked up or hit a stray int3 under TCG; what the host ran meanwhile:")
        report_host_cpu(cpu_before, host_cpu_times())
        report_lockup(artifact)
        os.replace(os.path.join(args.work, "console.log"), os.path.join(args.work, "console-first-attempt.log"))
        rest = [n for n in tests if n not in results]
        if rest:
            cpu_before = host_cpu_times()
            guest, again = boot(rest)
            results.update({rest[i]: r for i, r in again.items()})
    guest_s = time.monotonic() - guest_t0

    failed = 0
    log(f"SUMMARY {args.series} join suite ({'KVM' if kvm else 'TCG'}, scale {args.scale} %):")
    for name in tests:
        verdict, secs, detail = results.get(name, ("FAILED", 0.0, "did not run to its end (the guest ended or hung)"))
        failed += verdict != "PASSED"
        log(f"  {verdict:7} {secs:6.1f} s  {name}" + (f"  -- {detail}" if detail else ""))
    bad = bad_kernel_lines(guest.lines)
    if bad:
        log("the guest's kernel reported: " + " | ".join(bad[:5]))
        failed += 1
    end = next((l for l in guest.lines if l.startswith(f"{MARK}END")), None)
    log(f"guest: {guest_s:.1f} s from qemu's start to its end ({end or 'no END marker'}); "
        f"whole test {time.monotonic() - t0:.1f} s; console in {os.path.join(args.work, 'console.log')}")
    if tcg_artifact(guest.lines):
        report_host_cpu(cpu_before, host_cpu_times())
        report_lockup(tcg_artifact(guest.lines))
    skipped = sum(1 for v, _, _ in results.values() if v == "SKIPPED")
    if skipped == len(tests) and not bad:
        skip(f"every test of the suite skipped in the {args.series} guest (see above)")
    if failed:
        log(f"FAILED: {failed} of {len(tests)} test(s) did not pass (a SKIPPED one counts: each is expected to run here)")
        return 1
    log("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
