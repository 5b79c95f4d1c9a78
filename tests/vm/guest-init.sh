#!/bin/busybox sh
# /init of the vm test tier's initramfs (built by tests/vm/vm_guest.py).
# One boot runs every phase in $PHASES, one after the other; a phase is the
# shell function phase_<name> below. Everything the host needs to judge the
# run goes to the serial console between "@@NLVM <WHAT>" marker lines; a
# phase's lines lie between "@@NLVM PHASE-BEGIN <name>" and "@@NLVM PHASE-END
# <name>", and "@@NLVM READY <name>" asks the host for that phase's traffic.
# The guest always ends with "@@NLVM END <reason>" and poweroff, so a failure
# here is reported, not waited out.
#
# Adding a phase: a phase_<name> function here (a static binary of its own
# goes to /bin through run_vm_test.py's --static-bin), and an entry in
# vm_phases.py's PHASES (its host traffic, if any, and its judge).
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
export LD_LIBRARY_PATH

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
uptime_s() { cut -d' ' -f1 /proc/uptime; }

mark "BOOTED $(uname -r) uptime=$(uptime_s)"
for m in $NIC_MODULES; do
	insmod /lib/modules/$m.ko || finish "insmod-$m-failed"
done
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
ip link set lo up
ip link set eth0 up || finish "eth0-missing"
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
n=0
while ! grep -q 1 /sys/class/net/eth0/carrier 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mark "ETH0 carrier=$(cat /sys/class/net/eth0/carrier 2>/dev/null) driver=$(basename "$(readlink /sys/class/net/eth0/device/driver)") uptime=$(uptime_s)"

if [ -n "$GUEST_CMD" ]; then
	mark "GUEST-CMD-BEGIN"
	sh -c "$GUEST_CMD" 2>&1
	mark "GUEST-CMD-END rc=$?"
fi

# Once per boot: what netlatd makes of this kernel and this NIC (hooks, IRQ lines).
if [ -n "$NETLATD" ]; then
	mark "CHECK-BEGIN"
	timeout 120 $NETLATD --check --iface eth0 2>&1
	mark "CHECK-END rc=$?"
fi

start_nlrx() {
	$NLRX_IN nlrx --udp 5000 --tcp 5001 --udp-expect "$UDP_EXPECT" --idle-ms "$IDLE_MS" $NLRX_ARGS >/tmp/nlrx.out 2>&1 &
	nlrx_pid=$!
	n=0
	while ! grep -q listening /tmp/nlrx.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	alive $nlrx_pid || { section NLRX /tmp/nlrx.out; return 1; }
	# Its UDP thread blocks in recvfrom(), its TCP thread in accept().
	sleep 0.5
}

# The guest plays the service manager's notify socket: netlatd is ready when
# it sends READY=1 there, as under systemd (Type=notify), which it does only
# once its programs are attached and live. Nothing else counts.
start_netlatd() {
	nlrx --notify-wait /run/notify.sock --idle-ms 120000 >/tmp/notify.out 2>&1 &
	notify_pid=$!
	n=0
	while ! grep -q bound /tmp/notify.out 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	t0=$(uptime_s)
	rm -f /tmp/out.jsonl
	NOTIFY_SOCKET=/run/notify.sock $NETLATD $NETLATD_ARGS ${NETLATD_IFACES:---iface eth0} --port 5000 --port 5001 \
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
	kill $notify_pid 2>/dev/null
	section NOTIFY /tmp/notify.out
	if [ -z "$ready" ]; then
		kill -TERM $netlatd_pid 2>/dev/null
		wait $netlatd_pid
		mark "NETLATD-EXIT rc=$? (no READY=1)"
		section NETLATD-STDERR /tmp/netlatd.out
		return 1
	fi
	mark "NETLATD-READY after=$(awk "BEGIN { printf \"%.1f\", $(uptime_s) - $t0 }")s"
}

stop_netlatd() {
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
}

# The host's traffic to nlrx, with the NIC's interrupt counts around it.
receive_traffic() {  # $1 = phase
	cat /proc/interrupts >/tmp/irq.before
	mark "READY $1"
	wait $nlrx_pid
	mark "NLRX-EXIT rc=$?"
	cat /proc/interrupts >/tmp/irq.after
	section NLRX /tmp/nlrx.out
	section INTERRUPTS-BEFORE /tmp/irq.before
	section INTERRUPTS-AFTER /tmp/irq.after
}

# Boot, NIC, hostfwd and nlrx alone: when this fails, a failure of the
# phases with netlatd is not netlatd's.
phase_bare() {
	start_nlrx && receive_traffic bare
}

# netlatd first, then the receiver.
phase_e2e() {
	start_netlatd || return
	start_nlrx && receive_traffic e2e
	stop_netlatd
}

# e2e with the receiver busy polling (SO_BUSY_POLL, 20 ms: longer than the
# host's 2 ms between datagrams): each read polls the NIC's NAPI context in
# its own call, and the datagram is received in the reader's task, with no
# interrupt and no softirq. The kernel's count of datagrams received that way
# (TcpExt BusyPollRxPackets) shows that it happened.
phase_busypoll() {
	grep '^TcpExt' /proc/net/netstat >/tmp/netstat.before
	start_netlatd || return
	NLRX_ARGS="--busy-poll 20000" start_nlrx && receive_traffic busypoll
	stop_netlatd
	grep '^TcpExt' /proc/net/netstat >/tmp/netstat.after
	section NETSTAT-BEFORE /tmp/netstat.before
	section NETSTAT-AFTER /tmp/netstat.after
}

# e2e with a reader that peeks (MSG_PEEK | MSG_TRUNC) before each read, as
# dnsmasq does: the peek's skb_consume_udp names the datagram too, and must
# not be taken for the read (every datagram was once lost that way).
phase_peek() {
	start_netlatd || return
	NLRX_ARGS="--peek 1" start_nlrx && receive_traffic peek
	stop_netlatd
}

# e2e with the reader asleep while every datagram arrives (the host sends for
# ~0.4 s): a backlog of some 200 datagrams waits on the socket. Where the
# kernel names reads, each keeps its own stash entry meanwhile, and every
# read of the backlog must still be named.
phase_backlog() {
	start_netlatd || return
	NLRX_ARGS="--delay-ms 1500" start_nlrx && receive_traffic backlog
	stop_netlatd
}

# e2e with the histograms kept in the kernel and checked against every
# record the kernel also writes (--aggregate-check); records of packets over
# 1 ms stay outliers, written to the ring only.
phase_aggregate() {
	NETLATD_ARGS="--aggregate-check --outliers-over 1ms --outliers-max-per-sec 1000000" start_netlatd || return
	start_nlrx && receive_traffic aggregate
	stop_netlatd
}

# The receiver first, its threads already blocked in recvfrom()/accept()
# when netlatd attaches, as for a service netlatd is added to.
phase_reader_first() {
	start_nlrx || return
	if start_netlatd; then
		receive_traffic reader_first
		stop_netlatd
	else
		kill $nlrx_pid 2>/dev/null
	fi
}

# e2e with a read's skb address given to the next datagram before the read
# returns (docs/JOIN.md): stall.bpf.o (bpftool autoattach) holds each read of
# port 5000 for 3 ms after skb_consume_udp freed its skb, while the host's
# next datagram (2 ms behind) arrives on the same CPU (the NIC's IRQs and
# nlrx both on CPU 1), where the slab usually hands it the skb just freed.
REUSE_IRQS='^(eth0|virtio0-input)'
phase_reuse() {
	for d in /proc/irq/*/; do
		if ls "$d" | grep -qE "$REUSE_IRQS"; then
			echo 2 >"${d}smp_affinity"
			mark "REUSE-IRQS $(basename "$d") $(ls "$d" | grep -E "$REUSE_IRQS") affinity=$(cat "${d}smp_affinity")"
		fi
	done
	if ! bpftool prog loadall /opt/stall.bpf.o /sys/fs/bpf/stall autoattach >/tmp/stall.out 2>&1; then
		section STALL /tmp/stall.out
		return
	fi
	mark "STALL-ATTACHED"
	if start_netlatd; then
		NLRX_IN="taskset 2"
		start_nlrx && receive_traffic reuse
		NLRX_IN=""
		stop_netlatd
	fi
	rm -rf /sys/fs/bpf/stall
}

# Stacked devices, with traffic the guest makes itself: a peer network
# namespace sends over veth pairs to nlrx here; netlatd traces a VLAN
# (va.100 over the veth va) and a bond (bond0, active-backup, over the veth
# vb) and must count each datagram once under the upper device's name; the
# untagged datagrams on va, the VLAN's lower device, are not the VLAN's.
# Needs the modules veth, 8021q and bonding (loaded with the NIC's).
STACKED_TAGGED=40 STACKED_UNTAGGED=30 STACKED_BONDED=40
phase_stacked() {
	unshare -n sleep 600 &
	peer=$!
	sleep 0.2
	stacked_rx="" stacked_sys=/sys
	stacked_run
	# The peer namespace's end goes with it, and each veth pair with its end.
	kill $peer
}

# The same devices and traffic, with the receiving side (the VLAN, the bond,
# nlrx) in a namespace of its own and netlatd outside it with --netns: this
# process's sysfs does not show that namespace's devices, so netlatd finds
# the devices below from its links. The bond is made through a sysfs
# mounted from inside it (bonding_masters makes it in the mounter's
# namespace; a bond cannot be moved).
phase_stacked_netns() {
	unshare -n sleep 600 &
	peer=$!
	unshare -n sleep 600 &
	rx=$!
	sleep 0.2
	mkdir -p /tmp/rxsys
	if nsenter -t $rx -n mount -t sysfs sysfs /tmp/rxsys && echo +bond0 >/tmp/rxsys/class/net/bonding_masters; then
		stacked_rx="nsenter -t $rx -n" stacked_sys=/tmp/rxsys
		NETLATD_NETNS="--netns $rx"
		stacked_run
		NETLATD_NETNS=""
		stacked_rx=""
	else
		mark "STACKED-SETUP failed (the namespace's sysfs, its bond)"
	fi
	umount /tmp/rxsys 2>/dev/null
	kill $peer $rx
}

# Datagrams with a wrong UDP checksum among good ones, over a veth from a
# peer namespace, the receiving end's checksum offload off: UDP queues each
# unchecked (but for those of at most 76 bytes, checked on arrival), and the
# read finds a bad one, drops it and takes the next (udp_recvmsg). netlatd must name every good one's read and count each bad
# one as stack_dropped, never a record (docs/JOIN.md, "Datagrams a read
# drops"); on these kernels reads are joined by the datagram the kernel
# names (fentry), not by queue order as on the build machine.
# The last one is good: a bad one after it would be read, if at all, after
# nlrx has its count and stops.
BADCSUM_SENT=89 BADCSUM_EVERY=3
phase_badcsum() {
	unshare -n sleep 600 &
	peer=$!
	sleep 0.2
	in_peer() { nsenter -t $peer -n "$@"; }
	if ip link add vc type veth &&
		pc=$(ls /sys/class/net | grep '^veth' | sort | sed -n 1p) &&
		ip link set $pc netns $peer && ip link set vc up && ip addr add 10.13.0.1/24 dev vc &&
		in_peer ip link set lo up && in_peer ip link set $pc up && in_peer ip addr add 10.13.0.2/24 dev $pc &&
		nlrx --rx-csum-off vc; then
		mark "BADCSUM-SETUP ok peer=$pc"
		saved_expect=$UDP_EXPECT
		UDP_EXPECT=$((BADCSUM_SENT - BADCSUM_SENT / BADCSUM_EVERY))
		NETLATD_IFACES="--iface vc"
		if start_netlatd; then
			start_nlrx
			nc 127.0.0.1 5001 </dev/null >/dev/null 2>&1 &
			sleep 0.3
			kill $! 2>/dev/null
			in_peer nlrx --send 10.13.0.1:5009 --count 1 --len 16 >/dev/null
			sleep 0.3
			mark "BADCSUM-SNMP-BEFORE $(grep '^Udp:' /proc/net/snmp | tr '\n' ' ')"
			in_peer nlrx --send 10.13.0.1:5000 --count $BADCSUM_SENT --len 40 --bad-every $BADCSUM_EVERY
			wait $nlrx_pid
			mark "NLRX-EXIT rc=$?"
			section NLRX /tmp/nlrx.out
			mark "BADCSUM-SNMP-AFTER $(grep '^Udp:' /proc/net/snmp | tr '\n' ' ')"
			stop_netlatd
		fi
		NETLATD_IFACES=""
		UDP_EXPECT=$saved_expect
	else
		mark "BADCSUM-SETUP failed"
	fi
	kill $peer
	ip link del vc 2>/dev/null
}

# The stacked devices on the receiving side ($stacked_rx: a command prefix
# entering its namespace, "" for this one; $stacked_sys: the sysfs showing
# it), the traffic from the peer namespace, netlatd tracing them.
stacked_run() {
	rx_ip() { $stacked_rx ip "$@"; }
	in_peer() { nsenter -t $peer -n "$@"; }
	rx_ip link add va type veth && rx_ip link add vb type veth || { mark "STACKED-SETUP failed"; return; }
	# busybox names each peer end vethN: veth0 is va's, veth1 vb's.
	pa=$(ls $stacked_sys/class/net | grep '^veth' | sort | sed -n 1p)
	pb=$(ls $stacked_sys/class/net | grep '^veth' | sort | sed -n 2p)
	rx_ip link set $pa netns $peer && rx_ip link set $pb netns $peer &&
	rx_ip link add link va name va.100 type vlan id 100 &&
	in_peer ip link add link $pa name $pa.100 type vlan id 100 &&
	echo active-backup >$stacked_sys/class/net/bond0/bonding/mode &&
	echo +vb >$stacked_sys/class/net/bond0/bonding/slaves &&
	rx_ip link set lo up &&
	rx_ip link set va up && rx_ip link set va.100 up && rx_ip link set bond0 up &&
	rx_ip addr add 10.10.0.1/24 dev va.100 && rx_ip addr add 10.11.0.1/24 dev va &&
	rx_ip addr add 10.12.0.1/24 dev bond0 &&
	in_peer ip link set lo up && in_peer ip link set $pa up && in_peer ip link set $pa.100 up &&
	in_peer ip link set $pb up &&
	in_peer ip addr add 10.10.0.2/24 dev $pa.100 && in_peer ip addr add 10.11.0.2/24 dev $pa &&
	in_peer ip addr add 10.12.0.2/24 dev $pb || { mark "STACKED-SETUP failed"; return; }
	mark "STACKED-SETUP ok peer=$pa,$pb"
	saved_expect=$UDP_EXPECT
	UDP_EXPECT=$((STACKED_TAGGED + STACKED_UNTAGGED + STACKED_BONDED))
	NETLATD_IFACES="$NETLATD_NETNS --iface va.100 --iface bond0"
	NLRX_IN=$stacked_rx
	if start_netlatd; then
		start_nlrx
		# No TCP here: a connection over lo (not traced) closed at once ends
		# nlrx's TCP side, so it exits on the last datagram, not on idling.
		$stacked_rx nc 127.0.0.1 5001 </dev/null >/dev/null 2>&1 &
		sleep 0.3
		kill $! 2>/dev/null
		# A first datagram each way settles ARP before the counted ones; it
		# goes to a port no one reads, so only the counted ones reach nlrx.
		for a in 10.10.0.1 10.11.0.1 10.12.0.1; do in_peer nlrx --send $a:5009 --count 1 --len 16 >/dev/null; done
		sleep 0.3
		in_peer nlrx --send 10.11.0.1:5000 --count $STACKED_UNTAGGED --len 60
		in_peer nlrx --send 10.10.0.1:5000 --count $STACKED_TAGGED --len 100
		in_peer nlrx --send 10.12.0.1:5000 --count $STACKED_BONDED --len 140
		wait $nlrx_pid
		mark "NLRX-EXIT rc=$?"
		section NLRX /tmp/nlrx.out
		stop_netlatd
	fi
	NETLATD_IFACES="" NLRX_IN=""
	UDP_EXPECT=$saved_expect
}

for phase in $PHASES; do
	mark "PHASE-BEGIN $phase uptime=$(uptime_s)"
	phase_$phase
	mark "PHASE-END $phase uptime=$(uptime_s)"
done

# Once per boot, last (eth0 leaves this namespace, and comes back when the
# namespace ends): the NIC in a namespace of its own, where this process's
# /sys/class/net no longer shows it; --check --netns must find its IRQ lines
# through its PCI address.
if [ -n "$NETLATD" ]; then
	unshare -n sleep 600 &
	nicns=$!
	sleep 0.2
	# Up there: a NIC moved is brought down, and its driver frees its
	# vectors until it is opened again (e1000e and virtio-net then show only
	# their INTx line, e1000's line has no handler named).
	if ip link set eth0 netns $nicns && nsenter -t $nicns -n ip link set eth0 up; then
		mark "CHECK-NETNS-BEGIN"
		timeout 120 $NETLATD --check --netns $nicns --iface eth0 2>&1
		mark "CHECK-NETNS-END rc=$?"
	else
		mark "CHECK-NETNS-SETUP failed"
	fi
	kill $nicns
fi

if [ -n "$GUEST_POST_CMD" ]; then
	mark "GUEST-POST-CMD-BEGIN"
	sh -c "$GUEST_POST_CMD" 2>&1
	mark "GUEST-POST-CMD-END rc=$?"
fi
finish "ok"
