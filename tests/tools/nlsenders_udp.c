// SPDX-License-Identifier: GPL-2.0-only
/* nlsenders' UDP modes: bursts from several CPUs at once, and the peer of
 * nlreaders' socket churn. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlsenders.h"

static pthread_barrier_t burst_start;
static struct sockaddr_storage dest;
static socklen_t dest_len;
static atomic_int send_failed;

/* IPv4: NOP, record-route with 3 slots, timestamp with 2 (28 bytes, a
 * 48-byte header). IPv6: a hop-by-hop and a destination options header,
 * each 8 bytes of PadN. The receiver's stack must walk past them. */
static void set_ip_options(int fd)
{
	if (dest.ss_family == AF_INET) {
		unsigned char opt[28] = {1, 7, 15, 4};
		opt[16] = 68;
		opt[17] = 12;
		opt[18] = 5;
		if (setsockopt(fd, IPPROTO_IP, IP_OPTIONS, opt, sizeof(opt)) != 0)
			nl_die("setsockopt(IP_OPTIONS)");
		return;
	}
	unsigned char ext[8] = {0, 0, 1, 4, 0, 0, 0, 0};
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_HOPOPTS, ext, sizeof(ext)) != 0)
		nl_die("setsockopt(IPV6_HOPOPTS)");
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_DSTOPTS, ext, sizeof(ext)) != 0)
		nl_die("setsockopt(IPV6_DSTOPTS)");
}

static int udp_socket(int sport)
{
	int fd = socket(dest.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		nl_die("socket");
	if (sport) {
		struct sockaddr_storage ss;
		socklen_t len = nl_sockaddr(&ss, "", sport, dest.ss_family);
		if (bind(fd, (struct sockaddr *)&ss, len) != 0)
			nl_die("bind(source port)");
	}
	if (scfg.ip_options)
		set_ip_options(fd);
	return fd;
}

static void send_one(int fd, uint32_t id, long len)
{
	char *msg = nls_message(len, id);
	uint64_t ns = nl_mono_ns();
	if (sendto(fd, msg, (size_t)len, 0, (struct sockaddr *)&dest, dest_len) != len)
		atomic_store(&send_failed, 1);
	nls_log_sent(id, (uint32_t)len, nls_local_port(fd), ns);
}

/* Thread t sends its share [first, first + count) of every burst. */
static void *burst_sender(void *arg)
{
	int t = (int)(long)arg;
	long per = scfg.burst_size / scfg.threads, extra = scfg.burst_size % scfg.threads;
	long count = per + (t < extra), first = t * per + (t < extra ? t : extra);
	int *fds = calloc((size_t)count + 1, sizeof(int));
	nl_pin_cpu(t);
	int shared = scfg.equal ? -1 : udp_socket(0);
	for (long b = 0; b < scfg.bursts; b++) {
		long id0 = b * scfg.burst_size + first;
		/* Equal lengths: a socket per datagram, made before the burst
		 * so that the burst itself is nothing but sends. */
		for (long j = 0; j < count && scfg.equal; j++)
			fds[j] = udp_socket(scfg.sport_base + (int)(id0 + j));
		pthread_barrier_wait(&burst_start);
		for (long j = 0; j < count; j++) {
			long id = id0 + j;
			if (scfg.empty_every && id % scfg.empty_every == 0 &&
			    sendto(scfg.equal ? fds[j] : shared, "", 0, 0, (struct sockaddr *)&dest, dest_len) != 0)
				atomic_store(&send_failed, 1);
			send_one(scfg.equal ? fds[j] : shared, (uint32_t)id, scfg.equal ? scfg.len : scfg.base_len + id);
		}
		for (long j = 0; j < count && scfg.equal; j++)
			close(fds[j]);
		usleep((useconds_t)scfg.gap_us);
	}
	if (shared >= 0)
		close(shared);
	free(fds);
	return NULL;
}

int nls_run_udp(void)
{
	long total = scfg.bursts * scfg.burst_size;
	long longest = scfg.equal ? scfg.len : scfg.base_len + total - 1;
	if (longest > 65507 || (scfg.equal && scfg.sport_base + total > 65535))
		nl_usage("nlsenders", "too many datagrams: lengths above 65507 or source ports above 65535");
	dest_len = nl_sockaddr(&dest, scfg.to, scfg.port, AF_INET);
	nls_log_init(total);
	pthread_barrier_init(&burst_start, NULL, (unsigned)scfg.threads);
	pthread_t th[64];
	for (long t = 0; t < scfg.threads; t++)
		if (pthread_create(&th[t], NULL, burst_sender, (void *)t) != 0)
			nl_die("pthread_create");
	for (int t = 0; t < scfg.threads; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&burst_start);
	return !atomic_load(&send_failed);
}

/* The reader says when its new socket is bound; a round sent earlier
 * would find no socket (or the last one, closing). */
static int wait_ready(int fd, long round)
{
	char buf[64];
	for (;;) {
		long n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 0;
		if (nl_header_id(buf, n, NL_READY_MAGIC) == round)
			return 1;
	}
}

int nls_run_udp_churn(void)
{
	dest_len = nl_sockaddr(&dest, scfg.to, scfg.port, AF_INET);
	nls_log_init(scfg.rounds * scfg.per_round);
	int fd = udp_socket(scfg.listen_port);
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	long id = 0;
	int ok = 1;
	for (long r = 0; r < scfg.rounds && ok; r++) {
		ok = wait_ready(fd, r);
		for (long k = 0; k < scfg.per_round && ok; k++, id++)
			send_one(fd, (uint32_t)id, scfg.base_len + id % scfg.len_span);
	}
	close(fd);
	return ok && !atomic_load(&send_failed);
}

static atomic_long flood_refused;

/* Thread t sends datagrams t, t + T, t + 2T, ... until the deadline. */
static void *flood_sender(void *arg)
{
	int t = (int)(long)arg;
	nl_pin_cpu(t);
	int fd = udp_socket(0);
	int sport = nls_local_port(fd);
	uint64_t deadline = nl_mono_ns() + (uint64_t)scfg.duration_ms * 1000000ull;
	long share = scfg.max_sends / scfg.threads;
	for (long k = 0; k < share; k++) {
		uint32_t id = (uint32_t)(t + k * scfg.threads);
		long len = scfg.base_len + id % scfg.len_span;
		char *msg = nls_message(len, id);
		uint64_t ns = nl_mono_ns();
		if (ns >= deadline)
			break;
		if (sendto(fd, msg, (size_t)len, 0, (struct sockaddr *)&dest, dest_len) == len) {
			if (!sport)
				sport = nls_local_port(fd);
			nls_log_sent(id, (uint32_t)len, sport, ns);
			continue;
		}
		/* The interface (or its address, or the route) is gone for a
		 * moment, or the queue is full: counted, then a pause. */
		atomic_fetch_add(&flood_refused, 1);
		usleep(1000);
	}
	close(fd);
	return NULL;
}

int nls_run_udp_flood(void)
{
	if (scfg.base_len + scfg.len_span - 1 > 65507)
		nl_usage("nlsenders", "--base-len + --len-span above 65508");
	dest_len = nl_sockaddr(&dest, scfg.to, scfg.port, AF_INET);
	nls_log_init(scfg.max_sends);
	pthread_t th[64];
	for (long t = 0; t < scfg.threads; t++)
		if (pthread_create(&th[t], NULL, flood_sender, (void *)t) != 0)
			nl_die("pthread_create");
	for (int t = 0; t < scfg.threads; t++)
		pthread_join(th[t], NULL);
	printf("nlsenders: refused=%ld\n", atomic_load(&flood_refused));
	return 1;
}
