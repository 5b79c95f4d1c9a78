#!/usr/bin/env python3
"""The bench's sockperf runs (bench/bench_sockperf.py sockperf_figures): a run whose
measured window kept no round trip is run again, then reported as a missing
figure, never as the bench broken; a sockperf that fails is the bench broken.
The outputs are sockperf 3.7's own, captured on loopback: a 1 s run (its
window is always empty) and a 2 s run."""
import contextlib
import io
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "bench"))
import bench_common  # noqa: E402
import bench_report  # noqa: E402
import bench_sockperf  # noqa: E402


def fixture(name):
    with open(os.path.join(here, "..", "fixtures", "sockperf", name), errors="replace") as f:
        return f.read()


EMPTY = fixture("no-valid-observations.txt")
GOOD = fixture("ping-pong-2s.txt")


class Runs:
    """A stand-in for the sockperf client: each call returns the next (rc, output)."""

    def __init__(self, *outputs):
        self.outputs, self.calls = list(outputs), 0

    def __call__(self):
        self.calls += 1
        return self.outputs.pop(0)


def quiet(fn, *args):
    with contextlib.redirect_stderr(io.StringIO()):
        return fn(*args)


class SockperfTest(unittest.TestCase):
    def test_a_good_run_gives_its_figures(self):
        runs = Runs((0, GOOD))
        res = quiet(bench_sockperf.sockperf_figures, runs, "baseline", 2)
        self.assertEqual(runs.calls, 1)
        self.assertAlmostEqual(res["p50_ns"], 11296.0)
        self.assertAlmostEqual(res["p99_ns"], 30696.0)
        self.assertAlmostEqual(res["mean_ns"], 20323.0)
        self.assertEqual(res["count"], 40902)
        self.assertEqual(res["packets_total"], 98859 + 98858)

    def test_an_empty_window_is_run_again(self):
        runs = Runs((0, EMPTY), (0, GOOD))
        res = quiet(bench_sockperf.sockperf_figures, runs, "netlatd", 2)
        self.assertEqual(runs.calls, 2)
        self.assertAlmostEqual(res["p50_ns"], 11296.0)

    def test_windows_empty_every_time_are_a_missing_figure_not_a_broken_bench(self):
        runs = Runs((0, EMPTY), (0, EMPTY))
        with self.assertRaises(bench_common.NoFigure) as e:
            quiet(bench_sockperf.sockperf_figures, runs, "floor-clock", 1)
        self.assertEqual(runs.calls, 2)
        self.assertIn("floor-clock", str(e.exception))
        self.assertNotIsInstance(e.exception, bench_common.BenchError)

    def test_a_sockperf_that_fails_is_the_bench_broken(self):
        runs = Runs((1, "sockperf: ERROR: bind: Address already in use"))
        with self.assertRaises(bench_common.BenchError) as e:
            quiet(bench_sockperf.sockperf_figures, runs, "baseline", 2)
        self.assertEqual(runs.calls, 1)
        self.assertIn("Address already in use", str(e.exception))

    def test_output_without_figures_or_the_empty_window_message_is_the_bench_broken(self):
        with self.assertRaises(bench_common.BenchError):
            quiet(bench_sockperf.sockperf_figures, Runs((0, "sockperf: == version #3.7 ==")), "baseline", 2)

    def test_a_missing_figure_is_shown_and_leaves_the_summary_whole(self):
        run = {"round": 0, "path": "loopback", "variant": "baseline", "p50_ns": 10000.0,
               "p99_ns": 20000.0, "mean_ns": 12000.0, "lost": 0}
        res = {"roundtrip": {"count": 300, "warmup": 50, "rounds": 1, "sockperf_seconds": 2,
                             "runs": [run], "summary": {}, "no_figure": [
            {"round": 0, "path": "loopback-sockperf", "variant": "baseline",
             "no_figure": "sockperf (baseline) ran 2 s 2 times and kept no observation"}]},
            "errors": [], "notes": []}
        bench_report.summarize(res)
        self.assertEqual(list(res["roundtrip"]["summary"]), ["loopback"])
        text = bench_report.render(res)
        self.assertIn("no figure: roundtrip loopback-sockperf baseline (round 1)", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
