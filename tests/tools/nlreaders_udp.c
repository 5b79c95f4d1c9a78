// SPDX-License-Identifier: GPL-2.0-only
/* nlreaders' UDP modes: several threads on one socket, and socket churn. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlreaders.h"

/* One thread's buffers for any of the calls. */
struct udp_bufs {
	char data[NLR_MAX_VLEN][NLR_BUF];
	struct iovec iov[NLR_MAX_VLEN];
	struct sockaddr_storage from[NLR_MAX_VLEN];
	struct mmsghdr msgs[NLR_MAX_VLEN];
};

static struct udp_bufs *udp_bufs_new(void)
{
	struct udp_bufs *b = calloc(1, sizeof(*b));
	if (!b)
		nl_die("calloc");
	for (int i = 0; i < NLR_MAX_VLEN; i++) {
		b->iov[i] = (struct iovec){b->data[i], NLR_BUF};
		b->msgs[i].msg_hdr = (struct msghdr){.msg_name = &b->from[i], .msg_iov = &b->iov[i], .msg_iovlen = 1};
	}
	return b;
}

/*
 * One receive call of the configured kind. Returns the datagrams it
 * returned (each logged with the call's bounds), 0 at end of stream (the
 * socket shut down), or -1 with errno. A call that returns 0 returned a
 * zero-length datagram if it gave the sender's address (recvfrom, recvmsg),
 * else the shutdown.
 */
static int receive_once(struct nlr_worker *w, struct udp_bufs *b, int fd)
{
	socklen_t fl = sizeof(b->from[0]);
	struct msghdr *m = &b->msgs[0].msg_hdr;
	long n = -1;
	int got = 1;
	m->msg_namelen = sizeof(b->from[0]);
	b->from[0].ss_family = 0;
	/* --trunc-to: a short buffer, and the datagram's length all the same. */
	size_t room = cfg.trunc_to ? (size_t)cfg.trunc_to : NLR_BUF;
	int flags = cfg.trunc_to ? MSG_TRUNC : 0;
	b->iov[0].iov_len = room;
	if (cfg.poll) {
		/* Until readable: udp_poll skips datagrams a read would drop. A
		 * shut-down socket is readable (the end of the run). */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		while (poll(&p, 1, 1000) == 0 && !atomic_load(&nlr_stop))
			;
	}
	if (cfg.fionread) {
		int queued;
		if (ioctl(fd, FIONREAD, &queued) < 0)
			return -1;
	}
	if (cfg.peek) {
		/* The same call, looking only: the datagram stays queued for the next. */
		switch (cfg.call) {
		case NLR_RECV: n = recv(fd, b->data[0], room, flags | MSG_PEEK); break;
		case NLR_RECVFROM:
			n = recvfrom(fd, b->data[0], room, flags | MSG_PEEK, (struct sockaddr *)&b->from[0], &fl);
			break;
		case NLR_RECVMSG: n = recvmsg(fd, m, flags | MSG_PEEK); break;
		default: break;
		}
		if (n < 0)
			return -1;
		fl = sizeof(b->from[0]);
		m->msg_namelen = sizeof(b->from[0]);
	}
	uint64_t before = nl_mono_ns();
	switch (cfg.call) {
	case NLR_RECV: n = recv(fd, b->data[0], room, flags); break;
	case NLR_READ: n = read(fd, b->data[0], NLR_BUF); break;
	case NLR_RECVFROM: n = recvfrom(fd, b->data[0], room, flags, (struct sockaddr *)&b->from[0], &fl); break;
	case NLR_RECVMSG: n = recvmsg(fd, m, flags); break;
	case NLR_RECVMMSG:
		for (int i = 0; i < cfg.vlen; i++)
			b->msgs[i].msg_hdr.msg_namelen = sizeof(b->from[0]);
		got = recvmmsg(fd, b->msgs, (unsigned)cfg.vlen, MSG_WAITFORONE, NULL);
		n = got > 0 ? (long)b->msgs[0].msg_len : got;
		break;
	}
	uint64_t after = nl_mono_ns();
	if (n == 0 && (cfg.call == NLR_RECVFROM || cfg.call == NLR_RECVMSG) && b->from[0].ss_family) {
		nlr_log_read(w, 0, nl_sockaddr_port(&b->from[0]), -1, before, after);
		return 1;
	}
	if (n <= 0)
		return (int)n;
	if (cfg.call != NLR_RECVMMSG)
		b->msgs[0].msg_len = (unsigned)n;
	for (int i = 0; i < got; i++) {
		long len = b->msgs[i].msg_len;
		if (len == 0)
			return 0;
		long copied = cfg.trunc_to && len > cfg.trunc_to ? cfg.trunc_to : len;
		nlr_log_read(w, len, nl_sockaddr_port(&b->from[i]), nl_message_id(b->data[i], copied), before, after);
		w->bytes += (unsigned long long)len;
	}
	return got;
}

static void *udp_worker(void *arg)
{
	struct nlr_worker *w = arg;
	struct udp_bufs *b = udp_bufs_new();
	w->tid = nl_tid();
	if (w->index < cfg.held_threads)
		prctl(PR_SET_NAME, NLR_HELD_COMM);
	if (cfg.delay_ms) {
		/* The backlog is counted from the first datagram, not from the
		 * start: a sender slow to start (a loaded machine) must still
		 * find the reader away for the whole delay. */
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		poll(&p, 1, 10000);
		usleep((useconds_t)cfg.delay_ms * 1000);
	}
	nlr_wait_go();
	while (!atomic_load(&nlr_stop)) {
		if (cfg.epoll) {
			/* An event loop: wake, do the application's work, then
			 * drain the socket. The work is before the receive call,
			 * so no stage that ends at the call's return may hold it. */
			struct epoll_event ev[4];
			int r = epoll_wait(w->epfd, ev, 4, -1);
			if (r < 0 && errno != EINTR)
				break;
			if (r <= 0 || atomic_load(&nlr_stop))
				continue;
			if (cfg.work_us)
				nl_spin_us(cfg.work_us);
			int got;
			while ((got = receive_once(w, b, w->fd)) > 0)
				;
			if (got == 0)
				break;
		} else if (receive_once(w, b, w->fd) == 0) {
			break;
		}
	}
	free(b);
	return NULL;
}

const char *nlr_run_udp(void)
{
	int fd = nlr_bound_socket(SOCK_DGRAM);
	int stop_fd = eventfd(0, EFD_CLOEXEC);
	if (cfg.epoll)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < cfg.threads; i++) {
		struct nlr_worker *w = &workers[i];
		w->fd = fd;
		w->reads = calloc((size_t)cfg.max_reads, sizeof(*w->reads));
		if (cfg.epoll) {
			w->epfd = nlr_epoll_with_stop(stop_fd);
			struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
			if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
				nl_die("epoll_ctl");
		}
	}
	pthread_t th[NLR_MAX_THREADS];
	for (int i = 0; i < cfg.threads; i++)
		if (pthread_create(&th[i], NULL, udp_worker, &workers[i]) != 0)
			nl_die("pthread_create");
	nlr_ready();
	const char *end = nlr_wait_until_done(cfg.expect, NULL);
	/* Wake every reader: blocked calls return 0 once the socket is shut
	 * down (after whatever is still queued), epoll loops see the eventfd. */
	atomic_store(&nlr_stop, 1);
	shutdown(fd, SHUT_RDWR);
	uint64_t one = 1;
	if (write(stop_fd, &one, sizeof(one)) < 0)
		nl_die("write(eventfd)");
	for (int i = 0; i < cfg.threads; i++) {
		pthread_join(th[i], NULL);
		if (cfg.epoll)
			close(workers[i].epfd);
	}
	close(stop_fd);
	close(fd);
	return end;
}

/* The peer sends a round only once it has heard that this round's socket
 * exists, so every datagram of the round finds it. */
static void send_ready(int fd, long round)
{
	struct sockaddr_storage peer;
	socklen_t len = nl_sockaddr(&peer, cfg.peer, cfg.peer_port, cfg.family);
	char msg[NL_HDR_LEN];
	nl_put_header(msg, NL_READY_MAGIC, (uint32_t)round, NL_HDR_LEN);
	if (sendto(fd, msg, sizeof(msg), 0, (struct sockaddr *)&peer, len) < 0)
		nl_die("sendto(ready)");
}

/* The round's datagrams, asking again for them every 50 ms until the first
 * comes: a ready datagram sent before the peer listened is lost. */
static int read_round(struct nlr_worker *w, struct udp_bufs *b, int fd, long round)
{
	uint64_t give_up = nl_mono_ns() + (uint64_t)cfg.idle_ms * 1000000ull;
	long k = 0;
	send_ready(fd, round);
	while (k < cfg.per_round && !atomic_load(&nlr_stop)) {
		int got = receive_once(w, b, fd);
		if (got > 0) {
			k += got;
			continue;
		}
		if (got == 0 || (errno != EAGAIN && errno != EINTR) || nl_mono_ns() > give_up)
			return 0;
		if (k == 0 && errno == EAGAIN)
			send_ready(fd, round);
	}
	return k == cfg.per_round;
}

const char *nlr_run_udp_churn(void)
{
	struct nlr_worker *w = &workers[0];
	struct udp_bufs *b = udp_bufs_new();
	w->tid = nl_tid();
	w->reads = calloc((size_t)cfg.max_reads, sizeof(*w->reads));
	cfg.call = NLR_RECVFROM;
	struct timeval tv = {0, 50000};
	const char *end = "done";
	nlr_ready();
	for (long r = 0; r < cfg.rounds && !atomic_load(&nlr_stop); r++) {
		/* A new socket at the same address each round; the kernel
		 * often gives it the memory of the one closed just before. */
		int fd = nlr_bound_socket(SOCK_DGRAM);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		int complete = read_round(w, b, fd, r);
		close(fd);
		if (!complete) {
			end = "idle";
			break;
		}
	}
	free(b);
	return atomic_load(&nlr_stop) ? "signal" : end;
}
