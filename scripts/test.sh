#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds netlatd and
# runs every test tier: unit, bpf, service, prometheus, vm, a smoke run of the
# benchmark (bench: seconds, so it never rots; its figures mean nothing), the
# soak (the daemon for NETLATD_SOAK_SECONDS, default 60, under a flood,
# socket churn, its interface re-created, SIGHUP with rotation and a stalled
# consumer), and the hardening tiers: asan (unit, bpf and service built with ASan+UBSan), tsan
# (unit and service built with TSan) and fuzz (each libFuzzer harness of
# tests/fuzz for NETLATD_FUZZ_SECONDS, default 60). Each sanitized build has a
# build directory of its own (build-asan, build-tsan, build-fuzz). A tier
# that cannot run here reports its tests SKIPPED with the reason. Exit
# status: 0 when every tier passed, else the first failing tier's.
#
#   scripts/test.sh               all tiers
#   NETLATD_TIERS="unit bpf" scripts/test.sh
#   NETLATD_TIERS="asan" scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tiers=${NETLATD_TIERS:-"unit bpf service prometheus vm bench soak asan tsan fuzz"}
build=${NETLATD_BUILD_DIR:-build}
fuzz_seconds=${NETLATD_FUZZ_SECONDS:-60}

has_tier() { [[ " $tiers " == *" $1 "* ]]; }

extra=()
has_tier vm && extra+=(--vm)
has_tier bench && extra+=(--bench)
has_tier prometheus && extra+=(--prometheus)
scripts/install-deps.sh "${extra[@]}"
for tier in unit bpf service vm bench soak; do
  if has_tier $tier; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$(nproc)"
    break
  fi
done

rc=0
summary=()
checks=()  # the failed assertions, one line each: the CI page's tail shows them
fail() { [ "$rc" -eq 0 ] && rc=$1; return 0; }

# failed_checks LOG: one line per block Catch2 wrote for a failed assertion
# ("test_x.cpp:12: CHECK( a == b ) with expansion: 1 == 2 with message: ..."),
# its lines joined up to its blank line, at most 400 characters.
failed_checks() {
  awk '/: FAILED:$/ { f = 1; s = $0; sub(/^.*\//, "", s); sub(/ FAILED:$/, "", s); next }
       f && /^[[:space:]]*$/ { print s; f = 0; next }
       f { gsub(/^[[:space:]]+/, ""); s = s " " $0; if (length(s) > 400) { print substr(s, 1, 400) " ..."; f = 0 } }
       END { if (f) print s }' "$1"
}

# ctest_tier NAME BUILD_DIR LABELS [CTEST ARGS...]: the tests of those CTest
# labels (a regex), run under ${ctest_prefix[@]} if set.
ctest_prefix=()
ctest_tier() {
  local name=$1 dir=$2 labels=$3 log trc line skipped
  shift 3
  local args=("$@")
  # The vm tier's log is the point: the guest's --check and its stage table;
  # the soak's, its summary line (figures of every check).
  [ "$name" = vm ] || [ "$name" = soak ] && args+=(-V)
  log=$(mktemp)
  set +e
  # -j: the unit tests, which touch no shared state, share the cores; every
  # other tier's tests are RUN_SERIAL (tests/CMakeLists.txt), so they still
  # run alone.
  "${ctest_prefix[@]}" ctest --test-dir "$dir" -L "$labels" -j "$(nproc)" --output-on-failure "${args[@]}" 2>&1 | tee "$log"
  trc=${PIPESTATUS[0]}
  set -e
  line=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no tests")
  skipped=$(grep -c -- '\*\*\*Skipped' "$log" || true)
  summary+=("$name: $line, $skipped skipped")
  # The names of the failed tests, so the summary (the tail a CI page shows)
  # says which without a search through the whole log.
  while IFS= read -r failed; do
    summary+=("  $name FAILED:${failed#*-}")
  done < <(sed -n '/The following tests FAILED:/,/^$/p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' || true)
  # Each failed Catch2 assertion on one line: where, what, its expansion and
  # messages (the counters a test prints with INFO), up to 20 a tier.
  while IFS= read -r failed; do
    checks+=("$name: $failed")
  done < <(failed_checks "$log" | head -20)
  grep -E -A2 -- '\*\*\*Skipped' "$log" | grep -E 'SKIP|Skipped' | head -20 || true
  rm -f "$log"
  [ "$trc" -eq 0 ] || fail "$trc"
}

# A build of everything with NETLATD_SANITIZE, by clang: the fuzz harnesses
# need it, and one compiler for the three hardening builds.
sanitized_build() {
  local dir=$1
  shift
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNETLATD_BUILD_BENCH=OFF "$@" >/dev/null
}

# sanitizer_tier NAME SANITIZERS LABELS [CTEST ARGS...]. Reports go to files,
# so that one in a daemon whose stderr no test reads still fails the tier; a
# finding also ends the process (-fno-sanitize-recover, halt_on_error).
sanitizer_tier() {
  local name=$1 sanitize=$2 labels=$3
  shift 3
  local dir="$build-$name"
  local logs="$PWD/$dir/sanitizer-logs"
  sanitized_build "$dir" -DNETLATD_SANITIZE="$sanitize"
  cmake --build "$dir" -j"$(nproc)"
  # World-writable (sticky): the service tier also runs the daemon as an
  # unprivileged user, whose reports must land here too.
  rm -rf "$logs" && mkdir -p "$logs" && chmod 1777 "$logs"
  export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:log_path=$logs/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$logs/tsan"
  # TSan (LLVM 14) maps its shadow memory for at most 28 bits of mmap
  # randomness; with vm.mmap_rnd_bits=32 it dies with "unexpected memory
  # mapping". Without ASLR the tests are the same tests.
  [ "$name" = tsan ] && ctest_prefix=(setarch "$(uname -m)" -R)
  # No second chance: the tests assert invariants (every record right or its
  # loss counted), and one that fails once under a sanitizer has failed.
  ctest_tier "$name" "$dir" "$labels" "$@"
  ctest_prefix=()
  unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  if compgen -G "$logs/*" >/dev/null; then
    echo "=== $name: sanitizer reports"
    for f in "$logs"/*; do
      echo "--- $f"
      head -60 "$f"
    done
    summary+=("$name: sanitizer reports in $logs")
    fail 1
  fi
}

# One harness for NETLATD_FUZZ_SECONDS from its committed seeds, with a fixed
# seed; new inputs go to the build directory, never into the source tree. Its
# exit status goes to $work/rc, for fuzz_report.
fuzz_one() {
  local dir=$1 name=$2 work frc=0
  work="$PWD/$dir/fuzz-work/$name"
  "$dir/tests/fuzz/fuzz_$name" -seed=1 -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/corpus" "$PWD/tests/fuzz/corpus/$name" >"$work/log" 2>&1 || frc=$?
  echo "$frc" >"$work/rc"
}

fuzz_report() {
  local dir=$1 name=$2 work frc runs rate
  work="$PWD/$dir/fuzz-work/$name"
  frc=$(cat "$work/rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
  if [ "$frc" -eq 0 ]; then
    summary+=("fuzz $name: ${runs:-?} runs in ${fuzz_seconds} s (${rate:-?}/s), no finding")
  else
    echo "--- fuzz_$name: exit $frc"
    tail -60 "$work/log"
    summary+=("fuzz $name: FAILED (exit $frc) after ${runs:-?} runs; input in $work/, replay: $dir/tests/fuzz/fuzz_$name FILE")
    fail "$frc"
  fi
}

# The harnesses run one a core: each is one process, and its verdict (a
# finding or none) does not depend on how many inputs it got through.
fuzz_tier() {
  local dir="$build-fuzz" src name names=()
  sanitized_build "$dir" -DNETLATD_SANITIZE=address,undefined -DNETLATD_FUZZ=ON
  cmake --build "$dir" -j"$(nproc)" --target netlatd_fuzzers
  for src in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$src" .cpp)
    name=${name#fuzz_}
    if [ ! -d "tests/fuzz/corpus/$name" ]; then
      summary+=("fuzz $name: FAILED: no seed corpus in tests/fuzz/corpus/$name")
      fail 1
      continue
    fi
    rm -rf "$PWD/$dir/fuzz-work/$name" && mkdir -p "$PWD/$dir/fuzz-work/$name/corpus"
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
    echo "--- fuzz_$name (${fuzz_seconds} s)"
    fuzz_one "$dir" "$name" &
    names+=("$name")
  done
  wait
  for name in "${names[@]}"; do
    fuzz_report "$dir" "$name"
  done
}

bench_tier() {
  local trc
  set +e
  bench/run.sh --smoke --build-dir "$build" --out "$build/bench-smoke.json"
  trc=$?
  set -e
  if [ "$trc" -eq 0 ]; then
    summary+=("bench: smoke run passed ($build/bench-smoke.json)")
  elif [ "$trc" -eq 77 ]; then
    summary+=("bench: SKIPPED (cannot run here: see above)")
  else
    summary+=("bench: smoke run FAILED (exit $trc)")
    fail "$trc"
  fi
}

for tier in $tiers; do
  echo "=== tier $tier"
  start=$SECONDS
  case "$tier" in
    bench) bench_tier ;;
    # Left out of asan: the fast-reader accuracy bound (5 us from the kernel's
    # return to the reader's clock) times the test's own instrumented
    # recvmsg(), which ASan intercepts; the plain bpf tier runs it. And the
    # bulk streams at full speed: an ASan daemon drains its ring slower than
    # 11 Gbit/s of segments fill it (ringbuf_full, counted), so the >= 99.9 %
    # traced bound is the plain tier's.
    asan) sanitizer_tier asan address,undefined '^(unit|bpf|service)$' -E 'a reader waiting in recvmsg|bulk TCP streams' ;;
    # Left out of tsan: the order rules' checker (unit: order rules: ...),
    # which explores the interleavings itself in one thread, so TSan has no
    # second thread to find a race with; it took 6 of tsan's 16 minutes.
    # The plain and asan tiers run it.
    tsan) sanitizer_tier tsan thread '^(unit|service)$' -E '^unit: order rules: ' ;;
    fuzz) fuzz_tier ;;
    *) ctest_tier "$tier" "$build" "^${tier}\$" ;;
  esac
  echo "=== tier $tier took $((SECONDS - start)) s"
done
if [ ${#checks[@]} -gt 0 ]; then
  echo "=== failed checks"
  printf '%s\n' "${checks[@]}"
fi
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $rc
