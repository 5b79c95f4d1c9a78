#!/usr/bin/env bash
# Installs everything netlatd needs to build, test and benchmark on Debian 12 (bookworm).
# Idempotent: safe to run again. Needs root. Uses Debian's package registry, and npm's
# for deploy/check's tools (pinned by its package-lock.json).
# clang's runtimes (libclang-rt-dev) are the sanitizers and libFuzzer of the
# asan, tsan and fuzz tiers.
#
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --build-only  only what building the daemon needs (deploy/Dockerfile)
#   scripts/install-deps.sh --vm       also what the `vm` test tier needs (qemu, busybox, debootstrap, its kernels)
#   scripts/install-deps.sh --bench    also what bench/ compares against (bpftrace, perf, sockperf)
#   scripts/install-deps.sh --prometheus  also what the `prometheus` test tier needs (a Prometheus server)
set -euo pipefail

want_vm=0 want_bench=0 want_checks=1 want_prometheus=0
for a in "$@"; do
  case "$a" in
    --build-only) want_checks=0 ;;
    --vm) want_vm=1 ;;
    --bench) want_bench=1 ;;
    --prometheus) want_prometheus=1 ;;
    --all) want_vm=1; want_bench=1; want_prometheus=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown option '$a'" >&2; exit 64 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (apt-get)" >&2; exit 77
fi

. /etc/os-release
if [ "${ID:-}" != debian ] || [ "${VERSION_CODENAME:-}" != bookworm ]; then
  echo "install-deps: written for Debian 12 (bookworm); this is ${PRETTY_NAME:-unknown}." >&2
  echo "install-deps: see README 'Other distributions' for the package names." >&2
  exit 69
fi

export DEBIAN_FRONTEND=noninteractive

# libbpf 1.4, bpftool 7.5 and Catch2 v3 come from bookworm-backports.
bp=/etc/apt/sources.list.d/netlatd-backports.sources
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat > "$bp" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  rm -f /var/lib/netlatd-apt-updated
fi

# One `apt-get update` per machine boot is enough; a failing third-party list
# (not ours) must not stop the install.
stamp=/var/lib/netlatd-apt-updated
if [ ! -f "$stamp" ] || [ "$(stat -c %Y "$stamp")" -lt "$(($(date +%s) - 86400))" ]; then
  apt-get update -q || echo "install-deps: warning: apt-get update reported errors; continuing" >&2
  touch "$stamp"
fi

base=(
  build-essential cmake pkg-config git
  clang llvm libclang-rt-dev
  libelf-dev zlib1g-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
  libsystemd-dev libyaml-cpp-dev
  iproute2 procps python3 util-linux kmod systemd dpkg-dev file
  iperf3 ethtool
)
backports=(libbpf-dev bpftool catch2)
extra=()
# The unit and service tiers' checks of what ships: lintian on the .deb,
# yamllint and Node.js (deploy/check/: the Kubernetes schemas, a Dockerfile
# linter) on deploy/, and chromium, which opens `netlatd report`'s page
# headless (tests/page/test_browser.py). A Node.js from elsewhere that is
# already installed is used as it is: Debian's npm would conflict with it.
if [ "$want_checks" = 1 ]; then
  extra+=(lintian yamllint chromium)
  command -v node >/dev/null 2>&1 || extra+=(nodejs)
  command -v npm >/dev/null 2>&1 || extra+=(npm)
fi
# debootstrap: the join suite's guest root file system (tests/vm/make-rootfs.sh).
[ "$want_vm" = 1 ] && extra+=(qemu-system-x86 busybox-static cpio xz-utils debootstrap)
[ "$want_bench" = 1 ] && extra+=(bpftrace linux-perf sockperf)
# The tier runs a server of its own (own port, config and storage); on a
# machine booted with systemd the package also starts prometheus.service on
# :9090, which the tier neither needs nor touches.
[ "$want_prometheus" = 1 ] && extra+=(prometheus)

missing=()
for p in "${base[@]}" "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Backports pinned explicitly: the bookworm versions (libbpf 1.1, bpftool 7.1,
# Catch2 2.x) are too old.
need_bp=0
dpkg --compare-versions "$(dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null || echo 0)" ge 1:1.4 || need_bp=1
dpkg --compare-versions "$(dpkg-query -W -f='${Version}' bpftool 2>/dev/null || echo 0)" ge 7.5 || need_bp=1
dpkg --compare-versions "$(dpkg-query -W -f='${Version}' catch2 2>/dev/null || echo 0)" ge 3 || need_bp=1
if [ "$need_bp" = 1 ]; then
  apt-get install -y -q --no-install-recommends -t bookworm-backports "${backports[@]}"
fi

# deploy/check's packages, at the versions its lock file pins, into
# deploy/check/node_modules (not in git).
if [ "$want_checks" = 1 ]; then
  check_dir="$(cd "$(dirname "$0")/.." && pwd)/deploy/check"
  # The lock file the installed tree was made from, to redo it when it changes.
  stamp="$check_dir/node_modules/.netlatd-installed-lock"
  if ! cmp -s "$check_dir/package-lock.json" "$stamp" 2>/dev/null; then
    if npm ci --prefix "$check_dir" --no-audit --no-fund --loglevel=error; then
      cp "$check_dir/package-lock.json" "$stamp"
    else
      echo "install-deps: warning: npm ci in deploy/check failed; the deploy checks will say SKIPPED" >&2
    fi
  fi
fi

# The vm tier boots Debian 12's 6.1 and 6.12 kernel packages: fetch them into
# the tier's cache now (~70 MB and ~110 MB apt-get downloads, ~20 MB kept), so
# the tier runs offline later.
if [ "$want_vm" = 1 ]; then
  for series in 6.1 6.12; do
    "$(dirname "$0")/vm-fetch-kernel.sh" "$series" >/dev/null ||
      echo "install-deps: warning: could not fetch the vm tier's $series kernel now; the tier tries again" >&2
  done
fi

echo "install-deps: ok (libbpf $(dpkg-query -W -f='${Version}' libbpf-dev), bpftool $(dpkg-query -W -f='${Version}' bpftool), catch2 $(dpkg-query -W -f='${Version}' catch2), clang $(clang --version | head -1 | grep -o '[0-9][0-9.]*' | head -1))"
