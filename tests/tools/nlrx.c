// SPDX-License-Identifier: GPL-2.0-only
/*
 * nlrx: the receiving application of the vm test tier (tests/vm/).
 *
 * Runs inside the guest, linked static so the initramfs needs nothing else.
 * It is a deliberately plain reader: one thread per socket, blocking
 * recvfrom()/recv() for every datagram, so each packet ends exactly where
 * netlatd expects the receive path to end (the receive call returning).
 * Counting what it got lets the host check netlatd's packet counts against
 * what an application really saw; the length and the call's start and end
 * time of every datagram read ("nlrx: udp_reads ...") let it check that each
 * record is of the right datagram and was stamped in the call that read it.
 *
 *   nlrx --udp PORT [--udp-expect N] [--tcp PORT] [--idle-ms MS]
 *        [--ready-file PATH]
 *       Receive until N UDP datagrams arrived and the TCP peer closed, or
 *       until nothing arrived for MS milliseconds after the first packet
 *       (or for 4*MS before it). Prints one summary line and exits 0.
 *
 *   nlrx --udp PORT ... --busy-poll US
 *       The same with SO_BUSY_POLL set to US microseconds on the UDP socket:
 *       each blocking read first polls the NIC's NAPI context itself, in its
 *       own call, so a datagram is received (netif_receive_skb) in the
 *       reader's task with no interrupt and no softirq.
 *
 *   nlrx --udp PORT ... --peek 1
 *       Before each read, a blocking recv(MSG_PEEK | MSG_TRUNC) of the
 *       datagram, as dnsmasq does to size its buffer: the read that follows
 *       takes the datagram the peek saw, and its call is the one timed.
 *
 *   nlrx --udp PORT ... --delay-ms MS
 *       The UDP reader sleeps MS milliseconds before its first read: the
 *       datagrams sent meanwhile wait on the socket's queue (a backlog).
 *
 *   nlrx --notify-wait PATH [--idle-ms MS]
 *       Act as the service manager's notify socket for one daemon: bind an
 *       AF_UNIX datagram socket at PATH and wait for a message with READY=1.
 *       Exits 0 when it came, 1 on timeout. This is how the guest knows
 *       netlatd has attached its programs before the host starts sending.
 *
 *   nlrx --send ADDR:PORT --count N --len BYTES
 *       Send N UDP datagrams of BYTES bytes to the IPv4 ADDR:PORT, 2 ms
 *       apart (the vm tier's traffic that the guest makes itself, from one
 *       of its network namespaces). Exits 0 when all were sent, 1 if not.
 *
 *   nlrx --send ADDR:PORT --count N --len BYTES --bad-every K
 *       The same from a raw socket, each datagram's UDP header made here:
 *       datagram i is BYTES + (i * 37) % 101 bytes long (no two consecutive
 *       alike), and every K-th (i % K == K - 1) has a wrong checksum, which
 *       the receiver's read finds when its device does not check it.
 *
 *   nlrx --rx-csum-off DEV
 *       Turn the device's receive checksum offload off (ETHTOOL_SRXCSUM;
 *       busybox has no ethtool): a veth then passes datagrams to UDP as
 *       unchecked, and a bad one is found and dropped by the read.
 *
 * This file reads the command line and runs the mode it asks for: receiving
 * in nlrx_recv.c, sending and --rx-csum-off in nlrx_send.c, --notify-wait
 * in nlrx_notify.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nlrx.h"

unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void die(const char *what)
{
	fprintf(stderr, "nlrx: error: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The options into `o`; 0, or 2 after saying what is wrong. */
static int parse_options(int argc, char **argv, struct nlrx_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "nlrx: error: %s needs a value\n", opt);
			return 2;
		}
		if (!strcmp(opt, "--udp"))
			o->udp_port = atoi(v);
		else if (!strcmp(opt, "--tcp"))
			o->tcp_port = atoi(v);
		else if (!strcmp(opt, "--udp-expect"))
			o->udp_expect = atol(v);
		else if (!strcmp(opt, "--idle-ms"))
			o->idle_ms = atol(v);
		else if (!strcmp(opt, "--ready-file"))
			o->ready_file = v;
		else if (!strcmp(opt, "--notify-wait"))
			o->notify_path = v;
		else if (!strcmp(opt, "--send"))
			o->send_to = v;
		else if (!strcmp(opt, "--count"))
			o->send_count = atol(v);
		else if (!strcmp(opt, "--len"))
			o->send_len = atol(v);
		else if (!strcmp(opt, "--bad-every"))
			o->bad_every = atol(v);
		else if (!strcmp(opt, "--rx-csum-off"))
			o->csum_dev = v;
		else if (!strcmp(opt, "--busy-poll"))
			o->busy_poll_us = atol(v);
		else if (!strcmp(opt, "--peek"))
			o->peek_first = atoi(v) != 0;
		else if (!strcmp(opt, "--delay-ms"))
			o->first_delay_ms = atol(v);
		else {
			fprintf(stderr, "nlrx: error: unknown option %s\n", opt);
			return 2;
		}
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct nlrx_opts o = {.udp_expect = -1, .idle_ms = 5000};
	if (parse_options(argc, argv, &o) != 0)
		return 2;
	if (o.notify_path)
		return notify_wait(o.notify_path, o.idle_ms);
	if (o.csum_dev)
		return rx_csum_off(o.csum_dev);
	if (o.send_to)
		return send_udp(o.send_to, o.send_count, o.send_len, o.bad_every);
	if (!o.udp_port && !o.tcp_port) {
		fprintf(stderr, "nlrx: error: need --udp and/or --tcp\n");
		return 2;
	}
	return receive(&o);
}
