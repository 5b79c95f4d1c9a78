/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: UDP where the kernel names each read's datagram
 * (fentry/skb_consume_udp, docs/JOIN.md): the read takes the datagram's stash
 * entry, and its return writes the record. No socket state, no lock. */
#ifndef NETLATD_UDP_NAMED_READ_BPF_H
#define NETLATD_UDP_NAMED_READ_BPF_H

/* fentry/skb_consume_udp: the datagram this UDP receive call dequeued. Its
 * stash entry is taken now, before the kernel frees the skb: the next skb at
 * its address may be another datagram's, received and queued before this call
 * returns, and the address names this one only until then. */
static __always_inline int on_udp_consume(struct sock *sk, struct sk_buff *skb, int len)
{
	/* A peek: udp_recvmsg passes minus what it copied, and the datagram
	 * stays queued for the read that follows (dnsmasq peeks before each
	 * read). Taken for a read, it cost the read that followed its
	 * datagram: every datagram of such a reader was lost. A peek of an
	 * empty datagram passes 0: the peek's own reference on the skb (the
	 * queue holds one more) tells it from a read, which holds the only
	 * one. (A read while another thread's peek holds a reference is taken
	 * for a peek: its entry stays, and expires unread, counted.) */
	if (len < 0 || !port_watched(sk->__sk_common.skc_num))
		return 0;
	if (len == 0 && skb->users.refs.counter > 1)
		return 0;
	struct reader_state *rs = current_reader(true);
	if (!rs)
		return 0;
	forget_consumed(rs);
	rs->consumed_sk = (__u64)sk;
	__u64 key = (__u64)skb;
	int way = stash_way(key);
	if (way < 0)
		return 0; /* not tracked: an untracked read at the return */
	/* Read, then claimed: an entry taken for another packet meanwhile (its
	 * set's older one evicted) fails the claim. */
	struct netlatd_stash_set *set = stash_set_of(key);
	__builtin_memcpy(&rs->named_rx, &set->rx[STASH_WAY(way)], sizeof(rs->named_rx));
	__u64 queued = set->queued_ns[STASH_WAY(way)];
	if (!stash_claim(key, way))
		return 0;
	rs->named_queue_after = queued ? before(queued, rs->named_rx.receive_ns) : 0;
	rs->named = 1;
	return 0;
}

/* Where the kernel names each read's datagram (fentry/skb_consume_udp): the
 * stamps the consume took from the stash are this read's. No socket state and
 * no lock: the skb is the datagram's name. */
static __always_inline void on_udp_named_read(struct sock *sk, const struct read_view *v, struct reader_state *rs)
{
	/* Nothing consumed here: the call began before netlatd attached. */
	if (!rs || rs->consumed_sk != (__u64)sk)
		return;
	rs->consumed_sk = 0;
	if (!rs->named) {
		COUNT(counters, NETLATD_CNT_UNTRACKED_READS);
		return;
	}
	rs->named = 0;
	emit_record(&rs->named_rx, rs->named_queue_after, true, v, NETLATD_READER_KNOWN);
}

#endif /* NETLATD_UDP_NAMED_READ_BPF_H */
