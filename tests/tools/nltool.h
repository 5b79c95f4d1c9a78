/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What nlreaders (the receiving applications) and nlsenders (their peers)
 * share: the payload every datagram and request starts with, the clock both
 * log, and small socket and process helpers. Both are linked static, so they
 * also run inside the vm tier's guests, where there is no libc to load.
 */
#ifndef NLTOOL_H
#define NLTOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * Every datagram and every TCP request begins with this header, so that the
 * receiving side knows which one a call returned even when the call (recv,
 * read) does not give the source address. `len` is the whole message.
 */
#define NL_MAGIC 0x4e4c5244u /* "NLRD" */
#define NL_HDR_LEN 12
/* The UDP churn reader's "socket bound, send the next round" datagram. */
#define NL_READY_MAGIC 0x4e4c5259u /* "NLRY" */

void nl_put_header(char *buf, uint32_t magic, uint32_t id, uint32_t len);
/* The id of a message that starts at buf, or -1 if it carries no header. */
int64_t nl_message_id(const char *buf, long n);
/* The same for a header with another magic (NL_READY_MAGIC). */
int64_t nl_header_id(const char *buf, long n, uint32_t magic);
/* The whole message's length from its header, or -1. */
long nl_message_len(const char *buf, long n);

/* CLOCK_MONOTONIC, the clock of netlatd's kernel stamps. */
uint64_t nl_mono_ns(void);
/*
 * CLOCK_REALTIME - CLOCK_MONOTONIC by the tightest of a few brackets, so a
 * checker can put wall-clock stamps back on the monotonic clock; the
 * bracket's width is the uncertainty.
 */
void nl_clock_offset(int64_t *realtime_minus_mono, uint64_t *bracket);

/* Busy for `us` microseconds: the application's own work, on CPU. */
void nl_spin_us(long us);

_Noreturn void nl_die(const char *what);
_Noreturn void nl_usage(const char *tool, const char *msg);

/* Joins the network namespace /run/netns/NAME (the whole process: call it
 * before any thread is made). */
void nl_enter_netns(const char *name);
/* Raises RLIMIT_NOFILE to at least n (root may raise the hard limit). */
void nl_raise_nofile(long n);
void nl_pin_cpu(int index);
long nl_tid(void);

/* addr is IPv4 or IPv6 text ("" = any IPv4); family is taken from it. */
socklen_t nl_sockaddr(struct sockaddr_storage *ss, const char *addr, int port, int family_hint);
int nl_sockaddr_port(const struct sockaddr_storage *ss);
int nl_family(const char *addr);

/* Options: "--name value" pairs, or "--name" alone for a flag; a name not
 * in `known` (NULL-terminated) is a usage error, not a silent default. */
struct nl_opt {
	const char *name;
	const char *value;
};
int nl_parse_opts(int argc, char **argv, struct nl_opt *opts, int max, const char *const *known);
const char *nl_opt_str(const struct nl_opt *opts, int n, const char *name, const char *dflt);
long nl_opt_long(const struct nl_opt *opts, int n, const char *name, long dflt);
bool nl_opt_flag(const struct nl_opt *opts, int n, const char *name);

#endif
