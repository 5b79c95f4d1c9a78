#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds netlatd and
# runs every test tier: unit, bpf, service, prometheus, vm, and a smoke run of the
# benchmark (bench: seconds, so it never rots; its figures mean nothing). A
# tier that cannot run here reports its tests SKIPPED with the reason. Exit
# status: 0 when every tier passed, else the first failing tier's.
#
#   scripts/test.sh               all tiers
#   NETLATD_TIERS="unit bpf" scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tiers=${NETLATD_TIERS:-"unit bpf service prometheus vm bench"}
build=${NETLATD_BUILD_DIR:-build}

extra=()
[[ " $tiers " == *" vm "* ]] && extra+=(--vm)
[[ " $tiers " == *" bench "* ]] && extra+=(--bench)
[[ " $tiers " == *" prometheus "* ]] && extra+=(--prometheus)
scripts/install-deps.sh "${extra[@]}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"

rc=0
summary=()
for tier in $tiers; do
  echo "=== tier $tier"
  if [ "$tier" = bench ]; then
    set +e
    bench/run.sh --smoke --build-dir "$build" --out "$build/bench-smoke.json"
    trc=$?
    set -e
    if [ "$trc" -eq 0 ]; then
      summary+=("bench: smoke run passed ($build/bench-smoke.json)")
    elif [ "$trc" -eq 77 ]; then
      summary+=("bench: SKIPPED (cannot run here: see above)")
      trc=0
    else
      summary+=("bench: smoke run FAILED (exit $trc)")
    fi
    [ "$trc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$trc
    continue
  fi
  log=$(mktemp)
  set +e
  verbose=()
  # The vm tier's log is the point: the guest's --check and its stage table.
  [ "$tier" = vm ] && verbose=(-V)
  ctest --test-dir "$build" -L "^${tier}\$" --output-on-failure "${verbose[@]}" 2>&1 | tee "$log"
  trc=${PIPESTATUS[0]}
  set -e
  line=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no tests")
  skipped=$(grep -c -- '\*\*\*Skipped' "$log" || true)
  summary+=("$tier: $line, $skipped skipped")
  grep -E -A2 -- '\*\*\*Skipped' "$log" | grep -E 'SKIP|Skipped' | head -20 || true
  rm -f "$log"
  [ "$trc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$trc
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $rc
