"""sockperf's ping-pong runs: their figures from its report, and a run whose
measured window kept nothing told apart from a sockperf that failed."""
import re

from bench_common import BenchError, NoFigure, log


def sockperf_saw_nothing(text):
    """Whether a sockperf run ended without one round trip in its measured window."""
    return "No valid observations" in text


def sockperf_figures(run_once, v, seconds, tries=2):
    """The figures of a sockperf client run; run_once() runs it: (exit code, output).
    sockperf keeps only the round trips of a window inside its run: after its 400 ms
    warm-up and before a cool-down, about 1 s of a 2 s run, none of a 1 s run ("No
    valid observations found", every time here: the smoke run takes 2 s). A host that
    stalls the client through the window leaves it empty too: it runs again, and if
    no try kept one, the figure is missing (NoFigure), which is not the bench broken
    (BenchError: the tool failed)."""
    for attempt in range(tries):
        rc, text = run_once()
        res = sockperf_result(text)
        if rc != 0 or res or not sockperf_saw_nothing(text):
            break
        log(f"sockperf ({v}): no valid observations in its window (try {attempt + 1} of {tries})")
    else:
        raise NoFigure(f"sockperf ({v}) ran {seconds} s {tries} times and kept no observation "
                       "in its window")
    if rc != 0 or not res:
        tail = "\n".join(text.splitlines()[-15:])
        raise BenchError(f"sockperf client ({v}) failed (exit {rc}): {tail}")
    return res


def sockperf_result(text):
    """Figures of one `sockperf ping-pong --full-rtt` run from its report (usec)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    out = {}
    for key, pat in (("p50_ns", r"percentile 50\.000 =\s*([0-9.]+)"),
                     ("p90_ns", r"percentile 90\.000 =\s*([0-9.]+)"),
                     ("p99_ns", r"percentile 99\.000 =\s*([0-9.]+)"),
                     ("min_ns", r"<MIN> observation =\s*([0-9.]+)"),
                     ("max_ns", r"<MAX> observation =\s*([0-9.]+)"),
                     ("mean_ns", r"avg-rtt=([0-9.]+)")):
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1)) * 1000
    m = re.search(r"Total (\d+) observations", text)
    out["count"] = int(m.group(1)) if m else 0
    m = re.search(r"# dropped messages = (\d+)", text)
    out["lost"] = int(m.group(1)) if m else 0
    # Every datagram of the run, warm-up included: what a tracer on lo sees.
    m = re.search(r"\[Total Run\].*SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    if m:
        out["packets_total"] = int(m.group(1)) + int(m.group(2))
    return out if "p50_ns" in out and "p99_ns" in out and "mean_ns" in out else None
