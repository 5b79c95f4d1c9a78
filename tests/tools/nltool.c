// SPDX-License-Identifier: GPL-2.0-only
#define _GNU_SOURCE
#include "nltool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void put_le32(char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (char)(v >> (8 * i));
}

static uint32_t get_le32(const char *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)(unsigned char)p[i] << (8 * i);
	return v;
}

void nl_put_header(char *buf, uint32_t magic, uint32_t id, uint32_t len)
{
	put_le32(buf, magic);
	put_le32(buf + 4, id);
	put_le32(buf + 8, len);
}

int64_t nl_header_id(const char *buf, long n, uint32_t magic)
{
	if (n < NL_HDR_LEN || get_le32(buf) != magic)
		return -1;
	return get_le32(buf + 4);
}

int64_t nl_message_id(const char *buf, long n)
{
	return nl_header_id(buf, n, NL_MAGIC);
}

long nl_message_len(const char *buf, long n)
{
	if (n < NL_HDR_LEN || get_le32(buf) != NL_MAGIC)
		return -1;
	return get_le32(buf + 8);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nl_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

void nl_clock_offset(int64_t *realtime_minus_mono, uint64_t *bracket)
{
	*bracket = UINT64_MAX;
	for (int i = 0; i < 7; i++) {
		uint64_t a = clock_ns(CLOCK_MONOTONIC);
		uint64_t r = clock_ns(CLOCK_REALTIME);
		uint64_t b = clock_ns(CLOCK_MONOTONIC);
		if (b - a < *bracket) {
			*bracket = b - a;
			*realtime_minus_mono = (int64_t)(r - (a + (b - a) / 2));
		}
	}
}

void nl_spin_us(long us)
{
	uint64_t until = nl_mono_ns() + (uint64_t)us * 1000u;
	while (nl_mono_ns() < until)
		;
}

void nl_die(const char *what)
{
	fprintf(stderr, "nltool: error: %s: %s\n", what, strerror(errno));
	exit(2);
}

void nl_usage(const char *tool, const char *msg)
{
	fprintf(stderr, "%s: usage: %s (see the comment at the top of tests/tools/%s.c)\n", tool, msg, tool);
	exit(64);
}

void nl_enter_netns(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
		nl_die(path);
	close(fd);
}

void nl_raise_nofile(long n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || (long)rl.rlim_cur >= n)
		return;
	rl.rlim_cur = (rlim_t)n;
	if ((long)rl.rlim_max < n)
		rl.rlim_max = (rlim_t)n;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		nl_die("setrlimit(RLIMIT_NOFILE)");
}

void nl_pin_cpu(int index)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(index % (ncpu > 0 ? (int)ncpu : 1), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

long nl_tid(void)
{
	return syscall(SYS_gettid);
}

int nl_family(const char *addr)
{
	return strchr(addr, ':') ? AF_INET6 : AF_INET;
}

socklen_t nl_sockaddr(struct sockaddr_storage *ss, const char *addr, int port, int family_hint)
{
	memset(ss, 0, sizeof(*ss));
	int family = *addr ? nl_family(addr) : family_hint;
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (*addr && inet_pton(AF_INET6, addr, &a->sin6_addr) != 1)
			nl_usage("nltool", "bad IPv6 address");
		return sizeof(*a);
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (*addr && inet_pton(AF_INET, addr, &a->sin_addr) != 1)
		nl_usage("nltool", "bad IPv4 address");
	return sizeof(*a);
}

int nl_sockaddr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return 0;
}

static bool is_known(const char *name, const char *const *known)
{
	for (; *known; known++)
		if (!strcmp(*known, name))
			return true;
	return false;
}

int nl_parse_opts(int argc, char **argv, struct nl_opt *opts, int max, const char *const *known)
{
	int n = 0;
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "--", 2) != 0 || n == max)
			nl_usage("nltool", "options are --name [value]");
		if (!is_known(argv[i] + 2, known)) {
			fprintf(stderr, "nltool: unknown option %s\n", argv[i]);
			exit(64);
		}
		opts[n].name = argv[i] + 2;
		/* A flag has no value: the next word is another option. */
		if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
			opts[n].value = argv[++i];
		else
			opts[n].value = "1";
		n++;
	}
	return n;
}

const char *nl_opt_str(const struct nl_opt *opts, int n, const char *name, const char *dflt)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(opts[i].name, name))
			return opts[i].value;
	return dflt;
}

long nl_opt_long(const struct nl_opt *opts, int n, const char *name, long dflt)
{
	const char *v = nl_opt_str(opts, n, name, NULL);
	if (!v)
		return dflt;
	char *end;
	long x = strtol(v, &end, 10);
	if (*end)
		nl_usage("nltool", "a numeric option has a value that is not a number");
	return x;
}

bool nl_opt_flag(const struct nl_opt *opts, int n, const char *name)
{
	return nl_opt_str(opts, n, name, NULL) != NULL;
}
