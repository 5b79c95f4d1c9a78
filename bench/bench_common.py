"""What every part of the bench shares: its errors, its log line, the names of
the floor's variants, and medians of figures a run may not have got to."""
import statistics
import sys

# nlbench-floor (bench/floor.cpp) at the hooks netlatd's plan chose here, with
# programs that return at once, and with programs that read the clock once.
FLOOR_VARIANTS = ("floor-empty", "floor-clock")
# The one the ratios are taken to: netlatd must read the clock at its hooks.
FLOOR_REF = "floor-clock"
# netlatd tracing one matching packet in 16 (the packet-rate part only).
SAMPLE_VARIANT = "netlatd-sample16"


class BenchError(Exception):
    """The bench itself cannot go on (not a missed target)."""


class NoFigure(Exception):
    """A third-party tool ran to its end and measured nothing (sockperf's "No valid
    observations found"), or a part found nothing to measure (the hooks part with
    no tracer): a figure missing from the results, not the bench broken."""


class Stopped(Exception):
    """A stop signal arrived (see watch_signals)."""


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
