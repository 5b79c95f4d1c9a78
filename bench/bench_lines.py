"""Part 6, where in the programs: perf samples on the ping-pong's CPU mapped to
the lines of bpf/ that netlatd's programs were made from."""
import bisect
import os
import shutil
import signal
import time

from bench_bpf import bpf_prog_ids_of
from bench_common import log
from bench_proc import Proc, run

# The "lines" part: perf's sampling rate on the ping-pong's CPU, and how many
# of the hottest source lines it shows.
LINES_HZ = 20000
LINES_SHOWN = 25


def hot_lines(b):
    """Where the time inside netlatd's programs goes, by line of bpf/: `perf record`
    on the ping-pong's CPU during one loopback ping-pong, each sample inside one of
    netlatd's programs mapped to the source line its JIT image was made from
    (nlbench-lines reads the programs' line info). A sample lands where the CPU
    waited: on a load that missed the cache, or on the instruction after a helper
    call; the lines of a locked region show as `__bpf_spin_unlock_irqrestore`,
    outside the programs, since the samples wait there for IRQs to be back on."""
    a = b.a
    if not shutil.which("perf"):
        b.results["notes"].append("lines: perf not installed; skipped")
        return
    if a.pin_cpu < 0:
        b.results["notes"].append("lines: needs the ping-pong pinned (--pin-cpu); skipped")
        return
    if not os.access(b.tool("lines"), os.X_OK):
        b.bench_error("lines", f"{b.tool('lines')} was not built (see run.sh)")
        return
    data = os.path.join(b.tmp, "lines.perf.data")
    table = sample_pingpong(b, data)
    starts, where = line_table(table)
    out = run(["perf", "script", "-i", data, "-F", "ip,sym"], timeout=120).stdout
    os.unlink(data)
    total, inside, by_line, by_prog = count_samples(out, starts, where)
    top = sorted(by_line.items(), key=lambda kv: -kv[1])[:LINES_SHOWN]
    b.results["lines"] = {
        "hz": LINES_HZ, "cpu": a.pin_cpu, "samples": total, "in_programs": inside,
        "round_trips": a.count + a.warmup,
        "programs": dict(sorted(by_prog.items(), key=lambda kv: -kv[1])),
        "top": [{"line": loc, "source": src, "samples": n} for (loc, src), n in top]}
    log(f"lines: {inside} of {total} samples on CPU {a.pin_cpu} inside netlatd's programs")


def sample_pingpong(b, data):
    """perf record on the ping-pong's CPU into data during one loopback ping-pong
    with netlatd tracing it; returns nlbench-lines' table of netlatd's programs."""
    a = b.a
    p_srv, p_cli = b.ports[0], b.ports[1]
    nl, info = b.start_tracer("netlatd", "lo", 1, [p_srv, p_cli])
    try:
        srv = b.pingpong_server("lines", f"127.0.0.1:{p_srv}")
        perf = Proc(b, "perf-lines", ["perf", "record", "-q", "-C", str(a.pin_cpu), "-F",
                                      str(LINES_HZ), "-o", data])
        time.sleep(0.5)
        try:
            b.pingpong_client("lines", f"127.0.0.1:{p_srv}", f"127.0.0.1:{p_cli}")
        finally:
            perf.stop(signal.SIGINT, timeout=30)
            srv.kill()
        ids = bpf_prog_ids_of(nl.p.pid)
        return run([b.tool("lines")] + [str(i) for i in sorted(ids)], timeout=30).stdout
    finally:
        b.stop_tracer("netlatd", nl, info)


def line_table(table):
    """nlbench-lines' table as (start addresses in order, (program, line, source) of each)."""
    starts, where = [], []
    for line in table.splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            starts.append(int(f[0], 16))
            where.append((f[1], f[2], f[3].strip() if len(f) > 3 else ""))
    order = sorted(range(len(starts)), key=lambda i: starts[i])
    return [starts[i] for i in order], [where[i] for i in order]


def count_samples(out, starts, where):
    """perf script's samples (ip, sym) counted: (all, inside the programs, by
    (line, source), by program)."""
    total = inside = 0
    by_line, by_prog = {}, {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        total += 1
        if not f[1].startswith("bpf_prog_"):
            continue
        i = bisect.bisect_right(starts, int(f[0], 16)) - 1
        if i < 0:
            continue
        inside += 1
        prog, loc, src = where[i]
        by_prog[prog] = by_prog.get(prog, 0) + 1
        key = (loc, src)
        by_line[key] = by_line.get(key, 0) + 1
    return total, inside, by_line, by_prog
