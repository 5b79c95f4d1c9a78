#!/usr/bin/env bash
# What netlatd costs, next to bpftrace and perf: see docs/BENCHMARKS.md.
#
#   bench/run.sh [--smoke] [--out results.json] [--build-dir DIR] [--netlatd PATH]
#                [--netlatd-b PATH] [--markdown FILE] [bench.py options...]
#
# Builds the bench tools (and netlatd, unless --netlatd is given) in DIR
# (default: $NETLATD_BUILD_DIR, else <repo>/build), then runs bench/bench.py as root.
# --netlatd-b PATH: a second build, measured beside the first (variant netlatd-b).
# Exit: 0 = ran (targets may be missed; see the table), 1 = the bench broke,
# 2 = usage, 3 = netlatd could not be measured (it did not build, start, trace or
# stop cleanly; the other tracers are still measured), 77 = cannot run here (not
# root), 130 = stopped by a signal (bench.py names its sender).
# --smoke (CI): tiny counts, seconds after the build; the same exit codes.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NETLATD_BUILD_DIR:-$repo/build}
netlatd=""
netlatd_missing=0
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --netlatd) netlatd=$2; shift 2 ;;
    --netlatd-b) export NLBENCH_DAEMON_B=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; /usr/bin/python3 "$repo/bench/bench.py" --help; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "bench: needs root (network namespaces, BPF, sysctl)" >&2
  exit 77
fi

log() { echo "bench: $*" >&2; }

# One bench at a time on a host: two would measure each other's floods (BPF
# programs run for every packet of the machine). A second run waits its turn.
lock=/run/lock/netlatd-bench.lock
exec 9>>"$lock"
if ! flock -n 9; then
  log "waiting for the bench run that holds $lock (up to 15 min)"
  flock -w 900 9 || { log "error: $lock still held after 15 min"; exit 1; }
fi

# Backstop for bench.py's own clean-up, should it be killed hard: the namespace
# (and with it the veth pair) and the BPF statistics sysctl.
netns="nlbench-$$"
stats_orig=$(cat /proc/sys/kernel/bpf_stats_enabled)
tools_tmp=""
cleanup() {
  ip netns del "$netns" 2>/dev/null || true
  echo "$stats_orig" > /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
  [ -n "$tools_tmp" ] && rm -rf "$tools_tmp"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Tools: from the CMake build when the project configures; otherwise compiled
# directly, so the bench still runs (without netlatd) while the tree is broken.
# A build directory made here gets no tests: only netlatd and the tools are built.
tools_dir=""
mkdir -p "$build_dir"
if { [ -f "$build_dir/CMakeCache.txt" ] ||
     cmake -S "$repo" -B "$build_dir" -DNETLATD_BUILD_TESTS=OFF >"$build_dir/bench-configure.log" 2>&1; } &&
   cmake --build "$build_dir" -j"$(nproc)" --target nlbench-pingpong nlbench-flood >/dev/null; then
  tools_dir=$build_dir/bench
else
  log "warning: CMake build of the bench tools failed; compiling them directly"
  tools_tmp=$(mktemp -d /tmp/nlbench-tools.XXXXXX)
  for t in pingpong flood; do
    c++ -std=c++20 -O2 -Wall -Wextra -o "$tools_tmp/nlbench-$t" "$repo/bench/$t.cpp"
  done
  tools_dir=$tools_tmp
fi

# The floor (bench/floor.cpp + floor.bpf.c) needs libbpf, clang and bpftool
# like netlatd, and the line table of the "lines" part libbpf; if one does not
# build, bench.py says so and fails the run.
if [ -z "$tools_tmp" ] &&
   ! cmake --build "$build_dir" -j"$(nproc)" --target nlbench-floor nlbench-lines >"$build_dir/bench-floor-build.log" 2>&1; then
  log "error: nlbench-floor or nlbench-lines did not build (see $build_dir/bench-floor-build.log)"
fi

if [ -z "$netlatd" ]; then
  if [ -f "$build_dir/CMakeCache.txt" ] &&
     cmake --build "$build_dir" -j"$(nproc)" --target netlatd >"$build_dir/bench-netlatd-build.log" 2>&1; then
    netlatd=$build_dir/netlatd
  else
    log "error: netlatd did not build (see $build_dir/bench-netlatd-build.log); measuring the others only"
    netlatd_missing=1
  fi
fi

args=(--tools "$tools_dir" --netns "$netns")
# The daemon goes in the environment, not on bench.py's command line (see bench.py).
[ -n "$netlatd" ] && export NLBENCH_DAEMON=$netlatd
# bench.py is the foreground child: SIGINT/SIGTERM reach it too and it cleans up first.
set +e
/usr/bin/python3 "$repo/bench/bench.py" "${args[@]}" "${pass[@]}"
rc=$?
set -e
# Figures without netlatd are no answer to "what does netlatd cost": say so in
# the exit status, so a CI smoke run catches a daemon that stopped building.
if [ "$rc" -eq 0 ] && [ "$netlatd_missing" -eq 1 ]; then
  rc=3
fi
exit $rc
