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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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

static unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "nlrx: error: %s: %s\n", what, strerror(errno));
	exit(2);
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

static int notify_wait(const char *path, long timeout_ms)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket(AF_UNIX)");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "nlrx: error: path too long\n");
		return 2;
	}
	strcpy(a.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("bind(AF_UNIX)");
	/* Tell the shell that started us that the socket exists. */
	printf("nlrx: notify socket %s bound\n", path);
	fflush(stdout);
	unsigned long long deadline = now_ns() + (unsigned long long)timeout_ms * 1000000ull;
	for (;;) {
		unsigned long long t = now_ns();
		if (t >= deadline) {
			printf("nlrx: no READY=1 within %ld ms\n", timeout_ms);
			return 1;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)((deadline - t) / 1000000ull) + 1);
		if (r <= 0)
			continue;
		char msg[4096];
		ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
		if (n <= 0)
			continue;
		msg[n] = 0;
		for (char *c = msg; *c; c++)
			if (*c == '\n')
				*c = ' ';
		printf("nlrx: notify: %s\n", msg);
		fflush(stdout);
		if (strstr(msg, "READY=1"))
			return 0;
	}
}

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, 1);
}

/* The UDP checksum of a datagram from `src` to `dst` (network order), its
 * header's checksum field 0 while it is summed. */
static unsigned short udp_checksum(struct in_addr src, struct in_addr dst, const unsigned char *udp, size_t n)
{
	unsigned long sum = 0;
	const unsigned char *a = (const unsigned char *)&src.s_addr, *b = (const unsigned char *)&dst.s_addr;
	sum += (a[0] << 8 | a[1]) + (a[2] << 8 | a[3]) + (b[0] << 8 | b[1]) + (b[2] << 8 | b[3]);
	sum += IPPROTO_UDP + n;
	for (size_t i = 0; i < n; i += 2)
		sum += (unsigned long)udp[i] << 8 | (i + 1 < n ? udp[i + 1] : 0);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	unsigned short c = (unsigned short)~sum;
	return htons(c ? c : 0xffff);
}

/* --bad-every: each datagram made here and sent from a raw socket. */
static int send_raw(const struct sockaddr_in *to, long count, long len, long bad_every)
{
	/* The source address the route gives, for the checksum. */
	struct sockaddr_in src = {0};
	socklen_t sl = sizeof(src);
	int probe = socket(AF_INET, SOCK_DGRAM, 0);
	if (probe < 0 || connect(probe, (const struct sockaddr *)to, sizeof(*to)) < 0 ||
	    getsockname(probe, (struct sockaddr *)&src, &sl) < 0)
		die("the source address towards --send");
	close(probe);
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
	if (fd < 0)
		die("socket(SOCK_RAW)");
	unsigned char pkt[sizeof(struct udphdr) + 1400 + 101];
	long sent = 0, bad = 0;
	for (long i = 0; i < count; i++) {
		size_t n = (size_t)(len + (i * 37) % 101);
		struct udphdr *uh = (struct udphdr *)pkt;
		memset(pkt + sizeof(*uh), 'b', n);
		uh->source = htons(40000);
		uh->dest = to->sin_port;
		uh->len = htons((unsigned short)(sizeof(*uh) + n));
		uh->check = 0;
		uh->check = udp_checksum(src.sin_addr, to->sin_addr, pkt, sizeof(*uh) + n);
		bool is_bad = i % bad_every == bad_every - 1;
		if (is_bad)
			uh->check ^= htons(0x0101); /* still not 0: 0 would mean "no checksum" */
		if (sendto(fd, pkt, sizeof(*uh) + n, 0, (const struct sockaddr *)to, sizeof(*to)) == (ssize_t)(sizeof(*uh) + n)) {
			sent++;
			bad += is_bad;
		}
		usleep(2000);
	}
	close(fd);
	printf("nlrx: sent %ld of %ld (%ld with a bad checksum) to %s:%u\n", sent, count, bad,
	       inet_ntoa(to->sin_addr), ntohs(to->sin_port));
	return sent == count ? 0 : 1;
}

static int rx_csum_off(const char *dev)
{
	struct ethtool_value ev = {.cmd = ETHTOOL_SRXCSUM, .data = 0};
	struct ifreq ifr = {0};
	if (strlen(dev) >= sizeof(ifr.ifr_name)) {
		fprintf(stderr, "nlrx: error: device name too long: %s\n", dev);
		return 2;
	}
	strcpy(ifr.ifr_name, dev);
	ifr.ifr_data = (char *)&ev;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		die("ETHTOOL_SRXCSUM");
	close(fd);
	printf("nlrx: %s: receive checksum offload off\n", dev);
	return 0;
}

static int send_udp(const char *to, long count, long len, long bad_every)
{
	char addr[64];
	const char *colon = strrchr(to, ':');
	struct sockaddr_in sin = {.sin_family = AF_INET};
	if (!colon || colon - to >= (long)sizeof(addr) || count < 1 || len < 1 || len > 1400) {
		fprintf(stderr, "nlrx: error: --send ADDR:PORT --count N (>0) --len BYTES (1..1400)\n");
		return 2;
	}
	memcpy(addr, to, colon - to);
	addr[colon - to] = 0;
	sin.sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		fprintf(stderr, "nlrx: error: bad IPv4 address %s\n", addr);
		return 2;
	}
	if (bad_every > 0)
		return send_raw(&sin, count, len, bad_every);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	char buf[1400];
	memset(buf, 's', sizeof(buf));
	long sent = 0;
	for (long i = 0; fd >= 0 && i < count; i++) {
		if (sendto(fd, buf, len, 0, (struct sockaddr *)&sin, sizeof(sin)) == len)
			sent++;
		usleep(2000);
	}
	printf("nlrx: sent %ld of %ld to %s\n", sent, count, to);
	return sent == count ? 0 : 1;
}

int main(int argc, char **argv)
{
	int udp_port = 0, tcp_port = 0;
	long udp_expect = -1, idle_ms = 5000;
	const char *ready_file = NULL, *notify_path = NULL, *send_to = NULL;
	long send_count = 0, send_len = 0, bad_every = 0, busy_poll_us = 0;
	const char *csum_dev = NULL;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "nlrx: error: %s needs a value\n", o);
			return 2;
		}
		if (!strcmp(o, "--udp"))
			udp_port = atoi(v);
		else if (!strcmp(o, "--tcp"))
			tcp_port = atoi(v);
		else if (!strcmp(o, "--udp-expect"))
			udp_expect = atol(v);
		else if (!strcmp(o, "--idle-ms"))
			idle_ms = atol(v);
		else if (!strcmp(o, "--ready-file"))
			ready_file = v;
		else if (!strcmp(o, "--notify-wait"))
			notify_path = v;
		else if (!strcmp(o, "--send"))
			send_to = v;
		else if (!strcmp(o, "--count"))
			send_count = atol(v);
		else if (!strcmp(o, "--len"))
			send_len = atol(v);
		else if (!strcmp(o, "--bad-every"))
			bad_every = atol(v);
		else if (!strcmp(o, "--rx-csum-off"))
			csum_dev = v;
		else if (!strcmp(o, "--busy-poll"))
			busy_poll_us = atol(v);
		else if (!strcmp(o, "--peek"))
			peek_first = atoi(v) != 0;
		else if (!strcmp(o, "--delay-ms"))
			first_delay_ms = atol(v);
		else {
			fprintf(stderr, "nlrx: error: unknown option %s\n", o);
			return 2;
		}
		i++;
	}
	if (notify_path)
		return notify_wait(notify_path, idle_ms);
	if (csum_dev)
		return rx_csum_off(csum_dev);
	if (send_to)
		return send_udp(send_to, send_count, send_len, bad_every);
	if (!udp_port && !tcp_port) {
		fprintf(stderr, "nlrx: error: need --udp and/or --tcp\n");
		return 2;
	}

	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int ufd = -1, tfd = -1;
	pthread_t ut, tt;
	if (udp_port) {
		ufd = listen_socket(SOCK_DGRAM, udp_port);
		int big = 4 << 20;
		setsockopt(ufd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		int busy = (int)busy_poll_us;
		if (busy && setsockopt(ufd, SOL_SOCKET, SO_BUSY_POLL, &busy, sizeof(busy)) != 0) {
			fprintf(stderr, "nlrx: error: SO_BUSY_POLL %d: %s\n", busy, strerror(errno));
			return 1;
		}
		pthread_create(&ut, NULL, udp_reader, &ufd);
	}
	if (tcp_port) {
		tfd = listen_socket(SOCK_STREAM, tcp_port);
		pthread_create(&tt, NULL, tcp_reader, &tfd);
	} else {
		atomic_store(&tcp_done, 1);
	}
	if (ready_file) {
		FILE *f = fopen(ready_file, "w");
		if (f)
			fclose(f);
	}
	printf("nlrx: listening udp=%d tcp=%d\n", udp_port, tcp_port);
	fflush(stdout);

	unsigned long long start = now_ns();
	const char *why = "done";
	for (;;) {
		usleep(20000);
		if (atomic_load(&stop)) {
			why = "signal";
			break;
		}
		bool udp_ok = udp_expect < 0 ? true : (long)atomic_load(&udp_datagrams) >= udp_expect;
		if (udp_ok && atomic_load(&tcp_done) && (udp_expect >= 0 || tcp_port))
			break;
		unsigned long long last = atomic_load(&last_rx_ns);
		unsigned long long t = now_ns();
		if (last ? t - last > (unsigned long long)idle_ms * 1000000ull
			 : t - start > 4ull * (unsigned long long)idle_ms * 1000000ull) {
			why = "idle";
			break;
		}
	}
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
	return 0;
}
