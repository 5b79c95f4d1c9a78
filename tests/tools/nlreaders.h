/* SPDX-License-Identifier: GPL-2.0-only */
/* nlreaders' modes (nlreaders_udp.c, nlreaders_tcp.c) and what they share
 * with its main (nlreaders.c). */
#ifndef NLREADERS_H
#define NLREADERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "nltool.h"

#define NLR_MAX_THREADS 64
#define NLR_MAX_VLEN 64
#define NLR_BUF 65536

enum nlr_call { NLR_RECV, NLR_RECVFROM, NLR_RECVMSG, NLR_RECVMMSG, NLR_READ };

struct nlr_config {
	int port, family, threads, vlen, peer_port, rcvbuf;
	enum nlr_call call;
	bool epoll, peek, fionread, poll, defer_accept;
	long trunc_to; /* 0: whole datagrams; else a buffer this long and MSG_TRUNC */
	long work_us, delay_ms, expect, rounds, per_round, conns, requests, idle_ms, max_reads;
	int held_threads; /* udp: the first ones are named NLR_HELD_COMM */
	const char *bind, *peer, *log, *ready_file;
	const char *go_file; /* no thread reads before it exists */
};

/* The name of a thread --held-threads gives: a test BPF program holds its
 * reads (tests/bpf/hold_read.bpf.c). */
#define NLR_HELD_COMM "nlr-held"

/* One receive call's datagram (or TCP read), kept in memory until the end. */
struct nlr_read {
	uint64_t before, after;
	uint32_t len;
	int32_t id;
	uint16_t peer_port;
};

/* A reading thread. Each counts on its own cache lines: a shared counter
 * would make 16 readers contend on one line and change what is measured. */
struct nlr_worker {
	_Alignas(64) atomic_ullong count, last_ns;
	unsigned long long bytes, unlogged;
	struct nlr_read *reads;
	size_t nreads;
	long tid;
	int index, fd, epfd;
	char pad[64];
};

extern struct nlr_config cfg;
/* workers[0..cfg.threads-1] read; workers[NLR_MAX_THREADS] is the TCP
 * accept thread, which reads nothing. */
extern struct nlr_worker workers[NLR_MAX_THREADS + 1];
extern atomic_int nlr_stop;
extern atomic_int nlr_go; /* --go-file exists (or none was given) */

void nlr_log_read(struct nlr_worker *w, long len, int peer_port, int64_t id, uint64_t before, uint64_t after);
/* A socket of cfg's family bound to cfg.bind:cfg.port (listening for TCP). */
int nlr_bound_socket(int type);
int nlr_epoll_with_stop(int stop_fd);
/* Polls until `expect` reads (if >= 0), *done, idle or a signal; says which. */
const char *nlr_wait_until_done(long expect, atomic_int *done);
void nlr_ready(void);
void nlr_wait_go(void);

const char *nlr_run_udp(void);
const char *nlr_run_udp_churn(void);
const char *nlr_run_tcp_conns(void);
const char *nlr_run_tcp_rpc(void);

#endif
