#!/bin/bash
# /init of the join suite's guest (tests/vm/run_vm_suite.py): a Debian 12
# root file system (make-rootfs.sh) booted as the initramfs, with the bpf
# tier's test binary, netlatd and the tools the tests exec at the paths the
# build gave them. Runs each test of /etc/netlatd-suite.tests (one Catch2
# test spec a line, escaped by the host) in its own process of the test
# binary, one after the other, and reports on the serial console:
#
#   @@NLVM TEST-BEGIN <i>
#   ... the test's output ...
#   @@NLVM TEST-END <i> rc=<exit status> secs=<seconds>
#
# The host judges each from its exit status (Catch2: 0 passed, 4 skipped)
# and its output. Always ends with "@@NLVM END <reason>" and a power-off.
# Mounts, mark and finish.
. /lib/netlatd-vm/guest-base.sh
. /etc/netlatd-suite.conf

mark "BOOTED $(uname -r) uptime=$(uptime_s)"
for m in $MODULES; do
	insmod "/lib/modules/netlatd-suite/$m.ko" || finish "insmod-$m-failed"
done
ip link set lo up
hostname netlatd-guest
# The tests' own limits (10,000 connections) are raised by the tests; the
# guest's default hard limit of open files allows it.
ulimit -n 1048576 2>/dev/null || ulimit -n 65536

# The netlatd binary and its tools are where the build left them; the test
# binary finds them by those paths.
i=0
while IFS= read -r spec; do
	[ -n "$spec" ] || continue
	mark "TEST-BEGIN $i uptime=$(uptime_s)"
	start=$(date +%s.%N)
	# No test may hold the guest: bounded by TEST_TIMEOUT, then killed.
	NETLATD_TEST_SCALE=$TEST_SCALE NETLATD_TEST_PATIENCE=$TEST_PATIENCE timeout -k 5 "$TEST_TIMEOUT" "$TESTS_BIN" "$spec" --colour-mode none 2>&1
	rc=$?
	mark "TEST-END $i rc=$rc secs=$(echo "$(date +%s.%N) - $start" | awk '{printf "%.1f", $1 - $3}')"
	# What a test left behind (a namespace, a process) would skew the next.
	left=$(ip netns list 2>/dev/null | wc -l)
	[ "$left" = 0 ] || { mark "LEFTOVER $i netns=$left"; ip -all netns delete 2>/dev/null; }
	i=$((i + 1))
done < /etc/netlatd-suite.tests
finish "done tests=$i"
