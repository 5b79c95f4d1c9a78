// SPDX-License-Identifier: GPL-2.0-only
/* nlsenders' TCP modes: many connections held open at once, and one
 * connection per request. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlsenders.h"

static int connect_to(const struct sockaddr_storage *dest, socklen_t len)
{
	int fd = socket(dest->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		nl_die("socket");
	/* One write, one segment: the server's reads and netlatd's records
	 * can then be counted against the writes. */
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (connect(fd, (const struct sockaddr *)dest, len) != 0)
		if (errno != EINTR)
			nl_die("connect");
	return fd;
}

static int write_request(int fd, uint32_t id, long len)
{
	char *msg = nls_message(len, id);
	uint64_t ns = nl_mono_ns();
	long n = write(fd, msg, (size_t)len);
	nls_log_sent(id, (uint32_t)len, nls_local_port(fd), ns);
	return n == len;
}

/* Waits until the server closed fd (it read everything first). */
static int wait_closed(int fd, int timeout_ms)
{
	char buf[256];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	for (;;) {
		if (poll(&p, 1, timeout_ms) <= 0)
			return 0;
		long n = read(fd, buf, sizeof(buf));
		if (n == 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return 0;
	}
}

/*
 * A pause every 256 segments. veth queues each segment on a CPU's backlog
 * (1,000 packets by default); 10,000 writes back to back overflowed it in
 * 2 of 40 runs (softnet_stat drops), and each dropped segment came again
 * only after a retransmission timeout.
 */
static void pace(long i)
{
	if (i % 256 == 255)
		usleep(1000);
}

int nls_run_tcp_conns(void)
{
	struct sockaddr_storage dest;
	socklen_t dest_len = nl_sockaddr(&dest, scfg.to, scfg.port, AF_INET);
	nl_raise_nofile(scfg.conns + 256);
	nls_log_init(scfg.conns * scfg.requests);
	int *fds = calloc((size_t)scfg.conns, sizeof(int));
	if (!fds)
		nl_die("calloc");
	for (long i = 0; i < scfg.conns; i++)
		fds[i] = connect_to(&dest, dest_len);
	long failed_writes = 0, not_closed = 0;
	/* Round by round over every connection: by the time a connection
	 * writes again, its last segment left long ago, so no write is merged
	 * into another. */
	for (long r = 0; r < scfg.requests; r++) {
		for (long i = 0; i < scfg.conns; i++) {
			failed_writes += !write_request(fds[i], (uint32_t)(r * scfg.conns + i), scfg.size);
			pace(i);
		}
		usleep((useconds_t)(scfg.gap_ms * 1000));
	}
	for (long i = 0; i < scfg.conns; i++) {
		shutdown(fds[i], SHUT_WR);
		pace(i);
	}
	for (long i = 0; i < scfg.conns; i++) {
		not_closed += !wait_closed(fds[i], 5000);
		close(fds[i]);
	}
	if (failed_writes || not_closed)
		fprintf(stderr, "nlsenders: %ld writes failed, %ld connections not closed by the server\n",
			failed_writes, not_closed);
	int ok = !failed_writes && !not_closed;
	free(fds);
	return ok;
}

int nls_run_tcp_rpc(void)
{
	struct sockaddr_storage dest;
	socklen_t dest_len = nl_sockaddr(&dest, scfg.to, scfg.port, AF_INET);
	nls_log_init(scfg.requests);
	int ok = 1;
	for (long i = 0; i < scfg.requests && ok; i++) {
		int fd = connect_to(&dest, dest_len);
		ok = write_request(fd, (uint32_t)i, scfg.base_len + i % scfg.len_span);
		/* The reply, then the server's close. */
		ok = ok && wait_closed(fd, 5000);
		close(fd);
	}
	return ok;
}
