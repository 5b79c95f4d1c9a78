#!/usr/bin/env python3
"""The bench's targets (bench/targets.py, issue 32: ratios to floor-clock of the same
run, the daemon's share traced) and its op counts' window (bench/opcounts.py: the
interval lines from the first to the last with matching packets, per packet)."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "bench"))
import opcounts  # noqa: E402
import targets  # noqa: E402


def line(matching, **ops):
    return {"type": "interval", "coverage": {"matching": matching}, "ops": ops}


def results(nl_rt=2600, floor_rt=2000, floor_delta=1500):
    return {
        "hooks_roundtrip": {"netlatd": {"bpf_ns_per_round_trip": nl_rt, "ratio_to_floor": nl_rt / floor_rt,
                                        "runs_per_round_trip": 20},
                            "floor-clock": {"bpf_ns_per_round_trip": floor_rt, "runs_per_round_trip": 16}},
        "hooks": {"netlatd": {"bpf_ns_per_packet": 1600},
                  "floor-clock": {"bpf_ns_per_packet": 1000, "received": 100, "progs": [{"run_cnt": 500}]}},
        "packet_rate": {"summary": {"netlatd": {"loss_pct": 12.0}, "floor-clock": {"loss_pct": 10.0}}},
        "roundtrip": {"summary": {"loopback": {"netlatd": {"p50_delta_ns": 1800},
                                               "floor-clock": {"p50_delta_ns": floor_delta}}}},
        "daemon": [{"rate_target": 200000, "received": 10000, "traced_packets": 9995, "vmhwm_kib": 2048},
                   {"rate_target": 0, "received": 10000, "traced_packets": 9800, "vmhwm_kib": 4096},
                   {"rate_target": 200000, "ringbuf_mb": 1, "received": 10, "traced_packets": 0,
                    "vmhwm_kib": 1}],
    }


class Targets(unittest.TestCase):
    def status(self, res):
        return {row[0]: row[3] for row in targets.evaluate(res, "floor-clock")}

    def test_each_target_against_the_floor_and_the_share_traced(self):
        s = self.status(results())
        self.assertTrue(s["BPF time per loopback round trip"])        # 1.30 x
        self.assertFalse(s["BPF time per flooded packet (max rate)"])  # 1.6 x > 1.5
        self.assertTrue(s["max UDP receive rate lost"])                # 1.2 x
        self.assertTrue(s["loopback round trip p50 added"])            # 1.2 x
        self.assertTrue(s["daemon: one socket at 200k pps, packets traced"])     # 99.95 %
        self.assertFalse(s["daemon: one socket at the max rate, packets traced"])  # 98 %
        self.assertEqual(s["daemon peak RSS (VmHWM)"], "figure")

    def test_the_flood_is_judged_by_the_median_of_its_per_round_ratios(self):
        res = results()
        res["hooks"]["netlatd"].update(ratio_to_floor=1.4, ratio_to_floor_rounds=[1.3, 1.4, 1.7])
        s = self.status(res)
        self.assertTrue(s["BPF time per flooded packet (max rate)"])  # 1.4, though 1600 / 1000
        row = [r for r in targets.evaluate(res, "floor-clock") if r[0].startswith("BPF time per flooded")][0]
        self.assertIn("1.40 x the clock floor's 1000 ns, rounds 1.30-1.70", row[1])

    def test_a_floor_delta_at_zero_is_inconclusive_and_a_missing_part_not_measured(self):
        res = results(floor_delta=-20)
        del res["packet_rate"]
        s = self.status(res)
        self.assertEqual(s["loopback round trip p50 added"], "inconclusive")
        self.assertIsNone(s["max UDP receive rate lost"])


class OpCounts(unittest.TestCase):
    def test_the_window_runs_from_the_first_to_the_last_interval_with_matching_packets(self):
        w = opcounts.ops_window([line(0, lock_pairs=50), line(10, lock_pairs=20, clock_reads=60),
                                 line(0, lock_pairs=1), line(30, lock_pairs=60), line(0, lock_pairs=9),
                                 {"type": "outlier"}])
        self.assertEqual(w["matching"], 40)
        self.assertEqual(w["ops"]["lock_pairs"], 81)
        self.assertEqual(opcounts.per_packet(w)["clock_reads"], 1.5)

    def test_no_ops_without_count_ops(self):
        self.assertIsNone(opcounts.ops_window([{"type": "interval", "coverage": {"matching": 3}}]))
        self.assertIsNone(opcounts.per_packet(opcounts.ops_window([line(0, lock_pairs=1)])))

    def test_floor_clock_reads_the_clock_once_a_run(self):
        f = opcounts.floor_clock_per_packet(results(), "floor-clock")
        self.assertEqual(f["loopback round trip"]["clock_reads"], 8)  # 16 runs, 2 datagrams
        self.assertEqual(f["max-rate flood"]["clock_reads"], 5)
        self.assertEqual(f["max-rate flood"]["lock_pairs"], 0)


if __name__ == "__main__":
    unittest.main()
