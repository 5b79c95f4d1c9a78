/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the network and transport headers of a packet at
 * netif_receive_skb, and the flow address part of a TCP segment's key. */
#ifndef NETLATD_FILTER_PARSE_BPF_H
#define NETLATD_FILTER_PARSE_BPF_H

struct l4_ports_seq {
	__be16 sport;
	__be16 dport;
	__be32 seq;      /* TCP only */
	__be32 ack_seq;  /* TCP only */
	__u8 doff_res;   /* TCP only: data offset in the upper nibble */
	__u8 flags;
};

/* What the headers say. */
struct parsed {
	struct l4_ports_seq l4;
	__u32 payload;
	__u32 saddr, daddr;  /* IPv6: folded to 32 bits, see tcp_key_addrs() */
	__u64 addrs;         /* the TCP key's address part */
	__u16 flags;
	__u8 l4proto;
	__u8 in_net_rx;      /* received inside a NET_RX run (net_rx_running) */
};

/* IPv6 addresses folded for the TCP key: a multiplicative mix of each
 * address's four words, so that two flows differing in any word differ in it. */
static __always_inline __u32 fold6(const __u32 a[4])
{
	__u32 h = a[0] * 0x9E3779B1U;
	h = (h ^ a[1]) * 0x85EBCA77U;
	h = (h ^ a[2]) * 0xC2B2AE3DU;
	return h ^ a[3];
}

static __always_inline __u64 tcp_key_addrs(__u32 saddr, __u32 daddr) { return (__u64)saddr << 32 | daddr; }

/* The bytes one read takes at the network header: an IPv6 header and the
 * transport header's first bytes (an IPv4 one without options and them). */
#define PARSE_HDR_LEN (40 + sizeof(struct l4_ports_seq))

/* IPv4: the protocol, the addresses, where the transport header starts and
 * where the datagram ends (`l3len`), into `p`; false for a fragment. */
static __always_inline bool parse_ipv4(unsigned char *data, __u8 *hdr, struct parsed *p, __u32 *l3len, __u32 *l4off)
{
	if (bpf_probe_read_kernel(hdr, 20 + sizeof(p->l4), data))
		return false;
	/* Any fragment (an offset, or more fragments to come): the
	 * datagram is reassembled after this hook, into an skb this hook
	 * never sees, and a first fragment's length is not the
	 * datagram's. Left out, like IPv6's fragments; its read is
	 * counted among those no record names. */
	if (((__u16)hdr[6] << 8 | hdr[7]) & 0x3fff)
		return false;
	p->l4proto = hdr[9];
	*l4off = (hdr[0] & 0xf) * 4;
	*l3len = (__u32)((__u16)hdr[2] << 8 | hdr[3]);
	if (*l4off == 20)
		__builtin_memcpy(&p->l4, hdr + 20, sizeof(p->l4));
	else if (bpf_probe_read_kernel(&p->l4, sizeof(p->l4), data + (*l4off & 0x3f)))
		return false;
	__builtin_memcpy(&p->saddr, hdr + 12, 4);
	__builtin_memcpy(&p->daddr, hdr + 16, 4);
	return true;
}

/* IPv6, with up to four extension headers stepped over, as parse_ipv4. */
static __always_inline bool parse_ipv6(unsigned char *data, __u8 *hdr, struct parsed *p, __u32 *l3len, __u32 *l4off)
{
	if (bpf_probe_read_kernel(hdr, PARSE_HDR_LEN, data))
		return false;
	p->l4proto = hdr[6];
	*l4off = 40;
	*l3len = 40 + (__u32)((__u16)hdr[4] << 8 | hdr[5]);
	p->flags |= NETLATD_PKT_IPV6;
	__builtin_memcpy(&p->l4, hdr + 40, sizeof(p->l4));
	/* Hop-by-hop, routing and destination options headers (up to
	 * four) are stepped over; a fragment header is not (its packet
	 * is left out, like IPv4's fragments), nor anything else. */
	for (int i = 0; i < 4; i++) {
		if (p->l4proto != 0 && p->l4proto != 43 && p->l4proto != 60)
			break;
		__u8 ext[2];
		if (*l4off > 0x7ff || bpf_probe_read_kernel(ext, sizeof(ext), data + (*l4off & 0x7ff)))
			return false;
		p->l4proto = ext[0];
		*l4off += ((__u32)ext[1] + 1) * 8;
	}
	if (*l4off > 0x7ff ||
	    (*l4off != 40 && bpf_probe_read_kernel(&p->l4, sizeof(p->l4), data + (*l4off & 0x7ff))))
		return false;
	__u32 a[8];
	__builtin_memcpy(a, hdr + 8, sizeof(a));
	p->saddr = fold6(a);
	p->daddr = fold6(a + 4);
	return true;
}

/* Parses the network and transport headers (one read covers both in the common
 * cases: IPv4 without options, IPv6 without extension headers). */
static __always_inline bool parse_headers(unsigned char *data, __u16 proto, struct parsed *p)
{
	__u32 l3len, l4off;
	__u8 hdr[PARSE_HDR_LEN];

	p->flags = 0;
	/* A VLAN tag still in the frame was stepped over by the caller
	 * (on_netif_receive_skb), which needs its id to find the device. */
	bool ok;
	if (proto == ETH_P_IP)
		ok = parse_ipv4(data, hdr, p, &l3len, &l4off);
	else if (proto == ETH_P_IPV6)
		ok = parse_ipv6(data, hdr, p, &l3len, &l4off);
	else
		return false;
	if (!ok)
		return false;
	if (p->l4proto == IPPROTO_TCP) {
		__u32 thl = (p->l4.doff_res >> 4) * 4;
		if (l3len < l4off + thl)
			return false;
		p->payload = l3len - l4off - thl;
		p->flags |= NETLATD_PKT_TCP;
	} else if (p->l4proto == IPPROTO_UDP) {
		p->payload = l3len > l4off + 8 ? l3len - l4off - 8 : 0;
		/* UDP's own length, where it is shorter: the kernel trims the
		 * bytes after it and delivers the datagram it says (a longer one
		 * it drops). The second half of the `seq` word is the checksum. */
		__u32 ulen = bpf_ntohl(p->l4.seq) >> 16;
		if (ulen >= 8 && ulen - 8 < p->payload)
			p->payload = ulen - 8;
	} else {
		return false;
	}
	p->addrs = tcp_key_addrs(p->saddr, p->daddr);
	return true;
}

#endif /* NETLATD_FILTER_PARSE_BPF_H */
