#!/bin/sh
# Fetch Debian 12's newest linux-image-6.1.0-*-amd64 and keep what the vm test
# tier boots: vmlinuz and e1000.ko. Cached under $NETLATD_VM_CACHE (default
# /var/cache/netlatd-vm) so only the first run downloads (~70 MB .deb, a few
# seconds from deb.debian.org); only the extracted ~9 MB stay.
#
# Prints on stdout, one per line:  KVER=...  VMLINUZ=...  E1000=...  PKG=...
# Exit 0 on success, 77 when no kernel can be had (no apt candidate and
# nothing cached), 1 on any other error.
set -eu

cache=${NETLATD_VM_CACHE:-/var/cache/netlatd-vm}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  # Not root and no NETLATD_VM_CACHE: a per-user cache still avoids
  # downloading on every run.
  [ -z "${NETLATD_VM_CACHE:-}" ] || { echo "vm-fetch-kernel: $cache not writable" >&2; exit 1; }
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/netlatd-vm
  mkdir -p "$cache"
fi

log() { echo "vm-fetch-kernel: $*" >&2; }

# The newest 6.1 ABI apt knows about; apt-cache reads local lists only.
pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
      awk '{print $1}' | sort -V | tail -n 1 || true)
ver=""
if [ -n "$pkg" ]; then
  ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
  [ "$ver" = "(none)" ] && ver=""
fi

emit() {  # $1 = extracted dir
  kver=$(ls "$1/lib/modules" | head -n 1)
  vmlinuz="$1/boot/vmlinuz-$kver"
  e1000="$1/lib/modules/$kver/kernel/drivers/net/ethernet/intel/e1000/e1000.ko"
  [ -f "$vmlinuz" ] && [ -f "$e1000" ] || return 1
  echo "KVER=$kver"
  echo "VMLINUZ=$vmlinuz"
  echo "E1000=$e1000"
  echo "PKG=$(basename "$1")"
}

if [ -z "$pkg" ] || [ -z "$ver" ]; then
  # No apt lists (offline CI image): use whatever an earlier run cached.
  last=$(ls -d "$cache"/linux-image-6.1.0-*_* 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$last" ] && emit "$last"; then
    log "no apt candidate; using cached $(basename "$last")"
    exit 0
  fi
  log "no linux-image-6.1.0-*-amd64 candidate in apt and nothing cached in $cache (run apt-get update?)"
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
mkdir -p "$dir/boot" "$dir/lib/modules/$kver/kernel/drivers/net/ethernet/intel/e1000"
cp "$tmp/x/boot/vmlinuz-$kver" "$dir/boot/"
cp "$tmp/x/lib/modules/$kver/kernel/drivers/net/ethernet/intel/e1000/e1000.ko" \
   "$dir/lib/modules/$kver/kernel/drivers/net/ethernet/intel/e1000/"
touch "$dir/.complete"
# What the tier boots is extracted (~9 MB); the .deb (~70 MB) and the
# kernels of older ABIs are not needed any more.
rm -f "$deb"
for old in "$cache"/linux-image-6.1.0-*; do
  [ "$old" = "$dir" ] || rm -rf "$old"
done
emit "$dir"
