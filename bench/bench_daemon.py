"""Parts 4 and 5, the daemon alone: its CPU and memory at fixed flood rates, and
its start-up and shut-down."""
import re
import signal
import time

from bench_common import log, median
from bench_host import proc_cpu_ns, proc_status_kib, rss_by_mapping_kib
from bench_memory import memory_of
from bench_proc import not_ready


def daemon_cost(b):
    """At each fixed rate with the default ring buffer, then at 200k pps with each
    --ringbuf-mb asked for (the ring buffer is most of the RSS; see the doc)."""
    a = b.a
    rows = b.results["daemon"] = []
    runs = [(rate, None, False, 0) for rate in a.rates] + [(200000, mb, False, 0) for mb in a.ringbuf_mb]
    # --aggregate at the highest rates: the daemon then reads no record per
    # packet, only the kernel's histograms once a second.
    if not a.no_aggregate:
        runs += [(rate, None, True, 0) for rate in a.rates if rate == 0 or rate >= 200000]
    # A reader slower than its sender: datagrams wait unread on the socket.
    runs += [(rate, None, False, pause) for rate, pause in a.deep_reader]
    for rate, ringbuf_mb, aggregate, pause_us in runs:
        extra_args = ["--ringbuf-mb", str(ringbuf_mb)] if ringbuf_mb else []
        if aggregate:
            extra_args.append("--aggregate")
        tr = b.start_netlatd(b.veth, [b.ports[2]], extra_args)
        if not tr.wait_ready(15):
            b.tracer_error("netlatd", f"daemon cost: {not_ready(tr, 15)}")
            return
        pid = tr.p.pid

        def mark():
            return (time.monotonic(), proc_cpu_ns(pid))
        try:
            f = b.flood(rate, a.flood_seconds, on_start=mark, pause_us=pause_us)
            t0, (c0, res_ns) = f.pop("ctx")
            t1, (c1, _) = time.monotonic(), proc_cpu_ns(pid)
            hwm = proc_status_kib(pid, "VmHWM")
            rss = rss_by_mapping_kib(pid)
        finally:
            extra = b.stop_tracer("netlatd", tr, {})
        row = {"rate_target": rate, "ringbuf_mb": ringbuf_mb, "aggregate": aggregate,
               "reader_pause_us": pause_us, "sent": f["sent"],
               "recv_pps": f["recv_pps"], "received": f["received"],
               "cpu_pct": (c1 - c0) / 1e9 / (t1 - t0) * 100,
               "cpu_resolution_pct": res_ns / 1e9 / (t1 - t0) * 100,
               "vmhwm_kib": hwm, "bpf_map_rss_kib": rss["bpf_maps"], "rss_kib": rss,
               "traced_packets": extra.get("traced_packets"),
               "reader_named": extra.get("reader_named"),
               "ambiguous_reads": extra.get("ambiguous_reads"),
               "drops": extra.get("drops", {})}
        rows.append(row)
        log(f"daemon cost at {rate or 'max'} pps"
            f"{f', ring buffer {ringbuf_mb} MiB' if ringbuf_mb else ''}"
            f"{', --aggregate' if aggregate else ''}"
            f"{f', reader pausing {pause_us} us a read' if pause_us else ''}: "
            f"{row['cpu_pct']:.2f} % CPU, VmHWM {hwm} KiB ({rss}), drops {row['drops']}")


START_LINE_RE = re.compile(r"programs attached in ([0-9.]+) ms \(verifier ([0-9.]+) ms; most walked: "
                           r"(\w+), (\d+) instructions")


def start_line_figures(proc):
    """From netlatd's start line ("N programs attached in X ms (verifier Y ms;
    most walked: P, N instructions ..."): the time from opening the BPF object
    to every program attached, the object's load (libbpf's BTF parse and the
    verifier) within it, and the program the verifier walked most."""
    for _, line in proc.lines["stderr"]:
        m = START_LINE_RE.search(line)
        if m:
            return {"programs_ms": float(m.group(1)), "load_ms": float(m.group(2)),
                    "most_walked": {"program": m.group(3), "instructions": int(m.group(4))}}
    return {}


def startstop(b):
    a = b.a
    rows = []
    for _ in range(a.startstop_reps):
        tr = b.start_netlatd("lo", [b.ports[0]])
        ok = tr.wait_ready(15)
        if not ok:
            b.tracer_error("netlatd", f"start/stop: {not_ready(tr, 15)}")
            return
        attach = tr.ready_at - tr.t_start
        if "memory" not in b.results:
            b.results["memory"] = memory_of(tr.p.pid)
        time.sleep(0.2)
        detach = tr.stop(signal.SIGTERM, timeout=10)
        row = {"attach_s": attach, "detach_s": detach, "exit": tr.p.returncode}
        row.update(start_line_figures(tr))
        rows.append(row)
        if tr.p.returncode != 0:
            b.tracer_error("netlatd", f"start/stop: exit {tr.p.returncode} on SIGTERM")
    b.results["startstop"] = {
        "reps": rows, "attach_ms": median([r["attach_s"] for r in rows]) * 1000,
        "detach_ms": median([r["detach_s"] for r in rows]) * 1000}
    # The daemon's own account of its start (its start line): where a
    # change in the exec-to-ready figure comes from.
    for key in ("programs_ms", "load_ms"):
        known = [r[key] for r in rows if key in r]
        if known:
            b.results["startstop"][key] = median(known)
    walked = [r for r in rows if "most_walked" in r]
    if walked:
        b.results["startstop"]["most_walked"] = walked[-1]["most_walked"]
