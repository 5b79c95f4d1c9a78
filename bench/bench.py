#!/usr/bin/python3
"""What netlatd costs, next to what users would run instead (bpftrace, perf record).

Started by bench/run.sh, which builds the tools; see docs/BENCHMARKS.md for the method.
Python standard library only. Needs root (namespaces, BPF, sysctl).

Every resource it creates (network namespace, veth pair, child processes, notify
sockets, temporary files; BPF statistics are on only while it holds an fd) is
undone in a finally block and on SIGINT/SIGTERM.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from bench_common import FLOOR_REF, FLOOR_VARIANTS, BenchError, Stopped, log, median
from bench_daemon import daemon_cost, startstop
from bench_host import host_busy
from bench_hooks import hook_costs
from bench_lines import hot_lines
from bench_rate import packet_rate
from bench_roundtrip import roundtrip
from bench_setup import Bench
from bench_signals import stop_reason, watch_signals
from opcounts import OPS_HEAD, ops_rows, ops_title
from targets import evaluate


# ---- report ---------------------------------------------------------------------------

def summarize(res):
    """Medians of the runs done: called once at the end, also after a stop half-way."""
    rt = res.get("roundtrip")
    if rt:
        runs, summary = rt["runs"], {}
        for name in dict.fromkeys(r["path"] for r in runs):
            base = [r for r in runs if r["path"] == name and r["variant"] == "baseline"]
            b50, b99 = median([r["p50_ns"] for r in base]), median([r["p99_ns"] for r in base])
            # Deltas are paired: each run against the baseline of its own round,
            # so drift in the machine's load over the bench cancels out.
            by_round = {r["round"]: r for r in base}
            for v in dict.fromkeys(r["variant"] for r in runs):
                rs = [r for r in runs if r["path"] == name and r["variant"] == v]
                if not rs:
                    continue
                m50, m99 = median([r["p50_ns"] for r in rs]), median([r["p99_ns"] for r in rs])
                d50 = [r["p50_ns"] - by_round[r["round"]]["p50_ns"] for r in rs
                       if r["round"] in by_round]
                d99 = [r["p99_ns"] - by_round[r["round"]]["p99_ns"] for r in rs
                       if r["round"] in by_round]
                s = {"runs": len(rs), "p50_ns": m50, "p99_ns": m99,
                     "mean_ns": median([r["mean_ns"] for r in rs]),
                     "p50_delta_ns": median(d50), "p50_ratio": m50 / b50 if b50 else None,
                     "p99_delta_ns": median(d99), "p99_ratio": m99 / b99 if b99 else None,
                     "p50_min_ns": min(r["p50_ns"] for r in rs),
                     "p50_max_ns": max(r["p50_ns"] for r in rs),
                     "lost": sum(r["lost"] for r in rs)}
                if v == "perf":
                    s["perf_mb_per_s"] = median([r.get("perf_mb_per_s") for r in rs])
                if any("traced_packets" in r for r in rs):
                    s["traced_packets_per_run"] = median([r.get("traced_packets") for r in rs])
                summary.setdefault(name, {})[v] = s
        rt["summary"] = summary
    pr = res.get("packet_rate")
    if pr:
        runs, summary = pr["runs"], {}
        base = median([r["recv_pps"] for r in runs if r["variant"] == "baseline"])
        for v in dict.fromkeys(r["variant"] for r in runs):
            pps = median([r["recv_pps"] for r in runs if r["variant"] == v])
            summary[v] = {"recv_pps": pps,
                          "loss_pct": (base - pps) / base * 100 if base else None}
        pr["summary"] = summary
    res["floor_ratios"] = floor_ratios(res)


def floor_ratios(res):
    """Each tracer's figures beside the floor's, and as a multiple of the clock-reading
    floor (FLOOR_REF): rows of {"figure", "unit", "values": {variant: value}}. A ratio
    is only taken where the floor's own figure is above zero (a round-trip delta of the
    floor can come out at or below zero on a noisy host)."""
    rows = []

    def add(figure, unit, values):
        values = {v: x for v, x in values.items() if x is not None}
        if any(v in values for v in FLOOR_VARIANTS):
            rows.append({"figure": figure, "unit": unit, "values": values})
    rt = (res.get("roundtrip") or {}).get("summary", {})
    for path, what in (("loopback", "loopback RTT p50 added (nlbench-pingpong)"),
                       ("loopback-sockperf", "loopback RTT p50 added (sockperf)"),
                       ("veth", "veth RTT p50 added (nlbench-pingpong)")):
        add(what, "ns", {v: s["p50_delta_ns"] for v, s in rt.get(path, {}).items()
                         if v != "baseline"})
    add("BPF run time per loopback round trip", "ns",
        {v: h["bpf_ns_per_round_trip"] for v, h in (res.get("hooks_roundtrip") or {}).items()})
    add("BPF run time per received packet, max-rate flood", "ns",
        {v: h["bpf_ns_per_packet"] for v, h in (res.get("hooks") or {}).items()
         if not v.endswith("bpftrace-floor")})
    add("max UDP receive rate lost", "%",
        {v: s["loss_pct"] for v, s in ((res.get("packet_rate") or {}).get("summary")
                                       or {}).items() if v != "baseline"})
    for r in rows:
        ref = r["values"].get(FLOOR_REF)
        r["ratio_to_floor"] = {v: (x / ref if ref and ref > 0 else None)
                               for v, x in r["values"].items()}
        if r["figure"] == "BPF run time per loopback round trip":
            # Measured in interleaved rounds: the median of the per-round ratios.
            for v, h in (res.get("hooks_roundtrip") or {}).items():
                if h.get("ratio_to_floor") is not None:
                    r["ratio_to_floor"][v] = h["ratio_to_floor"]
    return rows


def us(ns):
    return f"{ns / 1000:.2f}" if ns is not None else "n/a"


def num(x, spec, scale=1.0):
    """x / scale formatted, or "n/a" for a figure a stopped run did not get to."""
    return format(x / scale, spec) if x is not None else "n/a"


def render(res, md=False):
    out = []

    def table(head, rows):
        if md:
            out.append("| " + " | ".join(head) + " |")
            out.append("|" + "|".join("---" for _ in head) + "|")
            for r in rows:
                out.append("| " + " | ".join(str(c) for c in r) + " |")
        else:
            w = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
            out.append("  ".join(str(h).ljust(w[i]) for i, h in enumerate(head)))
            for r in rows:
                out.append("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
        out.append("")

    def title(t):
        out.append(f"### {t}" if md else f"== {t}")
        out.append("")

    rt = res.get("roundtrip")
    if rt:
        title(f"UDP round trip ({rt['count']} per run, {rt['rounds']} interleaved rounds, "
              "medians)")
        rows = []
        for path, vs in rt["summary"].items():
            for v, s in vs.items():
                extra = f"{s['perf_mb_per_s']:.2f} MB/s written" if s.get("perf_mb_per_s") else ""
                if s.get("traced_packets_per_run") is not None:
                    extra = f"{s['traced_packets_per_run']:.0f} packets traced a run"
                rows.append((path, v, us(s["p50_ns"]),
                             f"{us(s['p50_min_ns'])}–{us(s['p50_max_ns'])}",
                             num(s["p50_delta_ns"], "+.2f", 1000), num(s["p50_ratio"], ".3f"),
                             us(s["p99_ns"]), num(s["p99_delta_ns"], "+.2f", 1000), extra))
        table(["path", "tracer", "p50 us", "p50 range of runs", "p50 +us (paired)", "p50 x",
               "p99 us", "p99 +us (paired)", "note"], rows)
    prr = res.get("packet_rate")
    if prr:
        title(f"Max UDP receive rate over veth ({prr['seconds']} s floods, medians)")
        table(["tracer", "received", "loss vs baseline"],
              [(v, f"{s['recv_pps'] / 1e3:.1f} kpps", num(s["loss_pct"], ".1f") + " %")
               for v, s in prr["summary"].items()])
    floor_names = {"softirq_raise": "floor: reads one field",
                   "softirq_entry": "floor: one bpf_ktime_get_ns"}
    for v, h in (res.get("hooks") or {}).items():
        if v == "bpftrace-floor":
            title("bpftrace's floor on this host: classic tracepoint programs doing (almost) "
                  "nothing, same flood, same BPF statistics")
            table(["program", "runs", "ns/run"],
                  [(floor_names.get(p["name"], p["name"]), p["run_cnt"],
                    f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-")
                   for p in h["progs"]])
            continue
        title(f"BPF programs of {v} during a max-rate flood "
              f"({h['recv_pps'] / 1e3:.0f} kpps received; "
              f"{h['bpf_ns_per_packet'] or 0:.0f} ns of BPF per packet)")
        table(["program", "runs", "ns/run", "runs/s", "runs/packet"],
              [(p["name"], p["run_cnt"],
                f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-",
                f"{p['runs_per_s']:.0f}",
                f"{p['runs_per_packet']:.2f}" if p["runs_per_packet"] is not None else "-")
               for p in h["progs"]])
    for v, h in (res.get("hooks_roundtrip") or {}).items():
        rounds = h.get("rounds", 1)
        title(f"BPF programs of {v} per loopback round trip ({h['round_trips']} round trips"
              + (f" x {rounds} interleaved rounds" if rounds > 1 else "")
              + f", {h['runs_per_round_trip']:.1f} runs and "
              + ("a median of " if rounds > 1 else "")
              + f"{h['bpf_ns_per_round_trip']:.0f} ns of BPF per round trip"
              + (f"; rounds: {', '.join(str(x) for x in h['bpf_ns_rounds'])} ns"
                 if rounds > 1 else "")
              + (f"; x {FLOOR_REF} per round: "
                 + ", ".join(f"{x:.2f}" for x in h["ratio_to_floor_rounds"])
                 if rounds > 1 and h.get("ratio_to_floor_rounds") and v != FLOOR_REF else "")
              + ")")
        table(["program", "runs/round trip", "ns/run", "ns/round trip"],
              [(p["name"], f"{p['runs_per_round_trip']:.2f}",
                f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-",
                f"{p['ns_per_round_trip']:.0f}")
               for p in h["progs"] if p["run_cnt"]])
    ln = res.get("lines")
    if ln and ln.get("top"):
        title(f"Where netlatd's programs spend their time, by line of bpf/ (perf at {ln['hz']} Hz "
              f"on CPU {ln['cpu']} over a loopback ping-pong of {ln['round_trips']} round trips: "
              f"{ln['in_programs']} of {ln['samples']} samples inside the programs; "
              + ", ".join(f"{p} {n}" for p, n in list(ln["programs"].items())[:6]) + ")")
        table(["line", "samples", "of those in the programs", "source"],
              [(t["line"], t["samples"], f"{100 * t['samples'] / ln['in_programs']:.1f} %",
                (t["source"][:70] or "-").replace("|", "\\|"))
               for t in ln["top"]])
    hp = res.get("host_primitives")
    if hp and hp.get("ns_per_run"):
        ns = hp["ns_per_run"]
        labels = {"prim_empty": "nothing (the hook's own cost)",
                  "prim_clock": "one clock read (bpf_ktime_get_ns)",
                  "prim_atomic": "one atomic add to this CPU's cell",
                  "prim_irq": "the add with IRQs saved and restored (bpf_local_irq_save)",
                  "prim_lock": "the add under a bpf_spin_lock (saves and restores IRQs too)"}
        base = ns.get("prim_empty")
        title(f"What one operation costs in a program on this host ({len(ns)} programs side by "
              f"side at {hp['hook']}, one loopback ping-pong of {hp['round_trips']} round trips"
              + (f"; {', '.join(hp['missing'])}: not in this kernel" if hp.get("missing") else "")
              + ")")
        table(["program", "what it does", "ns/run", "ns over prim_empty"],
              [(k, labels.get(k, k), f"{x:.0f}",
                f"{x - base:+.0f}" if base is not None else "-")
               for k, x in ns.items() if x is not None])
    fr = res.get("floor_ratios")
    if fr:
        tracers = [v for v in dict.fromkeys(v for r in fr for v in r["values"])
                   if v not in FLOOR_VARIANTS]
        title(f"Against the floor: netlatd's hooks ({len(res['host'].get('plan') or [])}) "
              f"with programs that return at once (floor-empty) or read the clock once "
              f"(floor-clock); x = multiple of {FLOOR_REF}")

        def cell(r, v):
            x = r["values"].get(v)
            if x is None:
                return "n/a"
            text = f"{x / 1000:+.2f} us" if r["figure"].startswith(("loopback RTT", "veth RTT")) \
                else f"{x:.1f} %" if r["unit"] == "%" else f"{x:.0f} ns"
            ratio = r["ratio_to_floor"].get(v)
            return text if v in FLOOR_VARIANTS else \
                text + (f" (x{ratio:.2f})" if ratio is not None else " (x n/a)")
        table(["figure"] + list(FLOOR_VARIANTS) + tracers,
              [[r["figure"]] + [cell(r, v) for v in list(FLOOR_VARIANTS) + tracers] for r in fr])
    if res.get("daemon"):
        title("netlatd daemon at fixed rates")
        table(["target pps", "ring buffer", "received pps", "CPU %", "VmHWM MiB",
               "RSS at end MiB", "of it BPF maps MiB", "traced/received", "drops (non-zero)"],
              [(f"{r['rate_target'] or 'max'}" + (" --aggregate" if r.get("aggregate") else "")
                + (f", reader pausing {r['reader_pause_us']} us a read, {r['sent']} sent"
                   if r.get("reader_pause_us") else ""),
                f"{r['ringbuf_mb']} MiB" if r.get("ringbuf_mb") else "default",
                f"{r['recv_pps']:.0f}",
                f"{r['cpu_pct']:.2f}" + (f" (±{r['cpu_resolution_pct']:.2f})"
                                         if r["cpu_resolution_pct"] >= 0.005 else ""),
                f"{r['vmhwm_kib'] / 1024:.1f}" if r["vmhwm_kib"] else "n/a",
                f"{sum(r['rss_kib'].values()) / 1024:.1f}" if r.get("rss_kib") else "n/a",
                f"{r.get('bpf_map_rss_kib', 0) / 1024:.1f}",
                f"{(r['traced_packets'] or 0) / r['received']:.3f}" if r["received"] else "n/a",
                ", ".join(f"{k} {n}" for k, n in r["drops"].items() if n) or "none")
               for r in res["daemon"]])
    ss = res.get("startstop")
    if ss:
        title(f"Start-up and shut-down ({len(ss['reps'])} runs, medians)")
        mw = ss.get("most_walked")
        table(["exec to ready", "of it: BPF object to attached", "of that: load (BTF, verifier)",
               "most walked by the verifier", "SIGTERM to exit"],
              [(f"{ss['attach_ms']:.0f} ms",
                f"{ss['programs_ms']:.0f} ms" if "programs_ms" in ss else "n/a",
                f"{ss['load_ms']:.0f} ms" if "load_ms" in ss else "n/a",
                f"{mw['program']}, {mw['instructions']:,} instructions" if mw else "n/a",
                f"{ss['detach_ms']:.0f} ms")])
    ops = ops_rows(res, FLOOR_REF)
    if ops:
        title(ops_title(res))
        table(["work", "tracer"] + list(OPS_HEAD) + ["BPF ns"], ops)
    title(f"Targets (issue 32: against {FLOOR_REF} in the same run, and the daemon's share traced)")
    table(["target", "measured", "limit", "status"],
          [(w, v, l, {True: "met", False: "MISSED", None: "not measured", "figure": "-",
                      "inconclusive": "inconclusive (the floor's figure is at or below 0: noise)"}[ok])
           for w, v, l, ok in res.get("targets", [])])
    seen = {}
    for e in res.get("errors", []):
        key = f"{e['variant']}: {e['message']}"
        seen[key] = seen.get(key, 0) + 1
    for key, n in seen.items():
        out.append(f"error: {key}" + (f" (x{n})" if n > 1 else ""))
    for n in res.get("notes", []):
        out.append(f"note: {n}")
    for r in (res.get("roundtrip") or {}).get("no_figure", []):
        out.append(f"no figure: roundtrip {r['path']} {r['variant']} (round {r['round'] + 1}): "
                   f"{r['no_figure']}")
    for when in ("start", "end"):
        busy = (res.get("host") or {}).get(f"busy_{when}") or []
        if busy:
            out.append(f"warning: host not quiet at the {when}: " +
                       ", ".join(f"{b['comm']} (pid {b['pid']}, {b['cpu_pct']} % of a CPU)" for b in busy) +
                       "; absolute figures are suspect, A/B within this run less so")
    return "\n".join(out)


# Parts that measure only the daemon; the others compare every tracer available.
NETLATD_ONLY_PARTS = ("daemon", "startstop", "lines")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tools", required=True, help="directory of the nlbench-* tools")
    # run.sh passes the daemon in the environment: a process whose command line
    # says "netlatd" is fair game for someone's `pkill -f netlatd` on a shared host.
    ap.add_argument("--netlatd", default=os.environ.get("NLBENCH_DAEMON") or None,
                    help="netlatd binary (default $NLBENCH_DAEMON; its variants are "
                         "skipped without it)")
    ap.add_argument("--netlatd-b", default=os.environ.get("NLBENCH_DAEMON_B") or None,
                    help="a second netlatd binary, measured as variant netlatd-b beside the "
                         "first in every comparing part (an A/B of two builds, interleaved "
                         "like the rest; default $NLBENCH_DAEMON_B)")
    ap.add_argument("--bt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "netdev-stages.bt"))
    ap.add_argument("--out", default="bench-results.json")
    ap.add_argument("--markdown", help="also write the tables as Markdown here")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the bench works")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--hook-rounds", type=int,
                    help="interleaved rounds of the hooks part's loopback round trips "
                         "(default 1 with --smoke, else 5); figures are per-round medians")
    ap.add_argument("--count", type=int, help="round trips per run")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--flood-seconds", type=float)
    ap.add_argument("--max-packets", type=float, default=50e6)
    ap.add_argument("--startstop-reps", type=int)
    ap.add_argument("--netns", help="namespace name (default nlbench-PID)")
    ap.add_argument("--no-bpftrace", action="store_true")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--no-aggregate", action="store_true",
                    help="skip the netlatd-aggregate variant (netlatd --aggregate: histograms kept in the "
                         "kernel, records only for outliers)")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floor variants (nlbench-floor at netlatd's hooks)")
    ap.add_argument("--no-sockperf", action="store_true",
                    help="skip the sockperf client in the round-trip part")
    ap.add_argument("--sockperf-seconds", type=int,
                    help="length of each sockperf ping-pong run (sockperf's -t)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--pin-cpu", type=int,
                    help="CPU the ping-pong client and server share (default: the last "
                         "one; -1: leave them to the scheduler)")
    ap.add_argument("--ringbuf-mb", default="4,1",
                    help="daemon part: also run at 200k pps with netlatd --ringbuf-mb N, "
                         "for each N of this comma list ('' for none; default 4,1: "
                         "either side of netlatd's default of 2)")
    ap.add_argument("--rates", default="10000,100000,200000,0",
                    help="daemon part: the flood rates in packets/s, comma list (0: unpaced)")
    ap.add_argument("--deep-reader", action="append", default=[], metavar="PPS:PAUSE_US",
                    help="daemon part: one more flood at PPS with a reader that sleeps PAUSE_US "
                         "after each read of up to 64 datagrams (queued unread on its 16 MiB "
                         "buffer); repeatable")
    ap.add_argument("--only", help="comma list of parts: roundtrip,rate,hooks,daemon,startstop,lines")
    a = ap.parse_args()
    dflt = dict(rounds=(1, 7), hook_rounds=(1, 5), count=(300, 20000), warmup=(50, 2000), flood_seconds=(0.5, 3.0),
                startstop_reps=(2, 7),
                # sockperf measures a window of about (seconds - 1): none at 1 s.
                sockperf_seconds=(2, 3))
    for k, (smoke, full) in dflt.items():
        if getattr(a, k) is None:
            setattr(a, k, smoke if a.smoke else full)
    a.rates = [int(x) for x in a.rates.split(",") if x]
    a.deep_reader = [tuple(int(x) for x in d.split(":")) for d in a.deep_reader]
    if a.pin_cpu is None:
        a.pin_cpu = os.cpu_count() - 1
    a.ringbuf_mb = [int(x) for x in a.ringbuf_mb.split(",") if x] if a.ringbuf_mb else []
    all_parts = ["roundtrip", "rate", "hooks", "daemon", "startstop", "lines"]
    parts = a.only.split(",") if a.only else all_parts
    if set(parts) - set(all_parts):
        ap.error(f"--only: unknown part(s) {','.join(sorted(set(parts) - set(all_parts)))}")
    if os.geteuid() != 0:
        log("needs root (network namespaces, BPF, sysctl)")
        return 77
    for path in (a.netlatd, a.netlatd_b):
        if path and not os.access(path, os.X_OK):
            raise SystemExit(f"bench: error: {path} is not executable")

    b = Bench(a)

    watch_signals()
    t0 = time.monotonic()
    rc = 0
    try:
        b.results["host"] = {"kernel": os.uname().release, "cpus": os.cpu_count(),
                             "loadavg_start": os.getloadavg()[0],
                             "netlatd": a.netlatd, "variants": b.variants()}
        me = (os.getpid(), os.getppid())
        b.results["host"]["busy_start"] = host_busy(exclude=me)
        for p in b.results["host"]["busy_start"]:
            log(f"warning: host not quiet: pid {p['pid']} ({p['comm']}) at {p['cpu_pct']} % of a CPU")
        b.find_floor_and_sockperf()
        b.results["host"]["variants"] = b.variants()
        b.setup_netns()
        steps = {"roundtrip": roundtrip, "rate": packet_rate, "hooks": hook_costs,
                 "daemon": daemon_cost, "startstop": startstop, "lines": hot_lines}
        for p in parts:
            if p in NETLATD_ONLY_PARTS and not a.netlatd:
                b.results["notes"].append(f"{p}: netlatd not available, skipped")
                continue
            t_part = time.monotonic()
            try:
                steps[p](b)
            finally:
                # Other work on the host shows up here (our own floods count too).
                b.results["host"].setdefault("loadavg_after", {})[p] = os.getloadavg()[0]
                b.results["host"].setdefault("part_seconds", {})[p] = \
                    round(time.monotonic() - t_part, 1)
    except (BenchError, Stopped, subprocess.TimeoutExpired, OSError, KeyboardInterrupt) as e:
        msg = stop_reason[0] if stop_reason else f"{type(e).__name__}: {e}"
        log(f"error: {msg}")
        b.results["errors"].append({"variant": "bench", "message": msg})
        rc = 130 if stop_reason else 1
    finally:
        b.cleanup()
    b.results["host"]["loadavg_end"] = os.getloadavg()[0]
    if "host" in b.results:
        # After the clean-up, so only what outlived this run (or was never ours) shows.
        b.results["host"]["busy_end"] = host_busy(exclude=(os.getpid(), os.getppid()))
    b.results["elapsed_s"] = time.monotonic() - t0
    summarize(b.results)
    b.results["targets"] = evaluate(b.results, FLOOR_REF)
    with open(a.out, "w") as f:
        json.dump(b.results, f, indent=1)
    print(render(b.results))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(render(b.results, md=True) + "\n")
    log(f"results in {a.out} ({b.results['elapsed_s']:.0f} s)")
    if rc == 0 and b.bench_failures:
        log("error: the floor could not be measured (see errors above)")
        rc = 1
    if rc == 0 and b.tracer_failures:
        log("error: netlatd could not be measured (see errors above)")
        rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
