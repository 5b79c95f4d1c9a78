/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: netif_receive_skb, the filter. A packet of a watched
 * device (a traced interface or a device below one, in its namespace, with
 * its VLAN tag: the `watch` map) and port gets its first stamps here, with the NIC IRQ
 * and softirq stamps of this CPU's NET_RX run: a UDP datagram in the stash
 * (keyed by skb address, until its socket's data-ready call moves it), a TCP
 * segment in tcp_segs (keyed by flow and sequence, until read). */
#ifndef NETLATD_FILTER_FILTER_BPF_H
#define NETLATD_FILTER_FILTER_BPF_H

/* The NIC IRQ and softirq stamps of this CPU's NET_RX run, for a packet
 * received `now`, and the port's producer note (lib/ports.bpf.h). */
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
}

/* A GSO datagram: UDP cuts it into new skbs before any socket queues one, so
 * none of those is the datagram the stash took. Called under READY_SIGNAL
 * only: the data-ready tracepoint is 6.5+, so bpf_core_cast (6.2) is there. */
static __always_inline bool skb_gso(struct sk_buff *skb)
{
	struct skb_shared_info *sh = bpf_core_cast(skb->head + skb->end, struct skb_shared_info);
	return sh->gso_size != 0;
}

static __always_inline void track_udp(struct sk_buff *skb, const struct parsed *p, int pidx,
				      const struct netlatd_watch *w, struct cpu_state *cs)
{
	__u64 key = (__u64)skb;
	/* Seen below already (a lower device of this interface): once only. */
	if (w->upper && stash_has(key))
		return;
	int way = stash_take(key);
	if (way < 0) {
		COUNT_ON(cs, drops, NETLATD_DROP_INFLIGHT_FULL);
		return;
	}
	struct netlatd_stash_set *set = stash_set_of(key);
	__u64 now = bpf_ktime_get_ns();
	fill_rx(&set->rx[STASH_WAY(way)], p, now, pidx, w, cs);
	set->queued_ns[STASH_WAY(way)] = 0;
	/* Publish: from here on the enqueue can claim it. */
	__sync_lock_test_and_set(&set->skb[STASH_WAY(way)], key);
	COUNT_ON(cs, counters, NETLATD_CNT_MATCHED);
	if (READY_SIGNAL && !skb_gso(skb)) {
		cs->ready_skb = key;
		cs->ready_ns = now;
	}
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
		COUNT_ON(cs, drops, NETLATD_DROP_TCP_SEGS_FULL);
		return;
	}
	COUNT_ON(cs, counters, NETLATD_CNT_MATCHED);
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
	/* Every packet, whatever it is: a datagram queued in the chain of one
	 * left out here (an encapsulation's inner one) must not pass for the
	 * last one the stash took (queue.bpf.h call_datagram). Only where that
	 * is used: elsewhere a packet of another port leaves without a lookup. */
	struct cpu_state *cs = NULL;
	if (READY_SIGNAL) {
		cs = this_cpu();
		if (!cs) /* defensive: one element */
			return 0;
		cs->ready_seen++;
		cs->ready_skb = 0;
	}
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
	/* The port before the device: every packet the host receives passes
	 * here, and the device's lookup (a hash of its namespace, index and
	 * VLAN id) cost ~90 ns a packet on this project's host, against ~45
	 * for the headers and the port. A packet of another port, or not IP,
	 * now leaves without it. */
	struct parsed p;
	if (!parse_headers(data, proto, &p))
		return 0;
	int pidx = port_index(bpf_ntohs(p.l4.dport));
	if (pidx < 0)
		return 0;
	if (!cs)
		cs = this_cpu();
	if (!cs) /* defensive: one element */
		return 0;
	const struct netlatd_watch *w = watched_here(cs, dev, vlan);
	if (!w || sampled_out(&p))
		return 0;
	p.in_net_rx = net_rx_running(cs, pc);
	if (p.l4proto == IPPROTO_UDP)
		track_udp(skb, &p, pidx, w, cs);
	else
		track_tcp(&p, pidx, w, cs);
	return 0;
}

#endif /* NETLATD_FILTER_FILTER_BPF_H */
