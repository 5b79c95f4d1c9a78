// SPDX-License-Identifier: GPL-2.0-only
/* nlrx's receiving mode (--udp, --tcp): the listening sockets, one blocking
 * reader thread each, the wait for the end (all expected, signalled or idle)
 * and the summary lines the host judges. */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nlrx.h"

static atomic_ullong udp_datagrams, udp_bytes, tcp_reads, tcp_bytes;
/* Every datagram read (one UDP reader thread), in order: its length and
 * CLOCK_REALTIME before the recvfrom() call and after it returned. The host
 * checks that netlatd's record of the i-th datagram is of that datagram and
 * stamps its return inside that call, not in a later one. */
#define MAX_READS 65536
struct udp_read {
	unsigned long long before, after;
	unsigned short len;
};
static struct udp_read udp_reads[MAX_READS];
static atomic_ullong last_rx_ns;
static atomic_int tcp_done;
static atomic_int stop;

static unsigned long long realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int listen_socket(int type, int port)
{
	int fd = socket(AF_INET, type, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("bind");
	if (type == SOCK_STREAM && listen(fd, 4) < 0)
		die("listen");
	return fd;
}

static int peek_first;     /* --peek */
static long first_delay_ms; /* --delay-ms */

static void *udp_reader(void *arg)
{
	int fd = *(int *)arg;
	char buf[65536];
	if (first_delay_ms > 0) {
		struct timespec d = {first_delay_ms / 1000, (first_delay_ms % 1000) * 1000000L};
		while (nanosleep(&d, &d) != 0 && errno == EINTR && !atomic_load(&stop))
			;
	}
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		if (peek_first && recv(fd, buf, 1, MSG_PEEK | MSG_TRUNC) < 0) {
			if (errno == EINTR)
				continue;
			break; /* shutdown() by main */
		}
		unsigned long long before = realtime_ns();
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		unsigned long long after = realtime_ns();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break; /* shutdown() by main */
		}
		if (atomic_load(&stop))
			break;
		unsigned long long i = atomic_load(&udp_datagrams);
		if (i < MAX_READS)
			udp_reads[i] = (struct udp_read){before, after, (unsigned short)n};
		atomic_fetch_add(&udp_datagrams, 1);
		atomic_fetch_add(&udp_bytes, (unsigned long long)n);
		atomic_store(&last_rx_ns, now_ns());
	}
	return NULL;
}

static void *tcp_reader(void *arg)
{
	int lfd = *(int *)arg;
	int fd;
	do
		fd = accept(lfd, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return NULL;
	char buf[65536];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		atomic_fetch_add(&tcp_reads, 1);
		atomic_fetch_add(&tcp_bytes, (unsigned long long)n);
		atomic_store(&last_rx_ns, now_ns());
	}
	close(fd);
	atomic_store(&tcp_done, 1);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, 1);
}

/* The readers' threads on their sockets; 1 if --busy-poll cannot be set. */
static int start_readers(const struct nlrx_opts *o, int *ufd, pthread_t *ut, int *tfd, pthread_t *tt)
{
	if (o->udp_port) {
		*ufd = listen_socket(SOCK_DGRAM, o->udp_port);
		int big = 4 << 20;
		setsockopt(*ufd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		int busy = (int)o->busy_poll_us;
		if (busy && setsockopt(*ufd, SOL_SOCKET, SO_BUSY_POLL, &busy, sizeof(busy)) != 0) {
			fprintf(stderr, "nlrx: error: SO_BUSY_POLL %d: %s\n", busy, strerror(errno));
			return 1;
		}
		pthread_create(ut, NULL, udp_reader, ufd);
	}
	if (o->tcp_port) {
		*tfd = listen_socket(SOCK_STREAM, o->tcp_port);
		pthread_create(tt, NULL, tcp_reader, tfd);
	} else {
		atomic_store(&tcp_done, 1);
	}
	return 0;
}

/* Why the receiving ended: "done" (all expected came, the TCP peer closed),
 * "signal" or "idle". */
static const char *wait_for_end(const struct nlrx_opts *o)
{
	unsigned long long start = now_ns();
	const char *why = "done";
	for (;;) {
		usleep(20000);
		if (atomic_load(&stop)) {
			why = "signal";
			break;
		}
		bool udp_ok = o->udp_expect < 0 ? true : (long)atomic_load(&udp_datagrams) >= o->udp_expect;
		if (udp_ok && atomic_load(&tcp_done) && (o->udp_expect >= 0 || o->tcp_port))
			break;
		unsigned long long last = atomic_load(&last_rx_ns);
		unsigned long long t = now_ns();
		if (last ? t - last > (unsigned long long)o->idle_ms * 1000000ull
			 : t - start > 4ull * (unsigned long long)o->idle_ms * 1000000ull) {
			why = "idle";
			break;
		}
	}
	return why;
}

static void print_result(const char *why)
{
	/* "len:before:after" per datagram, times in ns after the first call. */
	unsigned long long nd = atomic_load(&udp_datagrams);
	unsigned long long base = nd ? udp_reads[0].before : 0;
	printf("nlrx: udp_reads base_ns=%llu", base);
	for (unsigned long long i = 0; i < nd && i < MAX_READS; i++)
		printf("%c%u:%llu:%llu", i ? ',' : ' ', udp_reads[i].len, udp_reads[i].before - base,
		       udp_reads[i].after - base);
	printf("\n");
	printf("nlrx: result udp_datagrams=%llu udp_bytes=%llu tcp_reads=%llu tcp_bytes=%llu end=%s\n",
	       atomic_load(&udp_datagrams), atomic_load(&udp_bytes), atomic_load(&tcp_reads),
	       atomic_load(&tcp_bytes), why);
	fflush(stdout);
}

int receive(const struct nlrx_opts *o)
{
	peek_first = o->peek_first;
	first_delay_ms = o->first_delay_ms;
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int ufd = -1, tfd = -1;
	pthread_t ut, tt;
	if (start_readers(o, &ufd, &ut, &tfd, &tt) != 0)
		return 1;
	if (o->ready_file) {
		FILE *f = fopen(o->ready_file, "w");
		if (f)
			fclose(f);
	}
	printf("nlrx: listening udp=%d tcp=%d\n", o->udp_port, o->tcp_port);
	fflush(stdout);

	const char *why = wait_for_end(o);
	/* Wake the blocked readers; their counts are final once they return. */
	atomic_store(&stop, 1);
	if (ufd >= 0) {
		shutdown(ufd, SHUT_RDWR);
		pthread_join(ut, NULL);
	}
	if (tfd >= 0) {
		shutdown(tfd, SHUT_RDWR);
		if (atomic_load(&tcp_done))
			pthread_join(tt, NULL);
		else
			pthread_cancel(tt);
	}
	print_result(why);
	return 0;
}
