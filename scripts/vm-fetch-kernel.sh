#!/bin/sh
# Fetch a Debian 12 kernel for the vm test tier and keep what it boots:
# vmlinuz and the NIC drivers' modules (e1000, e1000e, virtio_net), those of
# the stacked devices the phase "stacked" makes (veth, 8021q, bonding), and
# what they need, uncompressed so busybox's insmod loads them.
#
#   vm-fetch-kernel.sh [6.1|6.12]     (default 6.1)
#
#   6.1   the newest linux-image-6.1.0-*-amd64 (bookworm)
#   6.12  the ABI that linux-image-6.12-amd64 depends on (bookworm-backports,
#         bookworm-security), else the newest linux-image-6.12.*-amd64
#
# Cached under $NETLATD_VM_CACHE (default /var/cache/netlatd-vm) so only the
# first run downloads (~70 MB for 6.1, ~110 MB for 6.12, seconds from
# deb.debian.org); only the extracted ~10 MB stay. Without apt lists
# (offline) the newest cached kernel of the series is used.
#
# Prints on stdout, one per line:  KVER=...  VMLINUZ=...  MODULES=<dir>  PKG=...
# Exit 0 on success, 77 when no kernel can be had (no apt candidate and
# nothing cached), 1 on any other error.
set -eu

series=${1:-6.1}
case "$series" in
  6.1) glob='linux-image-6.1.0-*' ;;
  6.12) glob='linux-image-6.12.*' ;;
  *) echo "vm-fetch-kernel: unknown series '$series' (6.1 or 6.12)" >&2; exit 1 ;;
esac
# The drivers the tier's guests use; their dependencies come along. A cached
# kernel without one of them is fetched again (once).
drivers="e1000 e1000e virtio_net 8021q bonding veth"

cache=${NETLATD_VM_CACHE:-/var/cache/netlatd-vm}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  # Not root and no NETLATD_VM_CACHE: a per-user cache still avoids
  # downloading on every run.
  [ -z "${NETLATD_VM_CACHE:-}" ] || { echo "vm-fetch-kernel: $cache not writable" >&2; exit 1; }
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/netlatd-vm
  mkdir -p "$cache"
fi

log() { echo "vm-fetch-kernel: $*" >&2; }

candidate() {  # $1 = package; prints its candidate version, nothing if none
  v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
  [ "$v" = "(none)" ] || echo "$v"
}

# apt-cache reads local lists only.
if [ "$series" = 6.1 ]; then
  pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
        awk '{print $1}' | sort -V | tail -n 1 || true)
else
  pkg=$(apt-cache depends linux-image-6.12-amd64 2>/dev/null | awk '/Depends: linux-image-6\.12\./ {print $2; exit}' || true)
  [ -n "$pkg" ] || pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-amd64$' 2>/dev/null |
                         awk '{print $1}' | sort -V | tail -n 1 || true)
fi
ver=""
[ -z "$pkg" ] || ver=$(candidate "$pkg")

emit() {  # $1 = extracted dir
  kver=$(ls "$1/lib/modules" 2>/dev/null | head -n 1)
  [ -n "$kver" ] && [ -f "$1/boot/vmlinuz-$kver" ] || return 1
  for d in $drivers; do [ -f "$1/modules/$d.ko" ] || return 1; done
  echo "KVER=$kver"
  echo "VMLINUZ=$1/boot/vmlinuz-$kver"
  echo "MODULES=$1/modules"
  echo "PKG=$(basename "$1")"
}

if [ -z "$pkg" ] || [ -z "$ver" ]; then
  last=$(ls -d "$cache"/$glob 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$last" ] && [ -f "$last/.complete" ] && emit "$last"; then
    log "no apt candidate; using cached $(basename "$last")"
    exit 0
  fi
  log "no $glob-amd64 candidate in apt and nothing cached in $cache (run apt-get update?)"
  exit 77
fi

dir="$cache/${pkg}_${ver}"
if [ -f "$dir/.complete" ] && emit "$dir"; then
  exit 0
fi

# Download into a private temporary directory, then move into place, so an
# interrupted run never leaves a half-written .deb that looks cached.
tmp=$(mktemp -d "$cache/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt drops to the _apt user for downloads; let it write here.
chmod 0777 "$tmp"
deb=$(ls "$cache"/"${pkg}"_*.deb 2>/dev/null | grep -F "_$(echo "$ver" | sed 's/:/%3a/')_" | head -n 1 || true)
if [ -z "$deb" ]; then
  log "downloading $pkg=$ver"
  if ! (cd "$tmp" && apt-get download -q "$pkg=$ver" >&2); then
    log "apt-get download $pkg=$ver failed"
    exit 77
  fi
  deb=$(ls "$tmp"/*.deb | head -n 1)
  mv "$deb" "$cache/"
  deb="$cache/$(basename "$deb")"
fi

log "extracting $(basename "$deb")"
rm -rf "$dir"
mkdir -p "$tmp/x"
dpkg -x "$deb" "$tmp/x"
kver=$(ls "$tmp/x/lib/modules" | head -n 1)
tree="$tmp/x/lib/modules/$kver/kernel"
mkdir -p "$dir/boot" "$dir/lib/modules/$kver" "$dir/modules"
cp "$tmp/x/boot/vmlinuz-$kver" "$dir/boot/"

# Each driver and, before it, what it depends on (modinfo reads the .ko).
# 6.12 ships modules xz-compressed; busybox's insmod wants them plain.
keep() {  # $1 = module name
  [ -f "$dir/modules/$1.ko" ] && return 0
  f=$(find "$tree" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$(echo "$1" | tr _ -).ko*" | head -n 1)
  [ -n "$f" ] || { log "module $1 not in $(basename "$deb")"; exit 1; }
  case "$f" in
    *.xz) xz -dc "$f" > "$dir/modules/$1.ko" ;;
    *) cp "$f" "$dir/modules/$1.ko" ;;
  esac
  for dep in $(modinfo -F depends "$dir/modules/$1.ko" | tr , ' '); do keep "$dep"; done
}
for d in $drivers; do keep "$d"; done
touch "$dir/.complete"
# What the tier boots is extracted (~10 MB); the .deb and the kernels of
# older ABIs of this series are not needed any more.
rm -f "$deb"
for old in "$cache"/$glob; do
  [ "$old" = "$dir" ] || rm -rf "$old"
done
emit "$dir"
