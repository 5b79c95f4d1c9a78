"""BPF programs seen from outside: run-time statistics on for a block, the
programs a process holds and their counts, and netlatd's plan (its hooks)."""
import ctypes
import json
import os

from bench_common import BenchError
from bench_proc import run

STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
# bpf(2) by machine, for BPF_ENABLE_STATS.
BPF_SYSCALL_NR = {"x86_64": 321, "aarch64": 280}
BPF_ENABLE_STATS, BPF_STATS_RUN_TIME = 32, 0


class BpfStats:
    """BPF run-time statistics on for a `with` block. Through bpf(BPF_ENABLE_STATS): on
    while our fd is open, counted per holder by the kernel, so a second bench or a
    kill -9 cannot leave them on or turn them off under us. The sysctl
    kernel.bpf_stats_enabled is the fallback, put back at the end of the block and
    by the bench's clean-up."""

    def __init__(self, bench):
        self.bench, self.fd, self.orig = bench, None, None

    def __enter__(self):
        nr = BPF_SYSCALL_NR.get(os.uname().machine)
        if nr is not None:
            libc = ctypes.CDLL(None, use_errno=True)
            attr = ctypes.create_string_buffer(16)  # union bpf_attr { enable_stats.type }
            attr[0] = BPF_STATS_RUN_TIME
            fd = libc.syscall(nr, BPF_ENABLE_STATS, attr, len(attr))
            if fd >= 0:
                self.fd = fd
                return self
        with open(STATS_SYSCTL) as f:
            self.orig = f.read().strip()
        self.bench.cleanups.append(self._restore)
        with open(STATS_SYSCTL, "w") as f:
            f.write("1")
        return self

    def _restore(self):
        if self.orig is not None:
            with open(STATS_SYSCTL, "w") as f:
                f.write(self.orig)
            self.orig = None

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self._restore()
        return False


def bpf_ids_of(pid, kind):
    """Ids of the BPF objects of `kind` ("prog", "map") a process holds open:
    exact, unlike name or load-time matching."""
    ids = []
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if f"bpf-{kind}" not in os.readlink(f"{fd_dir}/{fd}"):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith(f"{kind}_id:"):
                        ids.append(int(line.split()[1]))
        except OSError:
            continue
    return sorted(set(ids))


def bpf_prog_ids_of(pid):
    return bpf_ids_of(pid, "prog")


def bpf_prog_stats(ids):
    """{id: (name, run_cnt, run_time_ns)} from bpftool."""
    out = {}
    r = run(["bpftool", "--json", "prog", "show"], timeout=30)
    for p in json.loads(r.stdout):
        if p.get("id") in ids:
            out[p["id"]] = (p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))
    return out


def netlatd_plan(netlatd):
    """The hooks netlatd's plan chose on this kernel, as `netlatd --check` prints them
    ("tp_btf/netif_receive_skb", "fexit/sock_recvmsg"): the points the floor attaches
    at. Raises BenchError when netlatd cannot say (it cannot run here)."""
    r = run([netlatd, "--check"], check=False, timeout=60)
    hooks, in_block = [], False
    for line in r.stdout.splitlines():
        if line.startswith("hook points"):
            in_block = True
            continue
        if in_block:
            if not line.strip():
                break
            # "  <point>  <chosen hook or ->  [<candidates>]"
            fields = line.split(None, 2)
            if len(fields) >= 2 and fields[1] != "-":
                hooks.append(fields[1])
    if r.returncode != 0 or not hooks:
        raise BenchError(f"netlatd --check gave no plan (exit {r.returncode}): "
                         f"{(r.stdout + r.stderr).strip()[-300:]}")
    return hooks
