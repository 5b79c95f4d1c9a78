"""Which accelerator the vm tier's guests run under: KVM only where a guest
kernel really boots under it, else TCG.

A /dev/kvm that opens is not a KVM that runs a guest. Nested under another
hypervisor (this project's machines are PVM guests), KVM can take the guest
and never run it: Debian's 6.1 hangs after "Booting from ROM...", 6.12 stops
with "KVM internal error. Suberror: 1", and qemu does not fall back to the
next -accel then. So the probe boots the guest's kernel alone (no initramfs:
it prints its banner within a second under a working KVM, then panics) and
looks for the banner. The verdict is kept for the host's boot, so that the
tier's guests pay for one probe, not one each.
"""
import json
import os
import signal
import subprocess
import time

BANNER = b"Linux version"
# qemu prints this and then stays, the guest paused: no need to wait it out.
FAILED = b"KVM internal error"


def log(msg):
    print(f"[vm] {msg}", flush=True)


def kvm_boots(qemu, kernel, timeout=20.0):
    """(booted, why): whether `kernel` printed its banner under -accel kvm within
    `timeout` seconds. qemu runs in a process group of its own, killed whatever
    happens: a guest hung under a nested KVM spins a host CPU."""
    cmd = [qemu, "-accel", "kvm", "-m", "256", "-smp", "1", "-nographic", "-no-reboot",
           "-kernel", kernel, "-append", "console=ttyS0 panic=-1"]
    deadline = time.monotonic() + timeout
    seen = b""
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return False, f"qemu did not start ({e})"
    try:
        os.set_blocking(p.stdout.fileno(), False)
        while time.monotonic() < deadline:
            seen += p.stdout.read() or b""
            if BANNER in seen:
                return True, f"a guest kernel printed its banner under KVM within {timeout:.0f} s"
            if FAILED in seen or p.poll() is not None:
                seen += p.stdout.read() or b""
                break
            time.sleep(0.05)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        p.stdout.close()
    if BANNER in seen:
        return True, f"a guest kernel printed its banner under KVM within {timeout:.0f} s"
    last = seen.decode(errors="replace").strip().splitlines()[-1:] or ["nothing"]
    if FAILED in seen:
        how = "stopped with a KVM internal error"
    elif p.returncode not in (None, -signal.SIGKILL):
        how = f"exited ({p.returncode})"
    else:
        how = "hung"
    return False, (f"/dev/kvm opens, but a guest kernel printed no banner under KVM within "
                   f"{timeout:.0f} s (qemu {how}; its last line: {last[0][:120]!r})")


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def choose_accel(qemu, kernel, tcg, kvm_dev="/dev/kvm", timeout=20.0, cache_dir=None):
    """(qemu's -accel arguments, whether KVM is used, why). With KVM, TCG stays
    as qemu's fallback. The probe's verdict is cached in cache_dir for this
    host's boot and qemu: a KVM that cannot run one Debian kernel runs none."""
    if not os.access(kvm_dev, os.R_OK | os.W_OK):
        return ["-accel", tcg], False, f"{kvm_dev} cannot be opened: TCG"
    key = {"boot_id": _boot_id(), "qemu": os.path.realpath(qemu), "kvm_dev": kvm_dev}
    path = os.path.join(cache_dir, "kvm-verdict.json") if cache_dir else None
    verdict = None
    if path and key["boot_id"]:
        try:
            with open(path) as f:
                cached = json.load(f)
            if cached.get("key") == key:
                verdict = (cached["booted"], cached["why"] + " (probed earlier in this boot)")
        except (OSError, ValueError, KeyError):
            pass
    if verdict is None:
        booted, why = kvm_boots(qemu, kernel, timeout)
        verdict = (booted, why)
        if path and key["boot_id"]:
            try:
                os.makedirs(cache_dir, exist_ok=True)
                with open(path + ".tmp", "w") as f:
                    json.dump({"key": key, "booted": booted, "why": why}, f)
                os.replace(path + ".tmp", path)
            except OSError:
                pass
    booted, why = verdict
    if booted:
        return ["-accel", "kvm", "-accel", tcg], True, why + ": KVM"
    return ["-accel", tcg], False, why + ": TCG"
