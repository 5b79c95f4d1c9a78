#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds netlatd and
# runs it for 30 s on loopback with traffic it makes itself (UDP and TCP to
# 127.0.0.1:47000): per-stage histograms every 2 s, and the whole timeline of
# each packet slower than 100 us, as JSON lines in build/demo/netlatd.jsonl.
# Then `netlatd report` draws them on one page, build/demo/report.html, whose
# path it prints last (open it in any browser; it needs nothing else).
#   scripts/demo.sh [extra netlatd flags, e.g. --interval 1 or --outliers-over 50us]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target netlatd
out=build/demo
mkdir -p "$out"
rm -f "$out/netlatd.jsonl"  # --output appends
echo "demo: tracing loopback for 30 s; JSON lines go to $out/netlatd.jsonl"
./build/netlatd --demo --duration 30 --format json --outliers-over 100us --output "$out/netlatd.jsonl" "$@"
./build/netlatd report --output "$out/report.html" "$out/netlatd.jsonl"
echo "demo: the report is $PWD/$out/report.html"
