// SPDX-License-Identifier: GPL-2.0-only
/* nlsenders' crafted datagrams: good ones, each followed by one the kernel
 * drops (a bad checksum, a length that lies) or trims, written whole as
 * frames with AF_PACKET on the sender's end of the veth. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nlsenders.h"

enum odd_kind { BAD_SUM_LONG, BAD_SUM_SHORT, UDP_LEN_LONG, IP_LEN_LONG, UDP_LEN_SHORT, ODD_KINDS };

/* The Internet checksum's running sum over `len` bytes. */
static uint32_t sum16(const unsigned char *p, size_t len, uint32_t sum)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

/*
 * One IPv4/UDP packet in `pkt`: `payload` bytes of message (id, its own
 * length in the header), `trailer` bytes after the UDP datagram inside the IP
 * payload, the UDP and IP length fields as given (0: the true ones), the
 * UDP checksum right or off by one. Returns the bytes to put on the wire.
 */
static size_t build(unsigned char *pkt, struct in_addr src, struct in_addr dst, int sport, uint32_t id,
		    long payload, long trailer, long udp_len, long ip_len, int bad_sum)
{
	const long udp_true = 8 + payload, ip_true = 20 + udp_true + trailer;
	unsigned char *ip = pkt, *udp = pkt + 20, *data = pkt + 28;
	memset(pkt, 0, 28);
	nl_put_header((char *)data, NL_MAGIC, id, (uint32_t)payload);
	memset(data + NL_HDR_LEN, 'r', (size_t)(payload - NL_HDR_LEN + trailer));
	ip[0] = 0x45;
	put16(ip + 2, (uint32_t)(ip_len ? ip_len : ip_true));
	put16(ip + 4, id & 0xffff);
	ip[6] = 0x40; /* don't fragment */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	put16(ip + 10, fold(sum16(ip, 20, 0)));
	put16(udp, (uint32_t)sport);
	put16(udp + 2, (uint32_t)scfg.port);
	put16(udp + 4, (uint32_t)(udp_len ? udp_len : udp_true));
	/* The checksum covers the datagram as its UDP length says, with the
	 * pseudo-header; a lying length gets the sum of what the kernel will
	 * check, so that the length is the only fault. */
	long covered = udp_len && udp_len < udp_true + trailer ? udp_len : udp_true;
	uint32_t sum = sum16(ip + 12, 8, 0) + IPPROTO_UDP + (uint32_t)covered;
	uint16_t csum = fold(sum16(udp, (size_t)covered, sum));
	if (csum == 0)
		csum = 0xffff;
	if (bad_sum)
		csum = (uint16_t)(csum == 0x1234 ? 0x4321 : 0x1234);
	put16(udp + 6, csum);
	return (size_t)ip_true;
}

int nls_run_udp_raw(void)
{
	struct in_addr src, dst;
	unsigned char mac[6];
	if (inet_pton(AF_INET, scfg.to, &dst) != 1 || inet_pton(AF_INET, scfg.from, &src) != 1 ||
	    sscanf(scfg.mac, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4],
		   &mac[5]) != 6 ||
	    !*scfg.dev || (!scfg.equal && scfg.base_len + 2 * scfg.bursts > 1400) ||
	    (scfg.equal && (scfg.len < NL_HDR_LEN || scfg.len > 1400 || scfg.sport_base + 2 * scfg.bursts > 65535)))
		nl_usage("nlsenders", "udp-raw: --to and --from IPv4 addresses, --dev IF, --mac xx:xx:xx:xx:xx:xx, "
				      "base-len + 2 * bursts <= 1400 (equal: len <= 1400, sport-base + 2 * bursts <= 65535)");
	/* With a tag, the frame's type is 802.1Q and the packet follows the tag
	 * (priority 0, the VID) and the inner type. */
	const int tagged = scfg.vlan >= 0;
	const uint16_t type = tagged ? ETH_P_8021Q : ETH_P_IP;
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(type));
	if (fd < 0)
		nl_die("socket(AF_PACKET)");
	struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(type), .sll_halen = 6};
	ll.sll_ifindex = (int)if_nametoindex(scfg.dev);
	if (!ll.sll_ifindex)
		nl_die(scfg.dev);
	memcpy(ll.sll_addr, mac, 6);
	nls_log_init(2 * scfg.bursts);
	static unsigned char frame[2048];
	unsigned char *pkt = frame + (tagged ? 4 : 0);
	put16(frame, (uint32_t)(tagged ? scfg.vlan & 0xfff : 0));
	put16(frame + 2, ETH_P_IP);
	int ok = 1;
	for (long i = 0; i < scfg.bursts && ok; i++) {
		/* The gap after every burst_size-th pair: the pairs of a burst go
		 * back to back. */
		const useconds_t gap = (i + 1) % scfg.burst_size ? 0 : (useconds_t)scfg.gap_us;
		long good = scfg.equal ? scfg.len : scfg.base_len + i;
		long odd = scfg.equal ? scfg.len : scfg.base_len + scfg.bursts + i;
		int sport = scfg.sport_base + (scfg.equal ? (int)i : 0);
		size_t n = build(pkt, src, dst, sport, (uint32_t)i, good, 0, 0, 0, 0) + (tagged ? 4 : 0);
		uint64_t ns = nl_mono_ns();
		ok = sendto(fd, frame, n, 0, (struct sockaddr *)&ll, sizeof(ll)) == (long)n;
		nls_log_sent((uint32_t)i, (uint32_t)good, sport, ns);
		if (gap)
			usleep(gap);
		if (tagged)
			continue;
		uint32_t id = (uint32_t)(scfg.bursts + i);
		sport = scfg.sport_base + (scfg.equal ? (int)id : 0);
		const size_t nkinds = strlen(scfg.odd_kinds);
		int kind = nkinds ? scfg.odd_kinds[i % (long)nkinds] - '0' : -1;
		if (i % ODD_KINDS == UDP_LEN_SHORT)
			kind = UDP_LEN_SHORT;
		switch ((enum odd_kind)kind) {
		case BAD_SUM_LONG: n = build(pkt, src, dst, sport, id, odd, 0, 0, 0, 1); break;
		/* 40 bytes of UDP: the kernel sums packets this short on arrival. */
		case BAD_SUM_SHORT: n = build(pkt, src, dst, sport, id, 32, 0, 0, 0, 1); break;
		case UDP_LEN_LONG: n = build(pkt, src, dst, sport, id, odd, 0, 8 + odd + 100, 0, 0); break;
		case IP_LEN_LONG: n = build(pkt, src, dst, sport, id, odd, 0, 0, 28 + odd + 100, 0); break;
		case UDP_LEN_SHORT: n = build(pkt, src, dst, sport, id, odd, 24, 0, 0, 0); break;
		default: continue;
		}
		/* The IP length that lies is longer than the frame it is in. */
		ns = nl_mono_ns();
		ok = ok && sendto(fd, pkt, n, 0, (struct sockaddr *)&ll, sizeof(ll)) == (long)n;
		if (i % ODD_KINDS == UDP_LEN_SHORT)
			nls_log_sent(id, (uint32_t)odd, sport, ns);
		if (gap)
			usleep(gap);
	}
	close(fd);
	return ok;
}
