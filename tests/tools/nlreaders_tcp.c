// SPDX-License-Identifier: GPL-2.0-only
/* nlreaders' TCP modes: many concurrent connections read by epoll loops,
 * and one connection per request. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "nlreaders.h"

#define MAX_FD (1 << 20)

static unsigned short *peer_port_of_fd; /* by fd */
static atomic_long accepted, closed_conns;
static atomic_int all_closed;

static int peer_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	return getpeername(fd, (struct sockaddr *)&ss, &len) == 0 ? nl_sockaddr_port(&ss) : 0;
}

/* One read, logged with its bounds. Returns what read() returned. */
static long read_logged(struct nlr_worker *w, int fd, char *buf, int port)
{
	uint64_t before = nl_mono_ns();
	long n = read(fd, buf, NLR_BUF);
	uint64_t after = nl_mono_ns();
	if (n > 0) {
		nlr_log_read(w, n, port, nl_message_id(buf, n), before, after);
		w->bytes += (unsigned long long)n;
	}
	return n;
}

static void conn_closed(struct nlr_worker *w, int fd)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	if (atomic_fetch_add(&closed_conns, 1) + 1 == cfg.conns)
		atomic_store(&all_closed, 1);
}

static void *conn_reader(void *arg)
{
	struct nlr_worker *w = arg;
	char *buf = malloc(NLR_BUF);
	long delay_ms = cfg.delay_ms;
	w->tid = nl_tid();
	while (!atomic_load(&nlr_stop)) {
		struct epoll_event ev[64];
		int r = epoll_wait(w->epfd, ev, 64, -1);
		if (r > 0 && delay_ms) {
			usleep((useconds_t)delay_ms * 1000);
			delay_ms = 0;
		}
		nlr_wait_go(); /* --go-file: no read before it exists */
		for (int i = 0; i < r; i++) {
			int fd = ev[i].data.fd;
			if (fd < 0)
				goto out; /* the stop eventfd */
			long n;
			while ((n = read_logged(w, fd, buf, peer_port_of_fd[fd])) > 0)
				;
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				conn_closed(w, fd);
		}
	}
out:
	free(buf);
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;
	while (atomic_load(&accepted) < cfg.conns && !atomic_load(&nlr_stop)) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* Shut down at the end; anything else is worth a line. */
			if (!atomic_load(&nlr_stop))
				fprintf(stderr, "nlreaders: accept: %s after %ld connections\n", strerror(errno),
					atomic_load(&accepted));
			break;
		}
		if (fd >= MAX_FD) {
			close(fd);
			continue;
		}
		peer_port_of_fd[fd] = (unsigned short)peer_port(fd);
		long i = atomic_fetch_add(&accepted, 1);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
		if (epoll_ctl(workers[i % cfg.threads].epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
			nl_die("epoll_ctl(conn)");
	}
	return NULL;
}

const char *nlr_run_tcp_conns(void)
{
	nl_raise_nofile(cfg.conns + 256);
	peer_port_of_fd = calloc(MAX_FD, sizeof(*peer_port_of_fd));
	int lfd = nlr_bound_socket(SOCK_STREAM);
	int stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_t th[NLR_MAX_THREADS], acc;
	for (int i = 0; i < cfg.threads; i++) {
		workers[i].epfd = nlr_epoll_with_stop(stop_fd);
		workers[i].reads = calloc((size_t)cfg.max_reads, sizeof(struct nlr_read));
		if (pthread_create(&th[i], NULL, conn_reader, &workers[i]) != 0)
			nl_die("pthread_create");
	}
	if (pthread_create(&acc, NULL, acceptor, &lfd) != 0)
		nl_die("pthread_create");
	nlr_ready();
	const char *end = nlr_wait_until_done(-1, &all_closed);
	atomic_store(&nlr_stop, 1);
	shutdown(lfd, SHUT_RDWR);
	pthread_join(acc, NULL);
	uint64_t one = 1;
	if (write(stop_fd, &one, sizeof(one)) < 0)
		nl_die("write(eventfd)");
	for (int i = 0; i < cfg.threads; i++) {
		pthread_join(th[i], NULL);
		close(workers[i].epfd);
	}
	if (strcmp(end, "done"))
		fprintf(stderr, "nlreaders: %ld connections accepted, %ld closed by their peer\n",
			atomic_load(&accepted), atomic_load(&closed_conns));
	/* Connections still open at an idle end close with the process's
	 * fds; nothing else refers to them. */
	close(stop_fd);
	close(lfd);
	free(peer_port_of_fd);
	return end;
}

/* Reads one request (its header says how long it is), then replies. */
static void serve_request(struct nlr_worker *w, int fd, char *buf)
{
	int port = peer_port(fd);
	if (cfg.epoll) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		epoll_wait(ep, &ev, 1, (int)cfg.idle_ms);
		close(ep);
	}
	long want = -1, got = 0, n;
	while ((want < 0 || got < want) && (n = read_logged(w, fd, buf, port)) > 0) {
		if (want < 0)
			want = nl_message_len(buf, n);
		got += n;
	}
	char reply[8] = "nlreply";
	if (write(fd, reply, sizeof(reply)) < 0)
		return;
}

const char *nlr_run_tcp_rpc(void)
{
	struct nlr_worker *w = &workers[0];
	char *buf = malloc(NLR_BUF);
	w->tid = nl_tid();
	w->reads = calloc((size_t)cfg.max_reads, sizeof(*w->reads));
	int lfd = nlr_bound_socket(SOCK_STREAM);
	int defer_s = 5;
	if (cfg.defer_accept && setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof(defer_s)) != 0)
		nl_die("setsockopt(TCP_DEFER_ACCEPT)");
	struct timeval tv = {cfg.idle_ms / 1000, (cfg.idle_ms % 1000) * 1000};
	const char *end = "done";
	nlr_ready();
	for (long i = 0; i < cfg.requests && !atomic_load(&nlr_stop); i++) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, (int)(i ? cfg.idle_ms : 4 * cfg.idle_ms)) <= 0) {
			end = atomic_load(&nlr_stop) ? "signal" : "idle";
			break;
		}
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		/* The application's work between accept and the read: time a
		 * stage ending at the read's return must not contain. */
		if (cfg.work_us)
			nl_spin_us(cfg.work_us);
		serve_request(w, fd, buf);
		close(fd);
	}
	close(lfd);
	free(buf);
	return end;
}
