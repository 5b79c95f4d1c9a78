#!/usr/bin/env python3
"""netlatd's bench (bench/bench.py) run inside a Debian guest under qemu.

This host refuses fentry, so bench.py here measures only the queue-order UDP
join. Distribution kernels allow fentry and take the skb-named join
(docs/JOIN.md): this boots Debian 12's 6.12 (or 6.1) kernel the way the vm
tier's join suite does (tests/vm/run_vm_suite.py: its root file system from
make-rootfs.sh, here with python3 added, as the initramfs; no NIC), with
netlatd, the bench's tools, bpftool and bench/*.py in /opt/nlbench, and runs
bench.py there once (bench/guest-init.sh). The guest's own namespace and
veth pair carry the floods; nothing leaves the guest.

Under TCG (no usable KVM here) the guest is many times slower than the host:
only ratios to figures of the same guest run (floor-clock, floor-empty) mean
anything; its ns are not comparable with the host's.

  bench/guest.py --build-dir build [--series 6.12] [--out F.json] [--markdown F.md]
                 [bench.py options, after the defaults below]

Exit: bench.py's status in the guest (0, 1, 3; see docs/BENCHMARKS.md), 1 when
the guest did not run it to its end or its kernel reported a fault, 77 when no
guest can be built here (no qemu, debootstrap, mirror or kernel package).
Hold the vm lock (flock /tmp/netlatd-vm.lock) while it runs: a second TCG
guest on this host would starve both.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vm"))

from run_vm_suite import (GUEST_BASE, MODULES, bad_kernel_lines, boot_overlay, place,  # noqa: E402
                          rootfs_archive)
from run_vm_test import TCG  # noqa: E402
from vm_accel import choose_accel  # noqa: E402
from vm_guest import (MARK, cpio_gz, fetch_kernel, log, module_load_order, report_lockup,  # noqa: E402
                      shared_libs, skip, tcg_artifact)

# Sized for a TCG guest (a loopback round trip there takes some 10x the
# host's; about 3 min in the guest): the hooks part (BPF time per loopback
# round trip against the two floors, 7 interleaved rounds; the op counts) and
# the daemon part at rates such a guest sustains, plus a slow reader (some
# 5.5k datagrams/s there) fed faster and faster for 3 s: queues some 1k, 4k,
# 13k datagrams deep, then a full 16 MiB buffer.
DEFAULT_ARGS = ["--only", "hooks,daemon", "--no-bpftrace", "--no-perf", "--no-sockperf", "--no-aggregate",
                "--hook-rounds", "7", "--count", "5000", "--warmup", "500", "--flood-seconds", "3",
                "--rates", "5000,20000,0", "--ringbuf-mb="]
DEFAULT_ARGS += [x for pps in (6000, 7000, 10000, 20000) for x in ("--deep-reader", f"{pps}:10000")]
OPT = "/opt/nlbench"
TOOLS = ("nlbench-floor", "nlbench-pingpong", "nlbench-flood")
# bench.py and every module it imports: each bench/*.py but this one.
PY = tuple(sorted(n for n in os.listdir(HERE) if n.endswith(".py") and n != os.path.basename(__file__)))


def build_overlay(a, work, modules, bench_args):
    """The second archive of the initramfs: /init, netlatd and the tools in
    /opt/nlbench, bpftool, their libraries at the host's paths (the host is
    Debian 12 as the guest is), the modules and bench.py's arguments."""
    root = os.path.join(work, "overlay")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    place(root, "/init", os.path.join(HERE, "guest-init.sh"))
    place(root, GUEST_BASE, os.path.join(HERE, "..", "tests", "vm", "guest-base.sh"))
    binaries = {f"{OPT}/netlatd": a.netlatd, "/usr/sbin/bpftool": a.bpftool}
    binaries.update({f"{OPT}/{t}": os.path.join(a.build_dir, "bench", t) for t in TOOLS})
    for dst, src in binaries.items():
        place(root, dst, src, strip=True)
        for lib in shared_libs(src):
            place(root, lib, os.path.realpath(lib))
    for name in PY:
        place(root, f"{OPT}/{name}", os.path.join(HERE, name))
    for m in modules:
        place(root, "/lib/modules/netlatd-suite/" + os.path.basename(m), m)
    conf = dict(BENCH_ARGS=" ".join(bench_args), BENCH_TIMEOUT=a.timeout - 60,
                MODULES=" ".join(os.path.basename(m)[:-3] for m in modules))
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc", "nlbench-guest.conf"), "w") as f:
        for k, v in conf.items():
            f.write(f"{k}={shlex.quote(str(v))}\n")
    image = os.path.join(work, "overlay.cpio.gz")
    cpio_gz(root, image, owner="0:0")
    shutil.rmtree(root)
    return image


def section(lines, name):
    """The console lines between "@@NLVM <name>-BEGIN" and "@@NLVM <name>-END"."""
    out, inside = [], False
    for line in lines:
        if line.startswith(f"{MARK}{name}-BEGIN"):
            inside = True
        elif line.startswith(f"{MARK}{name}-END"):
            break
        elif inside:
            out.append(line)
    return out


def bench_rc(lines):
    end = next((l for l in lines if l.startswith(f"{MARK}BENCH-END ")), None)
    return int(end.split("rc=")[1].split()[0]) if end else None


def write_results(a, lines, kernel, accel_why, commit):
    """The guest's results file to --out, its tables to --markdown, each
    labelled with the guest, the accelerator and the commit."""
    text = "\n".join(section(lines, "JSON")).strip()
    if not text:
        return None
    res = json.loads(text)
    res["guest"] = {"kernel_package": kernel.get("PKG"), "accelerator": accel_why, "commit": commit,
                    "note": "ns under TCG are not comparable with the host's: read the ratios to the "
                            "guest's own floor (floor-clock) only"}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    if a.markdown:
        import bench_report  # bench/bench_report.py: its tables, rendered here from the guest's results
        with open(a.markdown, "w") as f:
            f.write(f"Guest: {kernel.get('PKG')}, {accel_why}; netlatd at {commit}. "
                    f"{res['guest']['note']}.\n\n" + bench_report.render(res, md=True) + "\n")
    return res


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Other options go to bench.py, after: " + " ".join(DEFAULT_ARGS))
    ap.add_argument("--series", default="6.12", choices=["6.1", "6.12"])
    ap.add_argument("--build-dir", default=os.environ.get("NETLATD_BUILD_DIR", "build"),
                    help="with netlatd and bench/nlbench-* built")
    ap.add_argument("--netlatd", help="default: BUILD_DIR/netlatd")
    ap.add_argument("--bpftool", default="/usr/sbin/bpftool")
    ap.add_argument("--cache", help="the guest's root file system (default BUILD_DIR/tests/vm/guest-cache)")
    ap.add_argument("--work", help="initramfs and console.log (default BUILD_DIR/bench-guest)")
    ap.add_argument("--out", default="bench-guest.json")
    ap.add_argument("--markdown")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds for the whole guest run")
    a, rest = ap.parse_known_args()
    a.netlatd = a.netlatd or os.path.join(a.build_dir, "netlatd")
    a.cache = a.cache or os.path.join(a.build_dir, "tests", "vm", "guest-cache")
    a.work = a.work or os.path.join(a.build_dir, "bench-guest")
    return a, DEFAULT_ARGS + rest


def commit_of_tree():
    r = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main():
    a, bench_args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
    for path in [a.netlatd, a.bpftool] + [os.path.join(a.build_dir, "bench", t) for t in TOOLS]:
        if not os.access(path, os.X_OK):
            sys.exit(f"bench/guest.py: {path} not found (cmake --build BUILD --target netlatd {' '.join(TOOLS)})")
    os.makedirs(a.work, exist_ok=True)
    kernel = fetch_kernel(os.path.join(HERE, ".."), a.series)
    modules = [os.path.join(kernel["MODULES"], m + ".ko") for m in module_load_order(kernel["MODULES"], MODULES)]
    base = rootfs_archive(a, extra="python3")
    accel, kvm, why = choose_accel(qemu, kernel["VMLINUZ"], TCG, cache_dir=os.path.dirname(os.path.abspath(a.work)))
    log(f"accelerator: {why}")
    if not kvm:
        log("under TCG: only ratios to the guest's own floor mean anything; its ns are not the host's")
    overlay = build_overlay(a, a.work, modules, bench_args)
    log(f"bench.py {' '.join(bench_args)}")
    guest = boot_overlay(qemu, accel, kernel["VMLINUZ"], a.work, base, overlay, a.timeout)
    res = write_results(a, guest.lines, kernel, why, commit_of_tree())
    rc = bench_rc(guest.lines)
    bad = bad_kernel_lines(guest.lines)
    if tcg_artifact(guest.lines):
        report_lockup(tcg_artifact(guest.lines))
    if bad:
        log("the guest's kernel reported: " + " | ".join(bad[:5]))
    if rc is None or res is None or bad:
        log(f"FAILED: the bench did not run to its end in the guest; console in {a.work}/console.log")
        return 1
    log(f"results in {a.out}" + (f", tables in {a.markdown}" if a.markdown else "") + f"; bench.py exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
