/* SPDX-License-Identifier: GPL-2.0-only */
/* nlsenders' modes (nlsenders_udp.c, nlsenders_tcp.c) and what they share
 * with its main (nlsenders.c). */
#ifndef NLSENDERS_H
#define NLSENDERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "nltool.h"

struct nls_config {
	const char *to, *log, *from, *dev, *mac, *odd_kinds, *go_file;
	int port, threads, sport_base, listen_port;
	bool equal, ip_options;
	long empty_every, vlan;
	long bursts, burst_size, len, base_len, len_span, gap_us, rounds, per_round, conns, requests, size, gap_ms;
	long log_capacity;
	long duration_ms, max_sends, go_after;
};

struct nls_sent {
	uint64_t ns;
	uint32_t id, len;
	uint16_t sport, cpu;
};

extern struct nls_config scfg;

/* Room for `capacity` sends in the log; then one entry per send. */
void nls_log_init(long capacity);
void nls_log_sent(uint32_t id, uint32_t len, int sport, uint64_t ns);
int nls_local_port(int fd);
/* A message of `len` bytes with its header; this thread's buffer. */
char *nls_message(long len, uint32_t id);

int nls_run_udp(void);
int nls_run_udp_flood(void);
int nls_run_udp_churn(void);
int nls_run_udp_raw(void);
int nls_run_tcp_conns(void);
int nls_run_tcp_rpc(void);

#endif
