/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: netif_receive_skb, the filter. A packet of a watched
 * device (a traced interface or a device below one, in its namespace, with
 * its VLAN tag: the `watch` map) and port gets its first stamps here, with the NIC IRQ
 * and softirq stamps of this CPU's NET_RX run: a UDP datagram in the stash
 * (keyed by skb address, until its socket's data-ready call moves it), a TCP
 * segment in tcp_segs (keyed by flow and sequence, until read). */
#ifndef NETLATD_FILTER_BPF_H
#define NETLATD_FILTER_BPF_H

/* ---- the stash: UDP datagrams between netif_receive_skb and their socket ---- */

/* The first of the two entries (a set) where `skb` may be: two-way, so two
 * packets in flight at once that map alike both keep an entry. skb heads are
 * 256-byte slab objects, and a host's receive path recycles a few dozen of
 * them: the set is the address's object number, so that neighbours in a slab
 * page are neighbours here, and the few entries in use share a few pages and
 * lines. A hash of the address spread them over the whole table: a cache and
 * TLB miss on most packets, the costliest load of netif_receive_skb. */
static __always_inline __u32 stash_set(__u64 skb)
{
	return (ptr_low32(skb) >> 7) & ~1U;
}

static __always_inline struct netlatd_stash_entry *stash_at(__u32 idx)
{
	return &stash[idx & ((1 << NETLATD_STASH_BITS) - 1)];
}

/* The entry of `skb`, if it is there. No helper calls: usable under a lock. */
static __always_inline struct netlatd_stash_entry *stash_find(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *e = stash_at(idx);
	if (e->skb == skb)
		return e;
	e = stash_at(idx | 1);
	return e->skb == skb ? e : NULL;
}

/* Marks an entry of the set of `skb` busy for the caller: the one an earlier
 * packet at this address still holds (never queued nor seen dropped: it is
 * lost), else a free one; when neither is free, the one whose packet came
 * first (most likely one that never reached a socket). Taking an entry that
 * held a packet counts that packet as unjoined. NULL if both are being written
 * by other CPUs this instant. */
static __always_inline struct netlatd_stash_entry *stash_take(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *a = stash_at(idx), *b = stash_at(idx | 1);
	struct netlatd_stash_entry *same = a->skb == skb ? a : b->skb == skb ? b : NULL;
	if (same && __sync_val_compare_and_swap(&same->skb, skb, NETLATD_STASH_BUSY) == skb) {
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return same;
	}
	if (a->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&a->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return a;
	if (b->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&b->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return b;
	struct netlatd_stash_entry *victim = a->rx.receive_ns <= b->rx.receive_ns ? a : b;
	__u64 old = __sync_lock_test_and_set(&victim->skb, NETLATD_STASH_BUSY);
	if (old == NETLATD_STASH_BUSY)
		return NULL; /* another CPU is filling it right now; it keeps it */
	if (old != NETLATD_STASH_FREE)
		COUNT(drops, NETLATD_DROP_UNJOINED);
	return victim;
}

/* Takes the entry for the caller: exactly one of several CPUs racing for one
 * packet wins. Read the entry before claiming it: a writer marks it busy
 * before changing it, which makes a later claim fail. */
static __always_inline bool stash_claim(struct netlatd_stash_entry *e, __u64 skb)
{
	return __sync_val_compare_and_swap(&e->skb, skb, NETLATD_STASH_FREE) == skb;
}

/* ---- netif_receive_skb ------------------------------------------------------------ */

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

/* Parses the network and transport headers (one read covers both in the common
 * cases: IPv4 without options, IPv6 without extension headers). */
static __always_inline bool parse_headers(unsigned char *data, __u16 proto, struct parsed *p)
{
	__u32 l3len, l4off;
	__u8 hdr[40 + sizeof(struct l4_ports_seq)];

	p->flags = 0;
	/* A VLAN tag still in the frame was stepped over by the caller
	 * (on_netif_receive_skb), which needs its id to find the device. */
	if (proto == ETH_P_IP) {
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
		l4off = (hdr[0] & 0xf) * 4;
		l3len = (__u32)((__u16)hdr[2] << 8 | hdr[3]);
		if (l4off == 20)
			__builtin_memcpy(&p->l4, hdr + 20, sizeof(p->l4));
		else if (bpf_probe_read_kernel(&p->l4, sizeof(p->l4), data + (l4off & 0x3f)))
			return false;
		__builtin_memcpy(&p->saddr, hdr + 12, 4);
		__builtin_memcpy(&p->daddr, hdr + 16, 4);
	} else if (proto == ETH_P_IPV6) {
		if (bpf_probe_read_kernel(hdr, sizeof(hdr), data))
			return false;
		p->l4proto = hdr[6];
		l4off = 40;
		l3len = 40 + (__u32)((__u16)hdr[4] << 8 | hdr[5]);
		p->flags |= NETLATD_PKT_IPV6;
		__builtin_memcpy(&p->l4, hdr + 40, sizeof(p->l4));
		/* Hop-by-hop, routing and destination options headers (up to
		 * four) are stepped over; a fragment header is not (its packet
		 * is left out, like IPv4's fragments), nor anything else. */
		for (int i = 0; i < 4; i++) {
			if (p->l4proto != 0 && p->l4proto != 43 && p->l4proto != 60)
				break;
			__u8 ext[2];
			if (l4off > 0x7ff || bpf_probe_read_kernel(ext, sizeof(ext), data + (l4off & 0x7ff)))
				return false;
			p->l4proto = ext[0];
			l4off += ((__u32)ext[1] + 1) * 8;
		}
		if (l4off > 0x7ff ||
		    (l4off != 40 && bpf_probe_read_kernel(&p->l4, sizeof(p->l4), data + (l4off & 0x7ff))))
			return false;
		__u32 a[8];
		__builtin_memcpy(a, hdr + 8, sizeof(a));
		p->saddr = fold6(a);
		p->daddr = fold6(a + 4);
	} else {
		return false;
	}
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

/* The NIC IRQ and softirq stamps of this CPU's NET_RX run, for a packet
 * received `now`, and the port's producer note (maps.bpf.h). */
static __always_inline void fill_rx(struct netlatd_rx *rx, const struct parsed *p, __u64 now, int pidx,
				    const struct netlatd_watch *w, const struct cpu_state *cs)
{
	__u16 flags = p->flags;
	rx->irq_before = 0;
	rx->raise_before = 0;
	rx->softirq_before = 0;
	if (cs && p->in_net_rx) {
		/* A run a watched IRQ raised is that NIC's: a packet of a
		 * device with no IRQ lines (lo, veth: queued by netif_rx into
		 * the backlog, maybe after that raise) processed in it has
		 * neither the IRQ nor that raise. Only its softirq stamp. */
		if (w->irq) {
			rx->irq_before = before(now, cs->run_irq_ts);
			rx->raise_before = before(now, cs->run_raise_ts);
		} else if (!cs->run_irq_ts) {
			rx->raise_before = before(now, cs->run_raise_ts);
		}
		rx->softirq_before = before(now, cs->softirq_ts);
		flags |= NETLATD_PKT_IN_SOFTIRQ;
		if (cs->in_ksoftirqd)
			flags |= NETLATD_PKT_KSOFTIRQD;
	}
	rx->receive_ns = now;
	__u32 cpu = bpf_get_smp_processor_id();
	rx->rx_cpu = cpu;
	struct port_producers *pp = &port_prod[pidx & (NETLATD_MAX_PORTS - 1)];
	if (pp->last_cpu != cpu + 1) {
		pp->last_cpu = cpu + 1;
		pp->mixed_until = now + MULTI_PRODUCER_HOLD_NS;
	}
	rx->len = p->payload;
	rx->iface_id = w->iface_id;
	rx->end_seq = p->l4proto == IPPROTO_TCP ? bpf_ntohl(p->l4.seq) + p->payload : 0;
	rx->dport = bpf_ntohs(p->l4.dport);
	rx->sport = bpf_ntohs(p->l4.sport);
	rx->flags = flags;
	rx->l4proto = p->l4proto;
}

static __always_inline void track_udp(struct sk_buff *skb, const struct parsed *p, int pidx,
				      const struct netlatd_watch *w, const struct cpu_state *cs)
{
	__u64 key = (__u64)skb;
	/* Seen below already (a lower device of this interface): once only. */
	if (w->upper && stash_find(key))
		return;
	struct netlatd_stash_entry *e = stash_take(key);
	if (!e) {
		COUNT(drops, NETLATD_DROP_INFLIGHT_FULL);
		return;
	}
	fill_rx(&e->rx, p, bpf_ktime_get_ns(), pidx, w, cs);
	e->queued_ns = 0;
	/* Publish: from here on the enqueue can claim it. */
	__sync_lock_test_and_set(&e->skb, key);
	COUNT(counters, NETLATD_CNT_MATCHED);
}

static __always_inline void track_tcp(const struct parsed *p, int pidx, const struct netlatd_watch *w,
				      const struct cpu_state *cs)
{
	if (!p->payload) /* pure ACK, SYN, FIN: nothing for a reader */
		return;
	struct netlatd_tcp_key k = {.addrs = p->addrs, .sport = p->l4.sport, .dport = p->l4.dport,
				    .seq = bpf_ntohl(p->l4.seq)};
	/* Seen below already (a lower device of this interface), not yet
	 * queued: the same packet on its way up, not a second copy. */
	if (w->upper) {
		struct netlatd_tcp_seg *seen = bpf_map_lookup_elem(&tcp_segs, &k);
		if (seen && !seen->queue_after)
			return;
	}
	struct netlatd_tcp_seg v = {};
	fill_rx(&v.rx, p, bpf_ktime_get_ns(), pidx, w, cs);
	/* A second copy of a segment (a retransmission) while the first is
	 * still tracked: if the first was queued, TCP drops this one; if not,
	 * whichever gets queued, its receive stamps may be the other copy's, so
	 * they are left out of its record. */
	long err = bpf_map_update_elem(&tcp_segs, &k, &v, BPF_NOEXIST);
	if ((int)err == -17 /* EEXIST; zero-extended before 6.4 */) {
		struct netlatd_tcp_seg *old = bpf_map_lookup_elem(&tcp_segs, &k);
		if (old && !old->queue_after && old->dup == NETLATD_TCP_COPY_ONE)
			old->dup = NETLATD_TCP_COPY_RX;
		return;
	}
	if (err) {
		COUNT(drops, NETLATD_DROP_TCP_SEGS_FULL);
		return;
	}
	COUNT(counters, NETLATD_CNT_MATCHED);
}

/* The VLAN id of a tag the device took off in hardware (skb->vlan_tci), 0
 * when there is none. */
static __always_inline __u16 skb_vlan_id(struct sk_buff *skb)
{
	if (bpf_core_field_exists(skb->vlan_all)) {
		if (!skb->vlan_all)
			return 0;
	} else if (!BPF_CORE_READ_BITFIELD_PROBED((struct sk_buff___vlan_present *)skb, vlan_present)) {
		return 0;
	}
	return skb->vlan_tci & VLAN_VID_MASK_NR;
}

/* --sample N, for a TCP flow: its draw is a hash of its addresses and ports
 * as the TCP key holds them, the same for each segment and for a read. */
static __always_inline bool flow_sampled_out(__u64 addrs, __u16 sport, __u16 dport)
{
	__u64 flow = addrs ^ ((__u64)sport << 16 | dport);
	return (__u32)((flow * 0x9e3779b97f4a7c15ULL) >> 32) >= targ_sample_below;
}

/* --sample N: whether this matching packet is left out, one in N kept,
 * decided before any per-packet state. A datagram is drawn at random (the
 * kernel's prandom: periodic traffic cannot alias with it); a TCP segment by
 * its flow, so that a flow is kept or left out whole: a read of its bytes
 * walks its segments in sequence, and a hole in them would be a gap. A
 * segment without payload is nothing for a reader, and not counted. */
static __always_inline bool sampled_out(const struct parsed *p)
{
	if (!targ_sample_below)
		return false;
	if (p->l4proto == IPPROTO_UDP) {
		if (bpf_get_prandom_u32() < targ_sample_below)
			return false;
	} else if (!p->payload || !flow_sampled_out(p->addrs, p->l4.sport, p->l4.dport)) {
		return false;
	}
	COUNT(counters, NETLATD_CNT_SAMPLED_OUT);
	return true;
}

/* `pc`: see net_rx_running. */
static __always_inline int on_netif_receive_skb(struct sk_buff *skb, int pc)
{
	ARM(ARMED_RECEIVE_SKB);
	struct net_device *dev = skb->dev;
	if (!dev)
		return 0;
	/* Drivers call eth_type_trans() before this point, so skb->data is the
	 * network header; skb->network_header is not reset yet. */
	unsigned char *data = skb->data;
	__u16 proto = bpf_ntohs(skb->protocol);
	__u16 vlan = skb_vlan_id(skb);
	if (!vlan && proto == ETH_P_8021Q_NR) {
		/* A tag the device left in the frame (no VLAN offload, or a
		 * priority tag, VID 0): the kernel strips it after this point.
		 * An 802.1ad (0x88A8) outer tag is not stepped over: such a
		 * packet is left out rather than taken for the device's own. */
		__be16 tag[2];
		if (bpf_probe_read_kernel(tag, sizeof(tag), data))
			return 0;
		vlan = bpf_ntohs(tag[0]) & VLAN_VID_MASK_NR;
		proto = bpf_ntohs(tag[1]);
		data += sizeof(tag);
	}
	const struct netlatd_watch *w = watched(dev, vlan);
	if (!w)
		return 0;
	struct parsed p;
	if (!parse_headers(data, proto, &p))
		return 0;
	int pidx = port_index(bpf_ntohs(p.l4.dport));
	if (pidx < 0 || sampled_out(&p))
		return 0;
	struct cpu_state *cs = this_cpu();
	p.in_net_rx = cs && net_rx_running(cs, pc);
	if (p.l4proto == IPPROTO_UDP)
		track_udp(skb, &p, pidx, w, cs);
	else
		track_tcp(&p, pidx, w, cs);
	return 0;
}

#endif /* NETLATD_FILTER_BPF_H */
