// SPDX-License-Identifier: GPL-2.0-only
/*
 * nlreaders: the receiving applications of the reader tests (tests/bpf/
 * test_readers*.cpp), shaped like real servers, each logging what every one of
 * its receive calls returned so a checker can hold netlatd's per-packet records
 * against it. Linked static (it also runs in the vm tier's guests).
 *
 *   nlreaders udp --port P [--bind ADDR] [--threads N] [--call C] [--vlen V]
 *                 [--epoll] [--work-us W] [--expect N] [--delay-ms D] [--go-file F]
 *       N threads (1..64) read one UDP socket, each with call C: recv,
 *       recvfrom (default), recvmsg, recvmmsg (MSG_WAITFORONE, V messages) or
 *       read. Blocking, or with --epoll: each thread epoll_wait()s, works W us
 *       on CPU, then reads non-blocking until EAGAIN. Ends after N datagrams.
 *       D: every thread waits for the first datagram, then sleeps D ms before
 *       its first read, so that the socket queues a backlog first.
 *       [--go-file F]: no thread reads before F exists, and the idle limit
 *       counts from then: the test creates F once it has sent the backlog.
 *       [--peek]: each call is preceded by the same call with MSG_PEEK (not
 *       logged: it consumes nothing). [--trunc-to B] (recv, recvfrom,
 *       recvmsg): a buffer of B bytes and MSG_TRUNC, so the call returns the
 *       datagram's whole length while copying B bytes; logged with that length.
 *       [--fionread]: each call is preceded by ioctl(FIONREAD), which drops
 *       datagrams with bad checksums at the queue's head, as a read would.
 *       [--poll]: each call is preceded by a poll() of the (blocking) socket
 *       until it is readable, which drops them the same way.
 *       [--held-threads K]: the first K threads are named NLR_HELD_COMM, whose
 *       reads a test BPF program holds (tests/bpf/hold_read.bpf.c).
 *       A zero-length datagram is logged (len 0, id -1) where the call gives
 *       the sender's address (recvfrom, recvmsg); with recv or read it cannot
 *       be told from the shutdown.
 *   nlreaders udp-churn --port P --peer ADDR --peer-port Q --rounds R
 *                 --per-round K
 *       R times: a new socket bound to P, a ready datagram to the peer, K
 *       datagrams read, close (whatever else is queued is left unread).
 *   nlreaders tcp-conns --port P --conns N [--threads T] [--delay-ms D] [--go-file F]
 *       Accepts N connections; T threads read them in epoll loops until each
 *       peer closes. D: each thread sleeps D ms at its first readable
 *       connection before it reads, so that a backlog of segments builds.
 *       F: no thread reads before F exists (the test creates it once all it
 *       wants queued is).
 *   nlreaders tcp-rpc --port P --requests N [--work-us W] [--epoll] [--defer-accept]
 *       One connection per request: accept, work W us, [epoll_wait,] read the
 *       request, reply with 8 bytes, close. --defer-accept: TCP_DEFER_ACCEPT on
 *       the listener (nginx's `deferred`), so that the request's first segment,
 *       not the handshake's ACK, creates the connection.
 *
 * Every mode: [--netns NS] [--log FILE] [--ready-file F] [--idle-ms MS]
 * [--max-reads N] (logged per thread) [--rcvbuf BYTES] (SO_RCVBUFFORCE,
 * default 16 MiB, so that bursts are never dropped). Ends by itself after its count, after MS ms without data
 * (4*MS before the first), or on SIGTERM; joins every thread and closes every
 * socket first. The log, written after the run (no I/O while reading):
 *   offset REALTIME-MONOTONIC BRACKET      (ns; to put wall stamps on MONOTONIC)
 *   R TID LEN PEER_PORT ID BEFORE AFTER    (one per datagram or TCP read)
 * BEFORE/AFTER: CLOCK_MONOTONIC ns just before the call and just after it
 * returned (for recvmmsg, the call's bounds for each datagram it returned);
 * PEER_PORT 0 where the call gives no address (recv, read); ID the message's
 * id (tests/tools/nltool.h), -1 for none. Exit 0, or 1 if it ended idle.
 */
#define _GNU_SOURCE
#include "nlreaders.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct nlr_config cfg;
struct nlr_worker workers[NLR_MAX_THREADS + 1];
atomic_int nlr_stop;
atomic_int nlr_go;

static const char *const known_opts[] = {
	"port", "bind", "threads", "call", "vlen", "epoll", "work-us", "expect", "peer", "peer-port", "rounds",
	"per-round", "conns", "requests", "netns", "log", "ready-file", "idle-ms", "max-reads", "rcvbuf", "delay-ms", "peek", "trunc-to", "held-threads", "fionread", "poll", "defer-accept",
	"go-file", NULL};

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&nlr_stop, 1);
}

static enum nlr_call parse_call(const char *s)
{
	static const char *const names[] = {"recv", "recvfrom", "recvmsg", "recvmmsg", "read"};
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i]))
			return (enum nlr_call)i;
	nl_usage("nlreaders", "--call recv|recvfrom|recvmsg|recvmmsg|read");
}

static void configure(int argc, char **argv)
{
	struct nl_opt o[48];
	int n = nl_parse_opts(argc, argv, o, 48, known_opts);
	cfg.port = (int)nl_opt_long(o, n, "port", 0);
	cfg.bind = nl_opt_str(o, n, "bind", "");
	cfg.threads = (int)nl_opt_long(o, n, "threads", 1);
	cfg.call = parse_call(nl_opt_str(o, n, "call", "recvfrom"));
	cfg.vlen = (int)nl_opt_long(o, n, "vlen", 8);
	cfg.epoll = nl_opt_flag(o, n, "epoll");
	cfg.peek = nl_opt_flag(o, n, "peek");
	cfg.fionread = nl_opt_flag(o, n, "fionread");
	cfg.poll = nl_opt_flag(o, n, "poll");
	cfg.defer_accept = nl_opt_flag(o, n, "defer-accept");
	cfg.trunc_to = nl_opt_long(o, n, "trunc-to", 0);
	cfg.work_us = nl_opt_long(o, n, "work-us", 0);
	cfg.delay_ms = nl_opt_long(o, n, "delay-ms", 0);
	cfg.held_threads = (int)nl_opt_long(o, n, "held-threads", 0);
	cfg.expect = nl_opt_long(o, n, "expect", -1);
	cfg.peer = nl_opt_str(o, n, "peer", "");
	cfg.peer_port = (int)nl_opt_long(o, n, "peer-port", 0);
	cfg.rounds = nl_opt_long(o, n, "rounds", 0);
	cfg.per_round = nl_opt_long(o, n, "per-round", 1);
	cfg.conns = nl_opt_long(o, n, "conns", 1);
	cfg.requests = nl_opt_long(o, n, "requests", 1);
	cfg.log = nl_opt_str(o, n, "log", NULL);
	cfg.ready_file = nl_opt_str(o, n, "ready-file", NULL);
	cfg.go_file = nl_opt_str(o, n, "go-file", NULL);
	atomic_store(&nlr_go, !cfg.go_file);
	cfg.idle_ms = nl_opt_long(o, n, "idle-ms", 2000);
	cfg.max_reads = nl_opt_long(o, n, "max-reads", 1 << 18);
	cfg.rcvbuf = (int)nl_opt_long(o, n, "rcvbuf", 16 << 20);
	cfg.family = nl_family(cfg.bind);
	if (cfg.port <= 0 || cfg.port > 65535 || cfg.threads < 1 || cfg.threads > NLR_MAX_THREADS ||
	    cfg.held_threads < 0 || cfg.held_threads > cfg.threads ||
	    cfg.vlen < 1 || cfg.vlen > NLR_MAX_VLEN || cfg.trunc_to < 0 || cfg.trunc_to > NLR_BUF ||
	    ((cfg.trunc_to || cfg.peek) && (cfg.call == NLR_RECVMMSG || cfg.call == NLR_READ)))
		nl_usage("nlreaders", "--port 1..65535, --threads 1..64, --held-threads 0..threads, --vlen 1..64, "
				      "--trunc-to 0..65536; "
				      "--peek and --trunc-to with recv, recvfrom or recvmsg");
	const char *ns = nl_opt_str(o, n, "netns", NULL);
	if (ns)
		nl_enter_netns(ns);
}

void nlr_log_read(struct nlr_worker *w, long len, int peer_port, int64_t id, uint64_t before, uint64_t after)
{
	if (w->nreads < (size_t)cfg.max_reads)
		w->reads[w->nreads++] = (struct nlr_read){before, after, (uint32_t)len, (int32_t)id, (uint16_t)peer_port};
	else
		w->unlogged++;
	atomic_fetch_add_explicit(&w->count, 1, memory_order_relaxed);
	atomic_store_explicit(&w->last_ns, after, memory_order_relaxed);
}

int nlr_bound_socket(int type)
{
	int fd = socket(cfg.family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		nl_die("socket");
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* Bursts of 256 datagrams from several CPUs must not overflow the queue:
	 * a datagram the stack drops is never read, so it has no reader to name. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &cfg.rcvbuf, sizeof(cfg.rcvbuf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg.rcvbuf, sizeof(cfg.rcvbuf));
	struct sockaddr_storage ss;
	socklen_t len = nl_sockaddr(&ss, cfg.bind, cfg.port, cfg.family);
	if (bind(fd, (struct sockaddr *)&ss, len) != 0)
		nl_die("bind");
	if (type == SOCK_STREAM && listen(fd, 65535) != 0)
		nl_die("listen");
	return fd;
}

/* An epoll instance with the stop eventfd in it (data.fd = -1). */
int nlr_epoll_with_stop(int stop_fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		nl_die("epoll_create1");
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = -1};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &ev) != 0)
		nl_die("epoll_ctl(eventfd)");
	return ep;
}

static uint64_t total_reads(void)
{
	uint64_t n = 0;
	for (int i = 0; i <= NLR_MAX_THREADS; i++)
		n += atomic_load_explicit(&workers[i].count, memory_order_relaxed);
	return n;
}

static uint64_t last_read_ns(void)
{
	uint64_t last = 0;
	for (int i = 0; i <= NLR_MAX_THREADS; i++) {
		uint64_t t = atomic_load_explicit(&workers[i].last_ns, memory_order_relaxed);
		last = t > last ? t : last;
	}
	return last;
}

const char *nlr_wait_until_done(long expect, atomic_int *done)
{
	uint64_t start = nl_mono_ns(), idle = (uint64_t)cfg.idle_ms * 1000000ull;
	for (;;) {
		usleep(5000);
		if (atomic_load(&nlr_stop))
			return "signal";
		/* Held by --go-file: not idle, however long the test takes to
		 * send what it wants queued first. */
		if (!atomic_load(&nlr_go)) {
			atomic_store(&nlr_go, access(cfg.go_file, F_OK) == 0);
			start = nl_mono_ns();
			continue;
		}
		if ((expect >= 0 && (long)total_reads() >= expect) || (done && atomic_load(done)))
			return "done";
		/* The last read first: a reader may stamp one after a `now`
		 * taken before it, and now - last would wrap. */
		uint64_t last = last_read_ns(), now = nl_mono_ns();
		if (last ? now - last > idle : now - start > 4 * idle)
			return "idle";
	}
}

static void write_log(int64_t offset, uint64_t bracket)
{
	FILE *f = fopen(cfg.log, "w");
	if (!f)
		nl_die(cfg.log);
	fprintf(f, "offset %lld %llu\n", (long long)offset, (unsigned long long)bracket);
	for (int i = 0; i <= NLR_MAX_THREADS; i++) {
		const struct nlr_worker *w = &workers[i];
		for (size_t k = 0; k < w->nreads; k++) {
			const struct nlr_read *r = &w->reads[k];
			fprintf(f, "R %ld %u %u %d %llu %llu\n", w->tid, r->len, r->peer_port, r->id,
				(unsigned long long)r->before, (unsigned long long)r->after);
		}
	}
	if (fclose(f) != 0)
		nl_die(cfg.log);
}

/* Until --go-file exists (nlr_wait_until_done looks for it) or a signal. */
void nlr_wait_go(void)
{
	while (!atomic_load(&nlr_go) && !atomic_load(&nlr_stop))
		usleep(1000);
}

void nlr_ready(void)
{
	if (!cfg.ready_file)
		return;
	FILE *f = fopen(cfg.ready_file, "w");
	if (!f)
		nl_die(cfg.ready_file);
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		nl_usage("nlreaders", "nlreaders udp|udp-churn|tcp-conns|tcp-rpc --port P ...");
	const char *mode = argv[1];
	configure(argc - 2, argv + 2);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i <= NLR_MAX_THREADS; i++)
		workers[i].index = i;
	int64_t offset;
	uint64_t bracket;
	nl_clock_offset(&offset, &bracket);

	const char *end;
	if (!strcmp(mode, "udp"))
		end = nlr_run_udp();
	else if (!strcmp(mode, "udp-churn"))
		end = nlr_run_udp_churn();
	else if (!strcmp(mode, "tcp-conns"))
		end = nlr_run_tcp_conns();
	else if (!strcmp(mode, "tcp-rpc"))
		end = nlr_run_tcp_rpc();
	else
		nl_usage("nlreaders", "mode is udp, udp-churn, tcp-conns or tcp-rpc");

	uint64_t bytes = 0, unlogged = 0;
	for (int i = 0; i <= NLR_MAX_THREADS; i++) {
		bytes += workers[i].bytes;
		unlogged += workers[i].unlogged;
	}
	if (cfg.log)
		write_log(offset, bracket);
	printf("nlreaders: result reads=%llu bytes=%llu unlogged=%llu end=%s\n", (unsigned long long)total_reads(),
	       (unsigned long long)bytes, (unsigned long long)unlogged, end);
	return strcmp(end, "idle") == 0;
}
