#!/bin/bash
# /init of the bench's guest (bench/guest.py): Debian 12's root file system
# with python3 (tests/vm/make-rootfs.sh) booted as the initramfs, with netlatd,
# the bench's tools, bpftool and bench/*.py in /opt/nlbench. Runs bench.py
# there once with the host's arguments and reports on the serial console:
#
#   @@NLVM BENCH-BEGIN / ... bench.py's log and tables ... / @@NLVM BENCH-END rc=<exit>
#   @@NLVM JSON-BEGIN / the results file / @@NLVM JSON-END
#
# Always ends with "@@NLVM END <reason>" and a power-off.
# Mounts, mark and finish.
. /lib/netlatd-vm/guest-base.sh
. /etc/nlbench-guest.conf

mark "BOOTED $(uname -r) uptime=$(uptime_s)"
for m in $MODULES; do
	insmod "/lib/modules/netlatd-suite/$m.ko" || finish "insmod-$m-failed"
done
ip link set lo up
hostname nlbench-guest

mark "BENCH-BEGIN uptime=$(uptime_s)"
# The daemon goes in the environment, as bench/run.sh passes it.
# shellcheck disable=SC2086  # BENCH_ARGS is a list of words
NLBENCH_DAEMON=/opt/nlbench/netlatd timeout -k 5 "$BENCH_TIMEOUT" \
	python3 /opt/nlbench/bench.py --tools /opt/nlbench --out /tmp/bench.json $BENCH_ARGS 2>&1
rc=$?
mark "BENCH-END rc=$rc uptime=$(uptime_s)"
if [ -f /tmp/bench.json ]; then
	mark "JSON-BEGIN"
	cat /tmp/bench.json
	echo
	mark "JSON-END"
fi
# Anything the bench left behind would be a leak on a host too.
left=$(ip netns list 2>/dev/null | wc -l)
[ "$left" = 0 ] || mark "LEFTOVER netns=$left"
finish "done rc=$rc"
