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
fi

start_nlrx() {
	nlrx --udp 5000 --tcp 5001 --udp-expect "$UDP_EXPECT" --idle-ms "$IDLE_MS" >/tmp/nlrx.out 2>&1 &
	nlrx_pid=$!
	n=0
	while ! grep -q listening /tmp/nlrx.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	alive $nlrx_pid || { section NLRX /tmp/nlrx.out; finish "nlrx-failed"; }
	# Its UDP thread blocks in recvfrom(), its TCP thread in accept().
	sleep 0.5
}

# READER_FIRST=1: the receiver runs before netlatd starts, as a service
# netlatd is attached to would: its threads sit in recvfrom()/accept() from
# before netlatd's programs exist.
[ "$READER_FIRST" = 1 ] && start_nlrx

if [ -n "$NETLATD" ]; then
	# The guest plays the service manager's notify socket: netlatd is ready
	# when it sends READY=1 there, as under systemd (Type=notify), which it
	# does only once its programs are attached and live. Nothing else counts.
	nlrx --notify-wait /run/notify.sock --idle-ms 120000 >/tmp/notify.out 2>&1 &
	notify_pid=$!
	n=0
	while ! grep -q bound /tmp/notify.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	t0=$(cut -d' ' -f1 /proc/uptime)
	NOTIFY_SOCKET=/run/notify.sock $NETLATD $NETLATD_ARGS --iface eth0 --port 5000 --port 5001 \
		--interval 1 --output /tmp/out.jsonl >/tmp/netlatd.out 2>&1 &
	netlatd_pid=$!
	ready=""
	while alive $netlatd_pid; do
		if ! alive $notify_pid; then
			wait $notify_pid && ready=1
			break
		fi
		sleep 0.1
	done
	t1=$(cut -d' ' -f1 /proc/uptime)
	kill $notify_pid 2>/dev/null
	section NOTIFY /tmp/notify.out
	if [ -z "$ready" ]; then
		kill -TERM $netlatd_pid 2>/dev/null
		wait $netlatd_pid
		mark "NETLATD-EXIT rc=$? (no READY=1)"
		section NETLATD-STDERR /tmp/netlatd.out
		kill $nlrx_pid 2>/dev/null
		finish "netlatd-not-ready"
	fi
	mark "NETLATD-READY after=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")s"
fi

[ "$READER_FIRST" = 1 ] || start_nlrx
irq_before=$(irq_count)
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
if [ -n "$GUEST_POST_CMD" ]; then
	mark "GUEST-POST-CMD-BEGIN"
	sh -c "$GUEST_POST_CMD" 2>&1
	mark "GUEST-POST-CMD-END rc=$?"
fi
finish "ok"
