// SPDX-License-Identifier: GPL-2.0-only
/* nlrx's traffic from the guest itself (--send, with --bad-every from a raw
 * socket, its UDP headers made here), and --rx-csum-off, which lets a veth's
 * receiver find those bad checksums. */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlrx.h"

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

int rx_csum_off(const char *dev)
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

int send_udp(const char *to, long count, long len, long bad_every)
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
