#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds netlatd and
# runs it for 30 s on loopback with traffic it makes itself (UDP and TCP to
# 127.0.0.1:47000), printing per-stage histograms every 2 s.
#   scripts/demo.sh [extra netlatd flags, e.g. --format json]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target netlatd
exec ./build/netlatd --demo --duration 30 "$@"
