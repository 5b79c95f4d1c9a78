#!/usr/bin/env python3
"""Writes tests/unit/fixtures/page/golden.jsonl, the small input of tests/unit/test_page*.cpp and
tests/page/: three interval lines with their histograms computed here from
the samples below by netlatd's own rules (docs/OUTPUT.md: 64 buckets a power
of two, nearest-rank percentiles at the bucket's midpoint clamped to
[min, max]), two outlier lines and a packet-only one from the docs, and
lines that are not netlatd's (truncated, foreign, another schema).
Run it again only when the input must change: the tests' numbers follow it."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlatd_lines import interval, packet  # noqa: E402

A = [packet(1500, 3100, 13356, 2200), packet(1543, 3215, 13887, 2223), packet(1580, 3250, 15000, 2250),
     packet(1620, 3400, 18432, 2290)]
B = [packet(1510, 3120, 14000, 2210), packet(1530, 3180, 2300600, 4500), packet(1600, 3300, 16000, 2260),
     packet(1700, 3500, 17000, 2280), packet(2100, 4500, 40000, 5200, "tcp"), packet(2200, 4700, 52000, 5400, "tcp")]
C = [packet(1490, 3050, 12000, 2190), packet(1495, 3060, 12500, 2195)]

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "fixtures", "page")
docs = open(os.path.join(HERE, "outliers.jsonl")).read().splitlines()
lines = [
    interval("2026-11-22T10:00:00.000Z", "2026-11-22T10:00:10.000Z", A, {"stack_dropped": 1}),
    docs[0],  # the docs' outlier: a reader asleep in recvfrom, total 2.3149 ms
    interval("2026-11-22T10:00:10.000Z", "2026-11-22T10:00:20.000Z", B,
             {"ringbuf_full": 2, "ambiguous_reads": 1, "reader_unknown": 1}, future_field={"x": 1}),
    docs[1],  # a packet-only record: no total, no reader
    docs[2],  # a faster outlier (total 52 us), reader comm with markup in it
    '{"type":"interval","schema":2,"time":"2026-11-22T10:00:3',  # truncated
    '{"level":"info","msg":"not netlatd"}',
    '{"type":"interval","schema":3,"time":"2026-11-22T10:00:30.000Z"}',
    interval("2026-11-22T10:00:20.000Z", "2026-11-22T10:00:30.000Z", C, {"new_reason": 3}, final=True),
]
with open(os.path.join(HERE, "golden.jsonl"), "w") as f:
    f.write("\n".join(lines) + "\n")
