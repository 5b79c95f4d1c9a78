/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* netlatd kernel side: TCP segments, keyed by flow and first sequence number
 * from netif_receive_skb until read (docs/JOIN.md). tcp_probe stamps their
 * queueing; a read takes the segments whose last byte lies in the byte range
 * it copied, which tcp_rcv_space_adjust gives exactly. */
#ifndef NETLATD_TCP_BPF_H
#define NETLATD_TCP_BPF_H

#define TCP_SEG_QUEUED 1
#define TCP_SEG_READ 2
/* Segments one tcp_probe stamps (the skb and those the backlog coalesced into it). */
#define TCP_COALESCED_MAX 32
/* Segments one read looks at. */
#define TCP_READ_WALK 48
/* A segment left unread this long after it was queued, behind the range of a
 * read that returned, was read by a call netlatd did not see return. */
#define TCP_ORPHAN_NS 1000000000ULL

static __always_inline bool v4mapped(const __u32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

/* The key of the segment at `seq` of `sk`'s incoming flow, as filter.bpf.h
 * built it from the packet. `v6`: the packets are IPv6 (a dual-stack socket
 * receiving IPv4 has IPv4-mapped addresses and gets IPv4 packets). */
static __always_inline void tcp_key_of(struct sock *sk, __u32 seq, struct netlatd_tcp_key *k)
{
	k->seq = seq;
	k->sport = sk->__sk_common.skc_dport;
	k->dport = bpf_htons(sk->__sk_common.skc_num);
	if (sk->__sk_common.skc_family == AF_INET6_NR) {
		__u32 r[4], l[4];
		BPF_CORE_READ_INTO(&r, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&l, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		if (!v4mapped(r)) {
			k->addrs = tcp_key_addrs(fold6(r), fold6(l));
			return;
		}
	}
	k->addrs = tcp_key_addrs(sk->__sk_common.skc_daddr, sk->__sk_common.skc_rcv_saddr);
}

static __always_inline struct tcp_sock_state *tcp_state(struct sock *sk, bool create)
{
	struct tcp_sock_state *ts = bpf_sk_storage_get(&tcp_socks, sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	/* Two CPUs creating it at once: the one that loses gets NULL. */
	return ts || !create ? ts : bpf_sk_storage_get(&tcp_socks, sk, 0, 0);
}

/* One step of tcp_probe's walk (a bpf_loop callback: verified once, not per
 * iteration). */
struct probe_walk {
	struct netlatd_tcp_key k;
	__u32 end;     /* the skb's end_seq */
	__u32 queued;  /* segments stamped */
	__u32 first;   /* the first one's seq */
	__u64 now;
};

static long probe_step(__u32 i, struct probe_walk *w)
{
	if ((__s32)(w->end - w->k.seq) <= 0)
		return 1;
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	if (!sg)
		return 1;
	if (!sg->queue_after) {
		__u32 after = before(w->now, sg->rx.receive_ns);
		sg->queue_after = after ? after : 1;
		sg->state = TCP_SEG_QUEUED;
		if (!w->queued)
			w->first = w->k.seq;
		w->queued++;
	}
	w->k.seq = sg->rx.end_seq;
	return 0;
}

/* tcp:tcp_probe: tcp_rcv_established() is about to queue the skb. It may
 * cover segments the backlog coalesced into it: each keeps its own entry,
 * found from the previous one's end. */
static __always_inline int on_tcp_probe(struct sock *sk, struct sk_buff *skb)
{
	if (!port_watched(sk->__sk_common.skc_num))
		return 0;
	struct tcp_skb_cb *cb = (struct tcp_skb_cb *)&skb->cb[0];
	struct probe_walk w = {.end = cb->end_seq, .now = bpf_ktime_get_ns()};
	/* Already received (a retransmission): TCP drops it, nothing is queued. */
	if ((__s32)(w.end - BPF_CORE_READ((struct tcp_sock *)sk, rcv_nxt)) <= 0)
		return 0;
	tcp_key_of(sk, cb->seq, &w.k);
	bpf_loop(TCP_COALESCED_MAX, probe_step, &w, 0);
	if (!w.queued)
		return 0;
	ADD(counters, NETLATD_CNT_QUEUED, w.queued);
	struct tcp_sock_state *ts = tcp_state(sk, true);
	if (!ts) {
		COUNT(drops, NETLATD_DROP_SOCK_STATE_FAILED);
		return 0;
	}
	if (!ts->cursor_valid) {
		ts->cursor = w.first;
		ts->cursor_valid = 1;
	}
	leave_wake_hint(sk, w.now);
	return 0;
}

/* Moves the socket's cursor past `seq`'s segment (ending at `end`) when it
 * is the oldest one, and frees it: only the CPU that moves the cursor frees. */
static __always_inline void tcp_retire(struct tcp_sock_state *ts, struct netlatd_tcp_key *k, __u32 end)
{
	if (ts->cursor == k->seq && __sync_val_compare_and_swap(&ts->cursor, k->seq, end) == k->seq)
		bpf_map_delete_elem(&tcp_segs, k);
}


/* One step of a read's walk from the socket's cursor (a bpf_loop callback). */
struct read_walk {
	struct netlatd_tcp_key k;
	struct tcp_sock_state *ts;
	const struct read_view *v;
	__u32 start, end;  /* the read's range: (start, end] */
	__u32 tid;
	__u32 unseen;
};

static long read_step(__u32 i, struct read_walk *w)
{
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	if (!sg)
		return 1;
	__u32 se = sg->rx.end_seq;
	if ((__s32)(se - w->end) > 0)
		return 1; /* not read to its end yet */
	if ((__s32)(se - w->start) > 0) {
		/* Its last byte is in this read's range: this read's. */
		if (__sync_val_compare_and_swap(&sg->state, TCP_SEG_QUEUED, TCP_SEG_READ) == TCP_SEG_QUEUED)
			emit_tcp(sg, w->v);
	} else if (sg->state == TCP_SEG_QUEUED &&
		   (w->ts->reader_tid == w->tid ||
		    w->v->now - (sg->rx.receive_ns + sg->queue_after) > TCP_ORPHAN_NS)) {
		/* Behind this read's range and not read: a call netlatd did not
		 * see return read it (one thread reads this socket, so no other
		 * call is in flight), or one gone this long. */
		if (__sync_val_compare_and_swap(&sg->state, TCP_SEG_QUEUED, TCP_SEG_READ) == TCP_SEG_QUEUED)
			w->unseen++;
	}
	if (sg->state == TCP_SEG_READ)
		tcp_retire(w->ts, &w->k, se);
	w->k.seq = se;
	return 0;
}

/* A TCP read returned `ret` bytes: the range (end - ret, end] of the stream,
 * where `end` is copied_seq after this call's last copy. */
static __always_inline int on_tcp_read(struct sock *sk, int ret, struct reader_state *rs, const struct read_view *v)
{
	struct tcp_sock_state *ts = tcp_state(sk, false);
	if (!ts || !ts->cursor_valid)
		return 0; /* nothing tracked was ever queued here */
	if (!rs || rs->tcp_sk != (__u64)sk) {
		COUNT(drops, NETLATD_DROP_TCP_RANGE_UNKNOWN);
		return 0;
	}
	struct read_walk w = {.ts = ts, .v = v, .end = rs->tcp_end, .tid = (__u32)v->pid_tgid};
	w.start = w.end - (__u32)ret;
	rs->tcp_sk = 0;
	if (!ts->reader_tid)
		ts->reader_tid = w.tid;
	else if (ts->reader_tid != w.tid && ts->reader_tid != ~0U)
		ts->reader_tid = ~0U; /* read by several threads from now on */
	tcp_key_of(sk, ts->cursor, &w.k);
	bpf_loop(TCP_READ_WALK, read_step, &w, 0);
	if (w.unseen)
		ADD(drops, NETLATD_DROP_UNSEEN_READ, w.unseen);
	return 0;
}

#endif /* NETLATD_TCP_BPF_H */
