// SPDX-License-Identifier: GPL-2.0-only
/*
 * nlsenders: the peers of nlreaders (tests/tools/nlreaders.c). Every datagram
 * and request carries its id (tests/tools/nltool.h). Linked static.
 *
 *   nlsenders udp --to ADDR --port P [--threads T] [--bursts B] [--burst-size S]
 *                 [--lengths distinct|equal] [--len L] [--base-len N]
 *                 [--sport-base Q] [--gap-us G]
 *       T threads, pinned to CPUs 0..T-1, send each burst of S datagrams
 *       together (a barrier starts each burst; no gap inside it), then wait
 *       G us. distinct: datagram i is N+i bytes long (one socket a thread).
 *       equal: all are L bytes and datagram i comes from its own socket bound
 *       to source port Q+i, so (source port) names it.
 *       [--ip-options]: every datagram carries IP options (IPv4: NOP,
 *       record-route, timestamp) or IPv6 extension headers (hop-by-hop and
 *       destination options). [--empty-every E]: before every E-th datagram,
 *       a zero-length one on the same socket (not logged: it has no id).
 *   nlsenders udp-raw --to ADDR --port P --from SRC --dev IF --mac MAC
 *                 [--bursts N] [--base-len L] [--sport-base Q] [--gap-us G]
 *                 [--burst-size S] [--lengths distinct|equal] [--len E]
 *       IPv4 only, crafted frames on IF (AF_PACKET) to MAC: N good datagrams
 *       from SRC:Q, datagram i L+i bytes long (equal: every datagram, good
 *       or odd, E bytes from source port Q+id), the gap after every S-th
 *       (default 1), each followed by an odd one
 *       whose kind cycles: a bad UDP checksum (long, so checked at the read),
 *       a bad checksum on a short one (checked on arrival), a UDP length
 *       beyond the IP payload, an IP total length beyond the frame (both
 *       dropped on arrival), and a UDP length short of the IP payload (the
 *       kernel trims the trailing bytes and delivers it: logged, id N+i, of
 *       the UDP length). The dropped ones are never logged. [--odd-kinds
 *       DIGITS]: only these kinds, in this order (0..4 as listed; default
 *       01234); the trimmed ones are still every 5th. [--vlan VID]:
 *       instead, only the good datagrams, each in a frame with an 802.1Q tag
 *       (VID 0: priority-tagged, which a receiver with no VLAN device takes).
 *   nlsenders udp-churn --to ADDR --port P --listen-port Q --rounds R
 *                 --per-round K [--base-len N] [--len-span M]
 *       R times: wait for the reader's ready datagram at port Q, then send K
 *       datagrams (datagram i is N + i % M bytes long).
 *   nlsenders udp-flood --to ADDR --port P --duration-ms D [--threads T]
 *                 [--base-len N] [--len-span M] [--max-sends X]
 *       T threads, pinned to CPUs 0..T-1, each with its own socket, send
 *       back to back for D ms (at most X datagrams in all); datagram i is
 *       N + i % M bytes long. A send the kernel refuses (the interface
 *       deleted under it) is not logged, only counted ("refused=" on stdout),
 *       and its thread pauses 1 ms. Exit 0.
 *   nlsenders tcp-conns --to ADDR --port P --conns N [--requests R]
 *                 [--size S] [--gap-ms G]
 *       Opens N connections (all held open), then R times writes one S-byte
 *       request on each in turn, G ms between rounds; then closes its write
 *       side and waits until the server has closed every connection.
 *   nlsenders tcp-rpc --to ADDR --port P --requests N [--base-len N]
 *                 [--len-span M]
 *       One connection per request: connect, write it, read the reply, close.
 *
 * Every mode: [--netns NS] [--log FILE] [--go-file F --go-after N]. F is
 * made once N sends are logged: an nlreaders held by --go-file F then reads
 * only what has been sent by then, whatever the machine's speed. The log,
 * written at the end:
 *   S ID LEN SOURCE_PORT CPU SEND_NS   (CLOCK_MONOTONIC just before the send)
 * Exit 0 when everything was sent (and answered), 1 otherwise.
 */
#define _GNU_SOURCE
#include "nlsenders.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nls_config scfg;
static struct nls_sent *sent_log;
static atomic_long sent_count;

static const char *const known_opts[] = {
	"to", "port", "threads", "bursts", "burst-size", "lengths", "len", "base-len", "sport-base", "gap-us",
	"listen-port", "rounds", "per-round", "len-span", "conns", "requests", "size", "gap-ms", "netns", "log",
	"duration-ms", "max-sends", "ip-options", "empty-every", "from", "dev", "mac", "vlan", "odd-kinds", "go-file", "go-after", NULL};

static void configure(int argc, char **argv)
{
	struct nl_opt o[48];
	int n = nl_parse_opts(argc, argv, o, 48, known_opts);
	scfg.to = nl_opt_str(o, n, "to", "");
	scfg.port = (int)nl_opt_long(o, n, "port", 0);
	scfg.threads = (int)nl_opt_long(o, n, "threads", 2);
	scfg.bursts = nl_opt_long(o, n, "bursts", 1);
	scfg.burst_size = nl_opt_long(o, n, "burst-size", 1);
	scfg.equal = !strcmp(nl_opt_str(o, n, "lengths", "distinct"), "equal");
	scfg.len = nl_opt_long(o, n, "len", 200);
	scfg.base_len = nl_opt_long(o, n, "base-len", 16);
	scfg.len_span = nl_opt_long(o, n, "len-span", 1400);
	scfg.sport_base = (int)nl_opt_long(o, n, "sport-base", 20000);
	scfg.gap_us = nl_opt_long(o, n, "gap-us", 2000);
	scfg.listen_port = (int)nl_opt_long(o, n, "listen-port", 0);
	scfg.rounds = nl_opt_long(o, n, "rounds", 1);
	scfg.per_round = nl_opt_long(o, n, "per-round", 1);
	scfg.conns = nl_opt_long(o, n, "conns", 1);
	scfg.requests = nl_opt_long(o, n, "requests", 1);
	scfg.size = nl_opt_long(o, n, "size", 100);
	scfg.gap_ms = nl_opt_long(o, n, "gap-ms", 10);
	scfg.log = nl_opt_str(o, n, "log", NULL);
	scfg.duration_ms = nl_opt_long(o, n, "duration-ms", 1000);
	scfg.max_sends = nl_opt_long(o, n, "max-sends", 4000000);
	scfg.ip_options = nl_opt_flag(o, n, "ip-options");
	scfg.empty_every = nl_opt_long(o, n, "empty-every", 0);
	scfg.from = nl_opt_str(o, n, "from", "");
	scfg.dev = nl_opt_str(o, n, "dev", "");
	scfg.mac = nl_opt_str(o, n, "mac", "");
	scfg.vlan = nl_opt_long(o, n, "vlan", -1);
	scfg.odd_kinds = nl_opt_str(o, n, "odd-kinds", "01234");
	scfg.go_file = nl_opt_str(o, n, "go-file", NULL);
	scfg.go_after = nl_opt_long(o, n, "go-after", 0);
	if (!*scfg.to || scfg.port <= 0 || scfg.port > 65535 || scfg.threads < 1 || scfg.threads > 64 ||
	    scfg.base_len < NL_HDR_LEN || scfg.len < NL_HDR_LEN || scfg.size < NL_HDR_LEN || scfg.len_span < 1 || scfg.empty_every < 0 ||
	    (scfg.go_file && scfg.go_after < 1))
		nl_usage("nlsenders", "--to ADDR --port 1..65535, --threads 1..64, lengths >= 12, --go-after >= 1");
	const char *ns = nl_opt_str(o, n, "netns", NULL);
	if (ns)
		nl_enter_netns(ns);
}

void nls_log_init(long capacity)
{
	sent_log = calloc((size_t)(capacity > 0 ? capacity : 1), sizeof(*sent_log));
	if (!sent_log)
		nl_die("calloc");
	scfg.log_capacity = capacity;
}

static void make_go_file(void)
{
	FILE *f = fopen(scfg.go_file, "w");
	if (!f || fclose(f) != 0)
		nl_die(scfg.go_file);
}

void nls_log_sent(uint32_t id, uint32_t len, int sport, uint64_t ns)
{
	long i = atomic_fetch_add(&sent_count, 1);
	if (i < scfg.log_capacity)
		sent_log[i] = (struct nls_sent){ns, id, len, (uint16_t)sport, (uint16_t)sched_getcpu()};
	if (scfg.go_file && i + 1 == scfg.go_after)
		make_go_file();
}

int nls_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	return getsockname(fd, (struct sockaddr *)&ss, &len) == 0 ? nl_sockaddr_port(&ss) : 0;
}

char *nls_message(long len, uint32_t id)
{
	static _Thread_local char buf[65536];
	memset(buf + NL_HDR_LEN, 'p', (size_t)len - NL_HDR_LEN);
	nl_put_header(buf, NL_MAGIC, id, (uint32_t)len);
	return buf;
}

static void write_log(void)
{
	FILE *f = fopen(scfg.log, "w");
	if (!f)
		nl_die(scfg.log);
	long n = atomic_load(&sent_count);
	for (long i = 0; i < n && i < scfg.log_capacity; i++)
		fprintf(f, "S %u %u %u %u %llu\n", sent_log[i].id, sent_log[i].len, sent_log[i].sport,
			sent_log[i].cpu, (unsigned long long)sent_log[i].ns);
	if (fclose(f) != 0)
		nl_die(scfg.log);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		nl_usage("nlsenders", "nlsenders udp|udp-flood|udp-churn|udp-raw|tcp-conns|tcp-rpc --to ADDR --port P ...");
	const char *mode = argv[1];
	configure(argc - 2, argv + 2);
	signal(SIGPIPE, SIG_IGN);
	int ok;
	if (!strcmp(mode, "udp"))
		ok = nls_run_udp();
	else if (!strcmp(mode, "udp-flood"))
		ok = nls_run_udp_flood();
	else if (!strcmp(mode, "udp-churn"))
		ok = nls_run_udp_churn();
	else if (!strcmp(mode, "udp-raw"))
		ok = nls_run_udp_raw();
	else if (!strcmp(mode, "tcp-conns"))
		ok = nls_run_tcp_conns();
	else if (!strcmp(mode, "tcp-rpc"))
		ok = nls_run_tcp_rpc();
	else
		nl_usage("nlsenders", "mode is udp, udp-flood, udp-churn, udp-raw, tcp-conns or tcp-rpc");
	if (scfg.go_file && atomic_load(&sent_count) < scfg.go_after) {
		fprintf(stderr, "nlsenders: only %ld sends, fewer than --go-after\n", atomic_load(&sent_count));
		make_go_file(); /* the held reader reads what there is */
		ok = 0;
	}
	if (scfg.log)
		write_log();
	printf("nlsenders: result sent=%ld ok=%d\n", atomic_load(&sent_count), ok);
	return ok ? 0 : 1;
}
