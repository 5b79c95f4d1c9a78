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

from bench_common import FLOOR_REF, BenchError, NoFigure, Stopped, log
from bench_daemon import daemon_cost, startstop
from bench_host import host_busy
from bench_hooks import hook_costs
from bench_lines import hot_lines
from bench_rate import packet_rate
from bench_report import render, summarize
from bench_roundtrip import roundtrip
from bench_setup import Bench
from bench_signals import stop_reason, watch_signals
from targets import evaluate

# Parts that measure only the daemon; the others compare every tracer available.
NETLATD_ONLY_PARTS = ("daemon", "startstop", "lines")


def arg_parser():
    """bench.py's options (see --help)."""
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
    return ap


def settle_args(ap, a):
    """The defaults that depend on --smoke, the lists parsed; returns the parts to run."""
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
    return parts


def run_parts(b, parts):
    """The host's figures, the set-up and each part; the clean-up, also on error or
    stop. Returns the exit status so far: 0, 1 (the bench broke) or 130 (stopped)."""
    a = b.a
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
            except NoFigure as e:
                # The part had nothing to measure: a figure missing, the bench whole.
                log(f"{p}: no figure: {e}")
                b.results.setdefault("no_figure", []).append({"part": p, "no_figure": str(e)})
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
    return rc


def main():
    ap = arg_parser()
    a = ap.parse_args()
    parts = settle_args(ap, a)
    if os.geteuid() != 0:
        log("needs root (network namespaces, BPF, sysctl)")
        return 77
    for path in (a.netlatd, a.netlatd_b):
        if path and not os.access(path, os.X_OK):
            raise SystemExit(f"bench: error: {path} is not executable")

    b = Bench(a)

    watch_signals()
    t0 = time.monotonic()
    rc = run_parts(b, parts)
    if "host" in b.results:  # not there if run_parts failed at its first step
        b.results["host"]["loadavg_end"] = os.getloadavg()[0]
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
