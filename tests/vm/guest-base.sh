# Sourced by the /init of the guests that boot Debian 12's root file system
# (make-rootfs.sh) as their initramfs: the join suite's (suite-init.sh) and
# the bench's (bench/guest-init.sh). Mounts what netlatd and the tests need,
# and gives mark (a "@@NLVM ..." line for the host) and finish (dmesg's
# tail, "@@NLVM END <reason>", power-off).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# /tmp stays the initramfs's own (writable already): the build tree, which
# the overlay puts at its host path, may be under /tmp, and a tmpfs mounted
# there hid it (a clone in /tmp: every test "No such file or directory").
mkdir -p /dev/pts /dev/shm /tmp /run
chmod 1777 /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs run /run
mount -t debugfs nodev /sys/kernel/debug
# 6.1 does not mount tracefs by itself (KERNEL-NOTES.md).
mount -t tracefs nodev /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup

mark() { echo "@@NLVM $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
finish() {
	mark "DMESG-BEGIN"
	dmesg | tail -n 200
	mark "DMESG-END"
	mark "END $1"
	sync
	# No init system here: power off through SysRq (qemu runs -no-reboot;
	# should that fail, init's exit panics and panic=-1 ends qemu too).
	echo o > /proc/sysrq-trigger
	sleep 10
	exit 1
}
