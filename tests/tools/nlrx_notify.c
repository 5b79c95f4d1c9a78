// SPDX-License-Identifier: GPL-2.0-only
/* nlrx's --notify-wait: the service manager's notify socket for one daemon,
 * waiting for its READY=1. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nlrx.h"

int notify_wait(const char *path, long timeout_ms)
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
