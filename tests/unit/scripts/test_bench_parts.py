#!/usr/bin/env python3
"""The bench's ping-pong commands and its hooks part without a tracer
(bench/bench_setup.py, bench/bench_hooks.py): each ping-pong server and client is
built by one function, to the argv every part has always run; a hooks part with
no tracer to measure reports a missing figure, not a crash or a broken bench."""
import os
import shutil
import sys
import types
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "bench"))
import bench_common  # noqa: E402
import bench_hooks  # noqa: E402
import bench_report  # noqa: E402
import bench_setup  # noqa: E402


class FakeProc:
    """Stands in for bench_proc.Proc: records the command, is ready, exits 0 with a result."""
    started = []

    def __init__(self, bench, name, cmd, **kw):
        FakeProc.started.append((name, cmd))

    def wait_ready(self, timeout):
        return True

    def wait(self, timeout, overrun=None):
        return 0

    def json_lines(self):
        return [{"p50_ns": 1000}]


def options(pin_cpu=3):
    return types.SimpleNamespace(netns="nlbench-test", keep_logs=False, tools="/t", smoke=True,
                                 pin_cpu=pin_cpu, count=300, warmup=50, netlatd=None,
                                 netlatd_b=None, no_aggregate=False, no_bpftrace=True,
                                 no_perf=True)


class PingPongCommands(unittest.TestCase):
    def setUp(self):
        self.real_proc, bench_setup.Proc = bench_setup.Proc, FakeProc
        FakeProc.started = []

    def tearDown(self):
        bench_setup.Proc = self.real_proc

    def bench(self, pin_cpu=3):
        b = bench_setup.Bench(options(pin_cpu))
        self.addCleanup(shutil.rmtree, b.tmp, True)
        return b

    def test_server(self):
        b = self.bench()
        b.pingpong_server("hooks", "127.0.0.1:5000")
        b.pingpong_server("veth", "10.201.1.2:5000", in_ns=True)
        self.assertEqual(FakeProc.started, [
            ("pingpong-server-hooks", ["taskset", "-c", "3", "/t/nlbench-pingpong", "server",
                                       "--bind", "127.0.0.1:5000", "--seconds", "3600"]),
            ("pingpong-server-veth", ["ip", "netns", "exec", "nlbench-test",
                                      "taskset", "-c", "3", "/t/nlbench-pingpong", "server",
                                      "--bind", "10.201.1.2:5000", "--seconds", "3600"])])

    def test_client(self):
        b = self.bench(pin_cpu=-1)
        res = b.pingpong_client("loopback", "127.0.0.1:5000", "127.0.0.1:5001", tracer="netlatd")
        self.assertEqual(res, {"p50_ns": 1000})
        self.assertEqual(FakeProc.started, [
            ("pingpong-client-loopback", ["/t/nlbench-pingpong", "client",
                                          "--to", "127.0.0.1:5000", "--bind", "127.0.0.1:5001",
                                          "--count", "300", "--warmup", "50"])])


class HooksWithoutTracer(unittest.TestCase):
    def test_no_figure(self):
        # No netlatd (so no floor) and no bpftrace: baseline only. The bench must
        # not start a server nor divide the rounds among no tracer.
        b = types.SimpleNamespace(a=options(), results={}, variants=lambda: ["baseline"])
        with self.assertRaises(bench_common.NoFigure):
            bench_hooks.hook_costs(b)
        self.assertNotIn("hooks", b.results)

    def test_reported(self):
        res = {"errors": [], "notes": [],
               "no_figure": [{"part": "hooks", "no_figure": "no tracer to measure"}]}
        self.assertIn("no figure: hooks: no tracer to measure", bench_report.render(res))


class FloodRounds(unittest.TestCase):
    """The flood is measured in interleaved rounds, the order turned each round, and
    a tracer's figure against the floor is the median of its per-round ratios: run
    in one fixed order, whichever came later was the slower on this host."""

    def test_rounds_turn_the_order_and_the_ratio_is_per_round(self):
        order = []
        host_speed = iter(range(1, 100))  # the host gets slower with every flood

        def flood(b, v):
            order.append(v)
            slow = next(host_speed)
            per_packet = {"floor-clock": 100, "netlatd": 150}[v] * slow
            return {"received": 1000, "recv_pps": 1e5, "wall_s": 1.0, "traced_packets": None,
                    "bpf_ns_per_packet": per_packet,
                    "progs": [{"name": "p", "run_cnt": 1000, "run_time_ns": per_packet * 1000}]}

        real, bench_hooks.flood_hook_costs = bench_hooks.flood_hook_costs, flood
        self.addCleanup(setattr, bench_hooks, "flood_hook_costs", real)
        b = types.SimpleNamespace(a=types.SimpleNamespace(hook_rounds=3))
        rounds = bench_hooks.flood_rounds(b, ["floor-clock", "netlatd"])
        self.assertEqual(order, ["floor-clock", "netlatd", "netlatd", "floor-clock",
                                 "floor-clock", "netlatd"])
        out = {v: bench_hooks.flood_costs(v, rs) for v, rs in rounds.items()}
        bench_hooks.ratios_to_floor(out, rounds, key="bpf_ns_per_packet")
        nl = out["netlatd"]
        self.assertEqual(nl["rounds"], 3)
        self.assertEqual(nl["bpf_ns_rounds"], [300, 450, 900])
        self.assertEqual(nl["progs"][0]["run_cnt"], 3000)
        self.assertEqual(nl["progs"][0]["runs_per_packet"], 1.0)
        # Each round against that round's floor (rounds 1 and 3: floor first).
        self.assertEqual(nl["ratio_to_floor_rounds"], [3.0, 1.125, 1.8])
        self.assertAlmostEqual(nl["ratio_to_floor"], 1.8)


if __name__ == "__main__":
    unittest.main(verbosity=2)
