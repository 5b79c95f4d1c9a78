#!/usr/bin/env python3
"""The vm test tier: netlatd on a real (emulated) e1000 receive path.

Boots Debian 12's 6.1 kernel under qemu (TCG) with an e1000 NIC and an
initramfs holding busybox, e1000.ko, the freshly built netlatd and nlrx
(tests/tools/nlrx.c). The guest runs tests/vm/guest-init.sh; the host sends
UDP datagrams and a TCP stream through qemu's user-mode network (hostfwd on
127.0.0.1 only), then judges the serial console log.

Why a VM at all: the build machine's kernel has no kprobes, refuses fentry
and has no NIC IRQ on lo/veth, so the IRQ stage and the 6.1 fallback hooks
(no sock:sk_data_ready / sock:sock_recv_length tracepoints) can only be
exercised on another kernel with a NIC (docs: ../shared/KERNEL-NOTES.md).

Exit status: 0 pass, 1 fail, 77 skipped (the reason is printed).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
MARK = "@@NLVM "
# Stages whose count must equal the number of packets netlatd reported.
EXACT_STAGES = ("softirq", "netif_receive", "sock_queue", "oncpu", "total")
# Tracepoints that do not exist on 6.1 (added in 6.3 and 6.5).
ABSENT_ON_61 = ("tp_btf/sk_data_ready", "tp_btf/sock_recv_length")
# Console sections too long for the test log (console.log has them; the
# judge summarises the JSON and prints dmesg's tail when something failed).
QUIET_SECTIONS = ("JSON", "DMESG")
# The order of the stamps along the receive path (the timelines' names).
STAMP_ORDER = ("irq", "softirq_raise", "softirq_entry", "netif_receive_skb", "sock_queue",
               "wakeup", "oncpu", "copy", "recv_return")
CRASH_RE = re.compile(r"\bBUG:|Oops|Kernel panic|general protection fault|kernel BUG at")


def log(msg):
    print(f"vm-test: {msg}", flush=True)


def skip(reason):
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fetch_kernel(source_dir):
    script = os.path.join(source_dir, "scripts", "vm-fetch-kernel.sh")
    r = subprocess.run([script], capture_output=True, text=True, timeout=600)
    sys.stderr.write(r.stderr)
    if r.returncode == SKIP:
        skip("no Debian 6.1 kernel package: " + r.stderr.strip().splitlines()[-1])
    if r.returncode != 0:
        raise RuntimeError(f"{script} failed with {r.returncode}")
    out = dict(line.split("=", 1) for line in r.stdout.split() if "=" in line)
    log(f"kernel {out['PKG']}")
    return out


def shared_libs(binary):
    """(path the loader asks for, file to copy) for every library ldd lists."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (/\S+)", line) or re.match(r"(/\S+) \(0x", line)
        if not m:
            if "not found" in line:
                raise RuntimeError(f"ldd {binary}: {line}")
            continue
        path = m.group(2) if m.lastindex == 2 else m.group(1)
        libs.append(path)
    return libs


def build_initramfs(work, kernel, netlatd, nlrx, source_dir, udp_expect, netlatd_args,
                    extra_bins=(), guest_cmd="", extra_files=(), guest_post_cmd="", reader_first=False):
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "sbin", "etc", "lib", "lib64", "proc", "sys", "dev", "tmp", "run", "opt", "usr/bin"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        skip("busybox not installed (apt-get install busybox-static)")
    if "statically linked" not in subprocess.run(["file", "-L", busybox], capture_output=True,
                                                 text=True).stdout:
        skip(f"{busybox} is not static (apt-get install busybox-static)")
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    shutil.copy(nlrx, os.path.join(root, "bin", "nlrx"))
    shutil.copy(kernel["E1000"], os.path.join(root, "lib", "e1000.ko"))
    shutil.copy(os.path.join(source_dir, "tests", "vm", "guest-init.sh"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)

    lib_dirs = []
    guest_netlatd = ""
    dynamic = list(extra_bins)
    if netlatd:
        guest_netlatd = "/usr/bin/netlatd"
        dynamic.insert(0, netlatd)
    for binary in dynamic:
        dst = os.path.join(root, "usr", "bin", os.path.basename(binary))
        # Debug info only slows the initramfs down; the symbol table stays
        # so a crash in the guest still names functions.
        if subprocess.run(["strip", "--strip-debug", "-o", dst, binary]).returncode != 0:
            shutil.copy(binary, dst)
        os.chmod(dst, 0o755)
        for lib in shared_libs(binary):
            d = os.path.join(root, lib.lstrip("/"))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy(os.path.realpath(lib), d)
            if os.path.dirname(lib) not in lib_dirs:
                lib_dirs.append(os.path.dirname(lib))
    for path in extra_files:
        shutil.copy(path, os.path.join(root, "opt", os.path.basename(path)))
    with open(os.path.join(root, "etc", "netlatd-vm.conf"), "w") as f:
        f.write(f"NETLATD='{guest_netlatd}'\n")
        f.write(f"NETLATD_ARGS='{netlatd_args}'\n")
        f.write(f"LD_LIBRARY_PATH='{':'.join(lib_dirs)}'\n")
        f.write(f"UDP_EXPECT={udp_expect}\n")
        f.write("IDLE_MS=8000\n")
        f.write(f"READER_FIRST={1 if reader_first else 0}\n")
        f.write("GUEST_CMD=" + shlex.quote(guest_cmd) + "\n")
        f.write("GUEST_POST_CMD=" + shlex.quote(guest_post_cmd) + "\n")

    image = os.path.join(work, "initramfs.cpio.gz")
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(image, "wb") as out:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=out)
        cpio.stdout.close()
        cpio.communicate(files)
        gz.wait()
        if cpio.returncode or gz.returncode:
            raise RuntimeError("cpio | gzip failed")
    shutil.rmtree(root)  # a copy of what is in the image now
    log(f"initramfs {os.path.getsize(image) // 1024} KiB")
    return image


class Guest:
    """qemu with its serial console captured line by line."""

    def __init__(self, cmd, console_path):
        self.lines = []
        self.cond = threading.Condition()
        self.console = open(console_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        quiet = None  # inside a section only console.log keeps
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", "")
            # The firmware's screen-clearing escapes can precede the first marker.
            if MARK in line and not line.startswith(MARK):
                line = line[line.index(MARK):]
            self.console.write(line + "\n")
            self.console.flush()
            if quiet and line.startswith(f"{MARK}{quiet}-END"):
                quiet = None
            if quiet is None:
                # nlrx's per-datagram list is for the judge, not for reading.
                shown = line if len(line) <= 400 else line[:200] + f" ... ({len(line)} chars, in console.log)"
                print("| " + shown, flush=True)
            for name in QUIET_SECTIONS:
                if line == f"{MARK}{name}-BEGIN":
                    quiet = name
                    print(f"| ... ({name} lines: in console.log)", flush=True)
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, prefix, timeout):
        """The first console line starting with prefix, or None at timeout / qemu exit."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for line in self.lines[seen:]:
                    if line.startswith(prefix):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    return None
                self.cond.wait(min(left, 0.5))

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self.reader.join(5)
        return True

    def kill(self):
        if self.proc.poll() is None:
            # SIGTERM, which timeout(1) passes on to qemu; SIGKILL would only
            # kill timeout(1) itself.
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        self.console.close()


def datagram_len(i):
    """Datagram i's payload length: consecutive datagrams differ, so a record
    joined to the wrong datagram shows in its length."""
    return 32 + (i * 37) % 101


def run_guest(args, qemu, accel, kernel, image, work, started):
    """Boots the guest once, sends the traffic when it is ready; returns the
    console lines, what was sent, and the console log's path."""
    udp_port, tcp_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
    # qemu must not outlive this script even if it is SIGKILLed and no
    # finally: runs: timeout(1) bounds its life on its own. A guest that
    # locks up panics (softlockup_panic) with every CPU's backtrace, and
    # -no-reboot turns the panic into qemu's exit: a failure in seconds,
    # with its traces, not a wait for the timeout.
    cmd = ["timeout", "-s", "KILL", str(args.timeout + 30), qemu, *accel, "-m", "1024", "-smp", "2", "-nographic", "-no-reboot",
           "-kernel", kernel["VMLINUZ"], "-initrd", image,
           "-append", "console=ttyS0 quiet panic=-1 softlockup_panic=1 softlockup_all_cpu_backtrace=1",
           "-netdev", f"user,id=n0,restrict=on,hostfwd=udp:127.0.0.1:{udp_port}-:5000,"
                      f"hostfwd=tcp:127.0.0.1:{tcp_port}-:5001",
           "-device", "e1000,netdev=n0"]
    log("qemu: " + " ".join(cmd))
    console = os.path.join(work, "console.log")
    guest = Guest(cmd, console)
    deadline = started + args.timeout
    udp_sent = tcp_sent = 0
    try:
        ready = guest.wait_for(MARK + "READY", deadline - time.monotonic())
        if ready is None:
            guest.wait_for(MARK + "END", 10)
            end = marker(guest.lines, "END")
            log(f"guest never became ready (END {end}); console in {console}")
            return guest.lines, 0, 0, console
        log(f"guest ready after {time.monotonic() - started:.1f} s; sending")
        sending = time.monotonic()
        tcp_sent = send_traffic(udp_port, tcp_port, args.datagrams, args.tcp_writes, args.tcp_size)
        udp_sent = args.datagrams
        log(f"sent {udp_sent} datagrams and {tcp_sent} TCP bytes in {time.monotonic() - sending:.1f} s")
        if not guest.wait_exit(max(1, deadline - time.monotonic())):
            log(f"guest still running after {args.timeout} s: killing qemu")
    finally:
        guest.kill()
    return guest.lines, udp_sent, tcp_sent, console


LOCKUP_RE = re.compile(r"soft lockup - CPU#\d+ stuck|rcu: INFO: rcu_\w+ (self-)?detected stall|Kernel panic - not syncing: softlockup")


def guest_lockup(lines):
    """The console from the guest's first lockup report on, or []."""
    i = next((i for i, l in enumerate(lines) if LOCKUP_RE.search(l)), None)
    return [] if i is None else lines[i:]


def report_lockup(lines):
    """Each CPU's report in a lockup: what it ran (RIP) and its first frames."""
    shown = 0
    for i, line in enumerate(lines):
        if "soft lockup - CPU#" in line or "NMI backtrace for cpu" in line or "Sending NMI" in line:
            print("| " + line)
            frames = 0
            for l in lines[i + 1:i + 80]:
                if "soft lockup - CPU#" in l or "NMI backtrace for cpu" in l:
                    break
                if " RIP: " in l or l.strip().endswith("RIP:") or "Call Trace" in l or "Comm:" in l:
                    print("| " + l)
                elif re.search(r"\] +(\? )?[a-z_][\w.]*\+0x", l) and frames < 14:
                    print("| " + l)
                    frames += 1
            shown += 1
            if shown >= 6:
                break


def host_cpu_times():
    """CPU seconds each host process has used: {pid: (comm, seconds)}."""
    out, hz = {}, os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(pid)] = (comm, (int(fields[11]) + int(fields[12])) / hz)
    return out


def report_host_cpu(before, after):
    """The host's busiest processes over the guest's run: a starved TCG guest
    shows who took its CPUs."""
    used = sorted(((t - before.get(pid, (c, 0))[1], pid, c) for pid, (c, t) in after.items()), reverse=True)
    with open("/proc/loadavg") as f:
        log(f"host load average: {f.read().strip()}; busiest processes meanwhile (CPU s):")
    for secs, pid, comm in used[:6]:
        log(f"  {secs:7.1f}  {pid:>7}  {comm}")


def send_traffic(udp_port, tcp_port, datagrams, tcp_writes, tcp_size):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(datagrams):
        udp.sendto(f"netlatd-vm {i:06d} ".encode().ljust(datagram_len(i), b"."), ("127.0.0.1", udp_port))
        time.sleep(0.002)
    udp.close()
    sent_tcp = 0
    # slirp accepts the host connection before the guest does; a refused
    # guest connection shows up as an early close, which nlrx reports.
    with socket.create_connection(("127.0.0.1", tcp_port), timeout=30) as tcp:
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(tcp_writes):
            tcp.sendall(b"t" * tcp_size)
            sent_tcp += tcp_size
            time.sleep(0.002)
        tcp.shutdown(socket.SHUT_WR)
    return sent_tcp


def section(lines, name):
    """Console lines between '@@NLVM NAME-BEGIN' and '@@NLVM NAME-END...'."""
    begin, out = None, []
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


class Verdict:
    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        log(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            self.failures.append(what)


def judge(lines, args, udp_sent, tcp_sent):
    v = Verdict()
    crash = [l for l in lines if CRASH_RE.search(l)]
    v.check(not crash, f"no kernel crash on the console {crash[:3] if crash else ''}")
    end = marker(lines, "END")
    v.check(end == "ok", f"guest finished its script (END {end})")

    res = next((l for l in lines if l.startswith("nlrx: result ")), None)
    v.check(res is not None, "nlrx printed its result")
    got = dict(kv.split("=", 1) for kv in res.split()[2:]) if res else {}
    got["udp_reads"] = parse_reads(next((l for l in lines if l.startswith("nlrx: udp_reads ")), ""))
    udp_rx = int(got.get("udp_datagrams", -1))
    tcp_bytes = int(got.get("tcp_bytes", -1))
    # qemu's user-mode network may drop a datagram under TCG load; the
    # comparison with netlatd below is exact, this one only sanity.
    v.check(udp_rx >= udp_sent * 0.9, f"nlrx received {udp_rx} of {udp_sent} UDP datagrams")
    v.check(tcp_bytes == tcp_sent, f"nlrx received {tcp_bytes} of {tcp_sent} TCP bytes")
    irq_delta = marker(lines, "IRQ eth0 delta=")
    log(f"eth0 interrupts during the transfer: {irq_delta}")

    if args.no_netlatd:
        return v

    check_out, check_end = section(lines, "CHECK")
    v.check(check_end is not None and check_end.endswith("rc=0"),
            f"netlatd --check exited 0 ({check_end})")
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")

    json_lines, _ = section(lines, "JSON")
    records = []
    for l in json_lines or []:
        if not l.strip():
            continue
        try:
            records.append(json.loads(l))
        except json.JSONDecodeError as e:
            v.check(False, f"JSON line parses ({e}): {l[:120]}")
    intervals = [r for r in records if r.get("type") == "interval"]
    v.check(len(intervals) >= 1, f"{len(intervals)} interval lines")
    if not intervals:
        return v
    v.check(intervals[-1].get("final") is True, "the last interval line has \"final\":true")

    packets = sum(r.get("packets", 0) for r in intervals)
    udp = sum(r.get("udp", 0) for r in intervals)
    tcp = sum(r.get("tcp", 0) for r in intervals)
    log(f"netlatd: packets={packets} udp={udp} tcp={tcp}")
    # With the receiver started first, its UDP thread sits in recvfrom() when
    # netlatd attaches. Where the receive return is an fexit (6.1) that call's
    # return cannot be seen: netlatd may miss that one datagram, the first,
    # and must say so in its drop counters; every other one must be exact.
    # (Where it is a tracepoint the call's return is seen like any other.)
    recv_hook = next((r["stages"]["oncpu"].get("hook_end", "") for r in intervals
                      if "oncpu" in (r.get("stages") or {})), "")
    unseen = 0
    if args.reader_first and recv_hook.startswith("fexit/") and udp == udp_rx - 1:
        unseen = 1
        log("the datagram the receiver was already waiting for at attach was not measured "
            "(its recvfrom() began before the fexit existed)")
        v.check(sum((r.get("drops") or {}).get("unseen_read", 0) for r in intervals) == 1,
                "netlatd counted the datagram it could not measure as unseen_read")
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
    drops = {}
    for r in intervals:
        for k, n in (r.get("drops") or {}).items():
            drops[k] = drops.get(k, 0) + n
    log(f"drops: {drops}")

    counts, hooks, applicable = {}, {}, {}
    for r in intervals:
        for name, s in (r.get("stages") or {}).items():
            counts[name] = counts.get(name, 0) + s.get("count", 0)
            hooks.setdefault(name, (s.get("hook_start"), s.get("hook_end")))
            applicable.setdefault(name, s.get("applicable"))
    timelines = [r for r in records if r.get("type") == "outlier"]
    print_stage_table(intervals, timelines, counts, hooks, applicable, packets, udp, tcp)
    v.check(applicable.get("irq") is True, "irq stage is applicable on e1000")
    v.check(counts.get("irq", 0) >= 0.95 * packets and packets > 0,
            f"irq stage count {counts.get('irq', 0)} >= 95% of {packets} packets")
    for name in EXACT_STAGES:
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")
    judge_timelines(v, args, timelines, got, packets, drops, unseen)
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
    return v


def stamp_ns(iso):
    """A timeline stamp (2026-11-22T09:35:07.226276630Z) in nanoseconds since the epoch."""
    date, clock = iso.rstrip("Z").split("T", 1)
    h, m, rest = clock.split(":")
    sec, _, frac = rest.partition(".")
    day = (datetime.date.fromisoformat(date) - datetime.date(1970, 1, 1)).days
    return (((day * 24 + int(h)) * 60 + int(m)) * 60 + int(sec)) * 10**9 + int(frac.ljust(9, "0")[:9])


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


def judge_timelines(v, args, timelines, got, packets, drops, unseen):
    """Checks on the per-packet timelines ("type":"outlier", every packet
    because the test sets --outliers-over 1ns): the bytes netlatd attributes
    to packets must be the bytes the application read, every packet's stamps
    follow the receive path's order, and when a stage count falls short they
    say which packets lack which stamp."""
    if not timelines:
        # Only when --netlatd-args replaced the default (debugging).
        v.check("--outliers-over" not in args.netlatd_args, "per-packet timelines in the output")
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
    shapes = {}
    for t in timelines:
        missing = tuple(s for s in ("irq", "softirq_entry", "netif_receive_skb", "sock_queue",
                                    "oncpu", "recv_return") if s not in (t.get("stamps") or {}))
        if missing:
            key = (t.get("proto"), missing, f"ksoftirqd={t.get('ksoftirqd')}",
                   f"woken={t.get('woken')}", f"same_cpu={t.get('rx_cpu') == t.get('reader_cpu')}")
            shapes[key] = shapes.get(key, 0) + 1
    for key, n in sorted(shapes.items(), key=lambda kv: -kv[1]):
        log(f"packets lacking stamps: {n} x {key[0]} missing {','.join(key[1])} "
            + " ".join(key[2:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--netlatd", help="netlatd binary to test")
    ap.add_argument("--no-netlatd", action="store_true", help="boot, network and nlrx only")
    ap.add_argument("--nlrx", required=True)
    ap.add_argument("--work", help="directory for the initramfs and console.log")
    ap.add_argument("--reader-first", action="store_true",
                    help="start the receiver before netlatd: its threads are blocked in "
                         "recvfrom()/accept() when netlatd attaches")
    ap.add_argument("--datagrams", type=int, default=200)
    ap.add_argument("--tcp-writes", type=int, default=50)
    ap.add_argument("--tcp-size", type=int, default=100)
    # Every packet's timeline is written so the judge can compare bytes with
    # what nlrx read and explain any stage that misses packets.
    ap.add_argument("--netlatd-args", default="--outliers-over 1ns --outliers-max-per-sec 1000000",
                    help="extra netlatd options, e.g. --verbose")
    ap.add_argument("--extra-bin", action="append", default=[],
                    help="another host binary (with its libraries) to ship to /usr/bin")
    ap.add_argument("--extra-file", action="append", default=[],
                    help="a file copied as is to the guest's /opt (debugging)")
    ap.add_argument("--guest-cmd", default="", help="shell command the guest runs first (debugging)")
    ap.add_argument("--guest-post-cmd", default="",
                    help="shell command the guest runs after netlatd stopped (debugging), "
                         "e.g. 'cat /sys/kernel/tracing/trace' for bpf_printk output")
    ap.add_argument("--timeout", type=int, default=280, help="seconds for the whole guest run")
    args = ap.parse_args()
    # SIGTERM (CTest, a person) unwinds through the finally: that kills qemu.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if not args.no_netlatd and not args.netlatd:
        ap.error("--netlatd or --no-netlatd")

    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
    for tool in ("cpio", "gzip", "ldd", "apt-get", "dpkg"):
        if not shutil.which(tool):
            skip(f"{tool} not installed")

    started = time.monotonic()
    work = args.work or tempfile.mkdtemp(prefix="netlatd-vm.")
    os.makedirs(work, exist_ok=True)
    kernel = fetch_kernel(args.source_dir)
    image = build_initramfs(work, kernel, None if args.no_netlatd else args.netlatd, args.nlrx,
                            args.source_dir, args.datagrams, args.netlatd_args,
                            args.extra_bin, args.guest_cmd, args.extra_file, args.guest_post_cmd,
                            args.reader_first)

    # KVM when usable (qemu falls back to the next -accel if it fails), else TCG.
    kvm = os.access("/dev/kvm", os.R_OK | os.W_OK)
    accel = ["-accel", "kvm", "-accel", "tcg"] if kvm else ["-accel", "tcg"]
    cpu_before = host_cpu_times()
    lines, udp_sent, tcp_sent, console = run_guest(args, qemu, accel, kernel, image, work, started)
    lockup = guest_lockup(lines)
    if lockup and not kvm:
        # Under TCG the guest's CPUs are host threads that a busy host can
        # starve for seconds, and the guest's watchdog then reports them as
        # locked up. One more boot tells that from a lockup netlatd causes
        # (which repeats); the first console is kept, and its traces shown.
        log("RETRY: the guest locked up under TCG (no KVM here); what the host ran meanwhile:")
        report_host_cpu(cpu_before, host_cpu_times())
        report_lockup(lockup)
        first = os.path.join(work, "console-first-attempt.log")
        os.replace(console, first)
        log(f"first attempt's console kept in {first}; booting again")
        cpu_before = host_cpu_times()
        lines, udp_sent, tcp_sent, console = run_guest(args, qemu, accel, kernel, image, work, time.monotonic())
    if not args.work:  # a temporary directory: keep only the console log
        os.remove(image)
    v = judge(lines, args, udp_sent, tcp_sent)
    log(f"took {time.monotonic() - started:.1f} s; console in {console}")
    if v.failures:
        lockup = guest_lockup(lines)
        if lockup:
            report_host_cpu(cpu_before, host_cpu_times())
            report_lockup(lockup)
        dmesg, _ = section(lines, "DMESG")
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
