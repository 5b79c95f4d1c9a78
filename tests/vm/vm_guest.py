"""The vm tier's guest: its kernel, its initramfs, qemu, and the console.

One boot runs every phase of a guest (tests/vm/guest-init.sh); the host
drives it from the console's marker lines ("@@NLVM ..."): when the guest says
"READY <phase>", the host sends that phase's traffic.
"""
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
MARK = "@@NLVM "
# Console sections too long for the test log (console.log has them; the
# judge summarises the JSON and prints dmesg's tail when something failed).
QUIET_SECTIONS = ("JSON", "DMESG", "INTERRUPTS-BEFORE", "INTERRUPTS-AFTER")
LOCKUP_RE = re.compile(r"soft lockup - CPU#\d+ stuck|rcu: INFO: rcu_\w+ (self-)?detected stall|"
                       r"Kernel panic - not syncing: softlockup")
# A breakpoint the kernel did not place: under multi-threaded TCG, a vCPU can
# still run a translation of code that another vCPU's text_poke_bp() has
# already finished patching (static keys flipped when tracepoints are
# enabled: seen in handle_softirqs and raise_softirq as netlatd attached, on
# 6.12 about once in ten boots under a busy host).
STRAY_INT3_RE = re.compile(r"Oops: int3")


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


def fetch_kernel(source_dir, series):
    script = os.path.join(source_dir, "scripts", "vm-fetch-kernel.sh")
    r = subprocess.run([script, series], capture_output=True, text=True, timeout=600)
    sys.stderr.write(r.stderr)
    if r.returncode == SKIP:
        skip(f"no Debian {series} kernel package: " + r.stderr.strip().splitlines()[-1])
    if r.returncode != 0:
        raise RuntimeError(f"{script} {series} failed with {r.returncode}")
    out = dict(line.split("=", 1) for line in r.stdout.split() if "=" in line)
    log(f"kernel {out['PKG']}")
    return out


def module_load_order(moddir, names):
    """The modules to insmod, each after those it depends on."""
    order = []

    def add(name):
        if name in order:
            return
        path = os.path.join(moddir, name + ".ko")
        deps = subprocess.run(["modinfo", "-F", "depends", path], capture_output=True, text=True,
                              check=True).stdout.strip()
        for dep in filter(None, deps.split(",")):
            add(dep)
        order.append(name)

    for n in names:
        add(n)
    return order


def shared_libs(binary):
    """Every library ldd lists for a binary."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (/\S+)", line) or re.match(r"(/\S+) \(0x", line)
        if not m:
            if "not found" in line:
                raise RuntimeError(f"ldd {binary}: {line}")
            continue
        libs.append(m.group(2) if m.lastindex == 2 else m.group(1))
    return libs


def static_busybox():
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        skip("busybox not installed (apt-get install busybox-static)")
    if "statically linked" not in subprocess.run(["file", "-L", busybox], capture_output=True, text=True).stdout:
        skip(f"{busybox} is not static (apt-get install busybox-static)")
    return busybox


def copy_dynamic(root, binary):
    """A dynamic binary into /usr/bin with its libraries; returns their directories."""
    dst = os.path.join(root, "usr", "bin", os.path.basename(binary))
    # Debug info only slows the initramfs down; the symbol table stays so a
    # crash in the guest still names functions.
    if subprocess.run(["strip", "--strip-debug", "-o", dst, binary]).returncode != 0:
        shutil.copy(binary, dst)
    os.chmod(dst, 0o755)
    dirs = []
    for lib in shared_libs(binary):
        d = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy(os.path.realpath(lib), d)
        dirs.append(os.path.dirname(lib))
    return dirs


def cpio_gz(root, image, owner=None):
    """Everything under `root` into `image`, a gzipped newc cpio archive;
    `owner` ("0:0") gives every file that owner, else each keeps its own."""
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(image, "wb") as out:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"] + (["-R", owner] if owner else []), cwd=root,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=out)
        cpio.stdout.close()
        cpio.communicate(files)
        gz.wait()
        if cpio.returncode or gz.returncode:
            raise RuntimeError("cpio | gzip failed")


def build_initramfs(work, source_dir, modules, static_bins, dynamic_bins, extra_files, conf):
    """An initramfs of busybox, the modules (in load order), the test's
    static binaries in /bin, dynamic ones with their libraries in /usr/bin,
    extra files in /opt, and /etc/netlatd-vm.conf from `conf` (a dict)."""
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "sbin", "etc", "lib/modules", "lib64", "proc", "sys", "dev", "tmp", "run", "opt", "usr/bin"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy(static_busybox(), os.path.join(root, "bin", "busybox"))
    for path in static_bins:
        shutil.copy(path, os.path.join(root, "bin", os.path.basename(path)))
    for path in modules:
        shutil.copy(path, os.path.join(root, "lib", "modules", os.path.basename(path)))
    shutil.copy(os.path.join(source_dir, "tests", "vm", "guest-init.sh"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    lib_dirs = []
    for binary in dynamic_bins:
        lib_dirs += [d for d in copy_dynamic(root, binary) if d not in lib_dirs]
    for path in extra_files:
        shutil.copy(path, os.path.join(root, "opt", os.path.basename(path)))
    conf = dict(conf, LD_LIBRARY_PATH=":".join(lib_dirs),
                NIC_MODULES=" ".join(os.path.basename(m)[:-3] for m in modules))
    with open(os.path.join(root, "etc", "netlatd-vm.conf"), "w") as f:
        for k, v in conf.items():
            f.write(f"{k}={shlex.quote(str(v))}\n")

    image = os.path.join(work, "initramfs.cpio.gz")
    cpio_gz(root, image)
    shutil.rmtree(root)  # a copy of what is in the image now
    log(f"initramfs {os.path.getsize(image) // 1024} KiB")
    return image


class Guest:
    """qemu with its serial console captured line by line."""

    def __init__(self, cmd, console_path):
        self.lines = []
        self.arrived = []  # time.monotonic() of each line's arrival
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
                self.arrived.append(time.monotonic())
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, prefixes, timeout):
        """The first console line starting with one of prefixes, or None at
        timeout / qemu exit."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for line in self.lines[seen:]:
                    if line.startswith(tuple(prefixes)):
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


def qemu_command(qemu, accel, kernel, image, nic, forwards, timeout):
    """forwards: [(proto, host_port, guest_port)], all on 127.0.0.1."""
    # qemu must not outlive this script even if it is SIGKILLed and no
    # finally: runs: timeout(1) bounds its life on its own. A guest that
    # locks up panics (softlockup_panic) with every CPU's backtrace, and
    # -no-reboot turns the panic into qemu's exit: a failure in seconds,
    # with its traces, not a wait for the timeout.
    fwd = ",".join(f"hostfwd={p}:127.0.0.1:{h}-:{g}" for p, h, g in forwards)
    return ["timeout", "-s", "KILL", str(timeout + 30), qemu, *accel, "-m", "1024", "-smp", "2", "-nographic",
            "-no-reboot", "-kernel", kernel["VMLINUZ"], "-initrd", image,
            "-append", "console=ttyS0 quiet panic=-1 softlockup_panic=1 softlockup_all_cpu_backtrace=1",
            "-netdev", f"user,id=n0,restrict=on,{fwd}", "-device", f"{nic},netdev=n0"]


def drive(cmd, console, phases, traffic, started, deadline):
    """Boots the guest once and plays its phases. traffic: {phase: function
    sending that phase's traffic}; for each such phase, waits until the guest
    says "READY <phase>", then calls it. A phase without host traffic is
    waited through. Returns the Guest (console lines and their arrival times)
    and {phase: what its traffic function returned}."""
    log("qemu: " + " ".join(cmd))
    guest = Guest(cmd, console)
    sent = {}
    try:
        for phase in phases:
            send = traffic.get(phase)
            wanted = (f"{MARK}PHASE-END {phase}", f"{MARK}END") + ((f"{MARK}READY {phase}",) if send else ())
            line = guest.wait_for(wanted, deadline - time.monotonic())
            if line is None or line.startswith(f"{MARK}END"):
                log(f"phase {phase}: the guest ended or hung before it ({line}); console in {console}")
                break
            if not line.startswith(f"{MARK}READY"):
                if send:
                    log(f"phase {phase}: the guest ended the phase without getting ready")
                continue
            log(f"phase {phase}: guest ready {time.monotonic() - started:.1f} s after qemu started; sending")
            t = time.monotonic()
            sent[phase] = send()
            log(f"phase {phase}: sent {sent[phase]} in {time.monotonic() - t:.1f} s")
        if not guest.wait_exit(max(1, deadline - time.monotonic())):
            log("guest still running at its deadline: killing qemu")
    finally:
        guest.kill()
    return guest, sent


def tcg_artifact(lines):
    """The console from the guest's first lockup report or stray-int3 Oops
    on, or []: what a starved or racing TCG guest shows (see run_vm_test.py)."""
    i = next((i for i, l in enumerate(lines) if LOCKUP_RE.search(l) or STRAY_INT3_RE.search(l)), None)
    return [] if i is None else lines[i:]


def report_lockup(lines):
    """Each CPU's report in a lockup or Oops: what it ran (RIP) and its first frames."""
    shown = 0
    for i, line in enumerate(lines):
        if any(k in line for k in ("soft lockup - CPU#", "NMI backtrace for cpu", "Sending NMI", "Oops: ")):
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
