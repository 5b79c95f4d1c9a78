"""The host and a process's share of it, from /proc: other work beside the
bench, a process's CPU time, its peak and present memory."""
import os
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Programs whose presence makes a host's figures suspect even when idle in the
# sample: other tracers run BPF on the packets measured, a guest steals a CPU.
SUSPECT_COMMS = ("qemu", "bpftrace", "netlatd", "perf", "pwru", "sockperf", "iperf3")


def host_busy(seconds=1.0, threshold_pct=5.0, exclude=()):
    """Other work on the host while the bench runs: processes that took more than
    threshold_pct of a CPU over a sample of `seconds`, and any process named like a
    tracer or a guest. A bench beside them measures their load, not netlatd's; the
    results say so (stop 28's figures were taken beside a qemu spinning at 76 %)."""
    def ticks():
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) in exclude:
                continue
            try:
                out[int(d)] = proc_stat(d)
            except (OSError, ValueError, IndexError):
                continue
        return out
    before = ticks()
    time.sleep(seconds)
    after = ticks()
    busy = []
    for pid, (comm, t) in after.items():
        pct = 100.0 * (t - before.get(pid, (comm, t))[1]) / CLK_TCK / seconds
        suspect = any(comm.startswith(c) for c in SUSPECT_COMMS)
        if pct >= threshold_pct or suspect:
            busy.append({"pid": pid, "comm": comm, "cpu_pct": round(pct, 1)})
    return sorted(busy, key=lambda b: -b["cpu_pct"])


def proc_stat(pid):
    """A process's name and CPU time in clock ticks (utime + stime), from /proc/PID/stat.
    The name is between the first "(" and the last ")": it may hold either."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    comm = st[st.index("(") + 1:st.rindex(")")]
    fields = st[st.rindex(")") + 1:].split()
    return comm, int(fields[11]) + int(fields[12])  # utime, stime


def proc_cpu_ns(pid):
    """CPU time of all of a process's threads in ns, from each thread's
    schedstat (nanosecond run time), and the resolution in ns: 1, or one clock
    tick when the kernel has no schedstat and utime+stime is all there is."""
    total, seen = 0, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
                seen = True
        except (OSError, ValueError, IndexError):
            pass
    if seen:
        return total, 1
    return proc_stat(pid)[1] * 1e9 / CLK_TCK, 1e9 / CLK_TCK


def proc_status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def rss_by_mapping_kib(pid):
    """The process's RSS now, by what backs it: "bpf_maps" (the mmap'ed ring buffer:
    kernel memory, yet counted in VmRSS/VmHWM), "binary" (its own file), "libraries"
    (other files), "anonymous" (heap, thread stacks)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    out = {"bpf_maps": 0, "binary": 0, "libraries": 0, "anonymous": 0}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                fields = line.split(None, 5)
                name = fields[5].strip() if len(fields) > 5 else ""
                kind = ("bpf_maps" if "bpf-map" in name else "binary" if name == exe
                        else "libraries" if name.startswith("/") else "anonymous")
            elif kind and first == "Rss:":
                out[kind] += int(line.split()[1])
    return out
