/* SPDX-License-Identifier: GPL-2.0-only */
/* nlrx's modes (nlrx_recv.c, nlrx_send.c, nlrx_notify.c) and what they share
 * with its main (nlrx.c): the options, the clock and the error exit. */
#ifndef NLRX_H
#define NLRX_H

/* The command line (nlrx.c's header comment says what each option does). */
struct nlrx_opts {
	int udp_port, tcp_port;
	long udp_expect, idle_ms;
	const char *ready_file, *notify_path, *send_to;
	long send_count, send_len, bad_every, busy_poll_us;
	const char *csum_dev;
	int peek_first;      /* --peek */
	long first_delay_ms; /* --delay-ms */
};

/* CLOCK_MONOTONIC in nanoseconds. */
unsigned long long now_ns(void);
/* "nlrx: error: WHAT: strerror(errno)" and exit 2. */
__attribute__((noreturn)) void die(const char *what);

/* --udp/--tcp: receive until done, signalled or idle; prints the result. */
int receive(const struct nlrx_opts *o);
/* --notify-wait: 0 when READY=1 came within timeout_ms, 1 if not. */
int notify_wait(const char *path, long timeout_ms);
/* --send: count datagrams of len bytes to "ADDR:PORT"; every bad_every-th
 * with a wrong checksum, from a raw socket, when bad_every > 0. */
int send_udp(const char *to, long count, long len, long bad_every);
/* --rx-csum-off: the device's receive checksum offload off. */
int rx_csum_off(const char *dev);

#endif
