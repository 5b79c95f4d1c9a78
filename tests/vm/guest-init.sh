#!/bin/busybox sh
# /init of the vm test tier's initramfs (built by tests/vm/run_vm_test.py).
# Everything the host needs to judge the run goes to the serial console
# between "@@NLVM <WHAT>" marker lines; the host parses them. The guest always
# ends with "@@NLVM END <reason>" and poweroff, so a failure here is reported,
# not waited out.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /run
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t debugfs nodev /sys/kernel/debug
# 6.1 does not mount tracefs by itself (KERNEL-NOTES.md), and netlatd needs it
# for the tracepoint ids behind its classic-tracepoint fallbacks.
mount -t tracefs nodev /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
. /etc/netlatd-vm.conf

mark() { echo "@@NLVM $*"; }
finish() {
	mark "DMESG-BEGIN"
	dmesg
	mark "DMESG-END"
	mark "END $1"
	sync
	poweroff -f
	sleep 10
}
section() {  # $1 = marker name, $2 = file
	mark "$1-BEGIN"
	[ -f "$2" ] && cat "$2"
	mark "$1-END"
}
alive() {  # a zombie still answers kill -0, so look at its state
	s=$(awk '{print $3}' /proc/$1/stat 2>/dev/null)
	[ -n "$s" ] && [ "$s" != Z ]
}
irq_count() {
	awk '/eth0/ { s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; else break; print s; exit }' /proc/interrupts
}

mark "BOOTED $(uname -r)"
insmod /lib/e1000.ko || finish "insmod-e1000-failed"
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
ip link set lo up
ip link set eth0 up || finish "eth0-missing"
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
n=0
while ! grep -q 1 /sys/class/net/eth0/carrier 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mark "ETH0 carrier=$(cat /sys/class/net/eth0/carrier 2>/dev/null) irq_line=$(awk '/eth0/ {print $1}' /proc/interrupts)"

export LD_LIBRARY_PATH
if [ -n "$GUEST_CMD" ]; then
	mark "GUEST-CMD-BEGIN"
	sh -c "$GUEST_CMD" 2>&1
	mark "GUEST-CMD-END rc=$?"
fi

if [ -n "$NETLATD" ]; then
	mark "CHECK-BEGIN"
	timeout 120 $NETLATD --check 2>&1
	mark "CHECK-END rc=$?"

	# The guest plays the service manager's notify socket, so "ready" means
	# what it means under systemd: the daemon says its programs are attached.
	nlrx --notify-wait /run/notify.sock --idle-ms 120000 >/tmp/notify.out 2>&1 &
	notify_pid=$!
	n=0
	while ! grep -q bound /tmp/notify.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	NOTIFY_SOCKET=/run/notify.sock $NETLATD $NETLATD_ARGS --iface eth0 --port 5000 --port 5001 \
		--interval 1 --output /tmp/out.jsonl >/tmp/netlatd.out 2>&1 &
	netlatd_pid=$!
	# Ready when READY=1 came; a daemon without sd_notify support counts as
	# ready once it has written its first interval.
	n=0
	ready=""
	while [ $n -lt 1200 ]; do
		if ! kill -0 $notify_pid 2>/dev/null; then
			wait $notify_pid && ready="notify"
			[ -n "$ready" ] && break
		fi
		if [ -s /tmp/out.jsonl ]; then ready="output"; break; fi
		alive $netlatd_pid || break
		sleep 0.1
		n=$((n + 1))
	done
	kill $notify_pid 2>/dev/null
	section NOTIFY /tmp/notify.out
	if [ -z "$ready" ]; then
		wait $netlatd_pid
		mark "NETLATD-EXIT rc=$? (never became ready)"
		section NETLATD-STDERR /tmp/netlatd.out
		finish "netlatd-not-ready"
	fi
	mark "NETLATD-READY via=$ready after=${n}00ms"
fi

irq_before=$(irq_count)
nlrx --udp 5000 --tcp 5001 --udp-expect "$UDP_EXPECT" --idle-ms "$IDLE_MS" >/tmp/nlrx.out 2>&1 &
nlrx_pid=$!
n=0
while ! grep -q listening /tmp/nlrx.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mark "READY"
wait $nlrx_pid
mark "NLRX-EXIT rc=$?"
section NLRX /tmp/nlrx.out
mark "IRQ eth0 delta=$(( $(irq_count) - irq_before ))"

if [ -n "$NETLATD" ]; then
	# Let the daemon drain the ring buffer and close an interval or two
	# before it is stopped; the final flush covers the rest.
	sleep 2
	kill -TERM $netlatd_pid
	( sleep 60; kill -KILL $netlatd_pid 2>/dev/null ) &
	watchdog=$!
	wait $netlatd_pid
	rc=$?
	kill $watchdog 2>/dev/null
	mark "NETLATD-EXIT rc=$rc"
	section NETLATD-STDERR /tmp/netlatd.out
	section JSON /tmp/out.jsonl
fi
finish "ok"
