#!/bin/sh
# The join suite's guest root file system: Debian 12 (bookworm) from
# debootstrap, minbase plus what the bpf tier's tests exec (ip, ss, nstat,
# ethtool, sysctl, iperf3), pruned of documentation and apt's lists, and
# packed once into a gzip'd cpio that run_vm_test.py boots as the guest's
# initramfs (the test binaries and the kernel's modules go in a second,
# small archive appended to it).
#
#   make-rootfs.sh CACHE_DIR [EXTRA_PACKAGES]
#
# EXTRA_PACKAGES (comma list) makes a root file system of its own beside the
# join suite's, named after them: the bench's guest (bench/guest.py) adds
# python3, to run bench/bench.py itself there.
#
# Cached in CACHE_DIR (under the build directory): rebuilt only when the
# package list below changes. Prints the archive's path on stdout.
# Exit 0 on success, 77 when debootstrap is missing or the mirror cannot be
# reached (the suite then says SKIPPED), 1 on any other error.
# Needs root (debootstrap makes device nodes and chroots).
set -eu

cache=${1:?usage: make-rootfs.sh CACHE_DIR [EXTRA_PACKAGES]}
extra=${2:-}
suite=bookworm
mirror=${NETLATD_VM_MIRROR:-http://deb.debian.org/debian}
# iproute2: ip, ss, nstat; procps: sysctl; kmod: insmod; iperf3 and ethtool
# for the tests that use them.
packages=iproute2,procps,kmod,ethtool,iperf3${extra:+,$extra}
key="$suite minbase $packages v1"
name=$suite${extra:+-$(echo "$extra" | tr ',' '-')}

log() { echo "make-rootfs: $*" >&2; }

archive="$cache/rootfs-$name.cpio.gz"
stamp="$cache/rootfs-$name.stamp"
if [ -f "$archive" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
  echo "$archive"
  exit 0
fi
command -v debootstrap >/dev/null || { log "debootstrap not installed (scripts/install-deps.sh --vm)"; exit 77; }
command -v cpio >/dev/null || { log "cpio not installed (scripts/install-deps.sh --vm)"; exit 77; }
[ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 77; }

# debootstrap mounts /proc (and more) inside the root it builds; a run killed
# midway leaves them mounted. Unmount, deepest first, before removing, and
# never follow a removal into a mount that is still there.
remove_build() {
  awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$1"
}
mkdir -p "$cache"
# A build dir an hour old is a killed run's (a build takes minutes).
find "$cache" -maxdepth 1 -name '.rootfs.*' -type d -mmin +60 |
  while read -r stale; do remove_build "$stale"; done
tmp=$(mktemp -d "$cache/.rootfs.XXXXXX")
trap 'remove_build "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
log "debootstrap $suite ($packages) from $mirror; once, about 2-4 minutes"
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
  tail -n 20 "$tmp/debootstrap.log" >&2
  if grep -qiE "Failed getting release file|Temporary failure|Could not resolve|couldn't download" "$tmp/debootstrap.log"; then
    log "the mirror $mirror cannot be reached"
    exit 77
  fi
  exit 1
fi
r="$tmp/root"
# What a test guest never reads.
rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* \
       "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/var/log/*.log "$r"/usr/share/zoneinfo
(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) > "$tmp/rootfs.cpio.gz"
mv "$tmp/rootfs.cpio.gz" "$archive"
echo "$key" > "$stamp"
log "$(du -sh "$r" | cut -f1) unpacked, $(du -h "$archive" | cut -f1) packed: $archive"
echo "$archive"
