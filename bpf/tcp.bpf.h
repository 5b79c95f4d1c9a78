/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
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
	} else if (sg->state == TCP_SEG_QUEUED) {
		/* Stamped by an earlier copy, which is not below rcv_nxt (it
		 * waits out of order, or TCP pruned it later): either copy may be
		 * the one TCP keeps. */
		sg->dup = NETLATD_TCP_COPY_QUEUE;
	}
	w->k.seq = sg->rx.end_seq;
	return 0;
}

/* One step of following the chain of tracked segments from the end of the
 * previous probe to this one's start (a bpf_loop callback). */
struct chain_walk {
	struct netlatd_tcp_key k;
	__u32 to;
	__u32 broken;  /* the chain breaks at k.seq */
};

static long chain_step(__u32 i, struct chain_walk *w)
{
	if ((__s32)(w->to - w->k.seq) <= 0)
		return 1;
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	if (!sg) {
		w->broken = 1;
		return 1;
	}
	w->k.seq = sg->rx.end_seq;
	return 0;
}

/* The skb tcp_probe sees starts past the end of the one before: the bytes in
 * between were queued without it (its program did not run for them). If no
 * entry holds some of them, the chain of segments breaks there: a bridge
 * tells the reads where it goes on. */
static __always_inline void tcp_note_break(struct tcp_sock_state *ts, const struct netlatd_tcp_key *k, __u32 seq)
{
	if (!ts->probe_end_valid || (__s32)(seq - ts->probe_end) <= 0)
		return;
	struct chain_walk w = {.k = *k, .to = seq};
	w.k.seq = ts->probe_end;
	bpf_loop(TCP_COALESCED_MAX, chain_step, &w, 0);
	if (!w.broken)
		return;
	__u32 n = ts->n_bridges;
	ts->bridge_from[n % TCP_BRIDGES] = w.k.seq;
	ts->bridge_to[n % TCP_BRIDGES] = seq;
	ts->n_bridges = n + 1;
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
	struct cpu_state *cs = this_cpu();
	if (cs) {
		cs->probed_skb = (__u64)skb;
		cs->probed_key = w.k;
		cs->probed_end = w.end;
	}
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
		/* The oldest unread byte, when a tracked segment starts there
		 * (tcp_probe did not run for it): else this one. */
		struct netlatd_tcp_key first = w.k;
		first.seq = BPF_CORE_READ((struct tcp_sock *)sk, copied_seq);
		ts->cursor = (__s32)(first.seq - w.first) < 0 && bpf_map_lookup_elem(&tcp_segs, &first) ? first.seq : w.first;
		ts->cursor_valid = 1;
	}
	/* Under the socket lock, as every tcp_probe of this socket. */
	tcp_note_break(ts, &w.k, w.first);
	if (!ts->probe_end_valid || (__s32)(w.k.seq - ts->probe_end) > 0)
		ts->probe_end = w.k.seq;
	ts->probe_end_valid = 1;
	__u32 n = ts->n_starts;
	ts->starts[n % TCP_STARTS] = w.first;
	ts->n_starts = n + 1;
	leave_wake_hint(sk, w.now);
	return 0;
}

/* One step of undoing a probe's stamps (a bpf_loop callback). */
struct undo_walk {
	struct netlatd_tcp_key k;
	__u32 end;
};

static long undo_step(__u32 i, struct undo_walk *w)
{
	if ((__s32)(w->end - w->k.seq) <= 0)
		return 1;
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	if (!sg)
		return 1;
	if (sg->state == TCP_SEG_QUEUED && sg->dup != NETLATD_TCP_COPY_QUEUE) {
		/* Its stamps are of a copy TCP refused: the next copy's probe
		 * stamps the queueing again; its receive stamps stay unknown. */
		sg->state = 0;
		sg->queue_after = 0;
		sg->dup = NETLATD_TCP_COPY_RX;
	}
	w->k.seq = sg->rx.end_seq;
	return 0;
}

/* kfree_skb of the skb tcp_probe just stamped on this CPU: TCP refused it
 * (receive buffer or window full, out of window, a duplicate out of order).
 * The skb's own control block names the same range, which a reused skb of
 * another packet would not. */
static __always_inline void tcp_probe_undo(struct cpu_state *cs, struct sk_buff *skb)
{
	struct tcp_skb_cb *cb = (struct tcp_skb_cb *)&skb->cb[0];
	cs->probed_skb = 0;
	if (cb->seq != cs->probed_key.seq || cb->end_seq != cs->probed_end)
		return;
	struct undo_walk w = {.k = cs->probed_key, .end = cs->probed_end};
	bpf_loop(TCP_COALESCED_MAX, undo_step, &w, 0);
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
	__u32 unseen;        /* segments read by calls netlatd did not see return */
	__u32 queue_unseen;  /* records emitted without a queue stamp */
	__u32 gaps;          /* untracked stretches skipped, or found with nowhere to resume */
	__u32 skipped;       /* bytes in the stretches skipped */
	__u32 copies;        /* segments left out: two copies were probed */
};

/* The segment at the walk's key was never tracked (it came before netlatd
 * started, or the table was full), yet this read went past its start: resume
 * at the first segment of the oldest skb tcp_probe saw queued since, when
 * this read reached it. Segments in between are not reported (counted once
 * per gap, with their entries left to the sweep). */
static __always_inline bool tcp_skip_gap(struct read_walk *w)
{
	/* The nearest start after k and before the read's end, as arithmetic:
	 * a branch per start would multiply the verifier's states. */
	__u32 k = w->k.seq;
	__u64 best = 0xffffffffULL;
	/* A bridge from exactly here (tcp_note_break) is where the chain goes on. */
	for (int i = 0; i < TCP_BRIDGES; i++) {
		__u64 hit = eq_bit(w->ts->bridge_from[i], k);
		__u64 d = (__u32)(w->ts->bridge_to[i] - k);
		__u64 cand = d | ((hit ^ 1) * 0xffffffffULL);
		best -= (best - cand) * gt_bit(best, cand);
	}
	/* Else the nearest start tcp_probe saw within this read. */
	for (int i = 0; i < TCP_STARTS; i++) {
		__u64 d = (__u32)(w->ts->starts[i] - k), e = (__u32)(w->end - w->ts->starts[i]);
		__u64 ok = gt_bit(d, 0) & gt_bit(0x80000000ULL, d) & gt_bit(e, 0) & gt_bit(0x80000000ULL, e);
		__u64 cand = d | ((ok ^ 1) * 0xffffffffULL);
		best -= (best - cand) * gt_bit(best, cand);
	}
	/* A gap is counted once: when first found, whether or not a read can
	 * resume past it then. */
	bool seen = w->ts->stuck_valid && w->ts->stuck_at == k;
	if (best == 0xffffffffULL) {
		if (!seen) {
			w->ts->stuck_at = k;
			w->ts->stuck_valid = 1;
			w->gaps++;
		}
		return false;
	}
	__u32 to = k + (__u32)best;
	if (__sync_val_compare_and_swap(&w->ts->cursor, k, to) == k) {
		w->gaps += !seen;
		w->skipped += (__u32)best;
		w->ts->stuck_valid = 0;
	}
	w->k.seq = to;
	return true;
}

static long read_step(__u32 i, struct read_walk *w)
{
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	if (!sg) {
		if ((__s32)(w->end - w->k.seq) <= 0 || w->k.seq != w->ts->cursor)
			return 1; /* past this read, or not the oldest: nothing to heal */
		return tcp_skip_gap(w) ? 0 : 1;
	}
	__u32 se = sg->rx.end_seq;
	if ((__s32)(se - w->end) > 0)
		return 1; /* not read to its end yet */
	/* Queued: tcp_probe stamped it. Or its bytes were read, so it was
	 * queued, but tcp_probe did not run for it (a BPF program does not run
	 * nested in itself, and a softirq can interrupt the one that processes
	 * the socket's backlog in process context): its record has no queue
	 * stamp. */
	__u32 was = sg->state;
	if (was == TCP_SEG_READ)
		goto retire;
	if ((__s32)(se - w->start) > 0) {
		/* Its last byte is in this read's range: this read's. */
		if (__sync_val_compare_and_swap(&sg->state, was, TCP_SEG_READ) == was) {
			__u64 copies = eq_bit(sg->dup, NETLATD_TCP_COPY_QUEUE);
			w->copies += copies;
			w->queue_unseen += eq_bit(sg->queue_after, 0) & (copies ^ 1);
			if (!copies)
				emit_tcp(sg, w->v);
		}
	} else if (w->ts->reader_tid == w->tid || w->v->now - sg->rx.receive_ns > TCP_ORPHAN_NS) {
		/* Behind this read's range and not read: a call netlatd did not
		 * see return read it (one thread reads this socket, so no other
		 * call is in flight), or one gone this long. */
		if (__sync_val_compare_and_swap(&sg->state, was, TCP_SEG_READ) == was)
			w->unseen++;
	}
retire:
	if (sg->state == TCP_SEG_READ)
		tcp_retire(w->ts, &w->k, se);
	w->k.seq = se;
	return 0;
}

/* A read of a socket tcp_probe never stamped a segment of, starting at
 * `start`: its data was queued where that tracepoint does not fire. The
 * segment that completes the handshake is queued by tcp_rcv_state_process:
 * the request's first one at a TCP_DEFER_ACCEPT listener (nginx's
 * `deferred`), or one that overtook the handshake's last ACK from another
 * CPU. If a tracked segment starts where this read does, the socket's reads
 * take its segments from there (their records without a queue stamp, as
 * counted); else nothing tracked was queued here. */
static __always_inline struct tcp_sock_state *tcp_adopt(struct sock *sk, __u32 start)
{
	struct netlatd_tcp_key k;
	tcp_key_of(sk, start, &k);
	/* A flow --sample left out: its reads are counted, as a datagram's. */
	if (targ_sample_below && flow_sampled_out(k.addrs, k.sport, k.dport)) {
		COUNT(counters, NETLATD_CNT_UNTRACKED_READS);
		return NULL;
	}
	if (!bpf_map_lookup_elem(&tcp_segs, &k))
		return NULL;
	struct tcp_sock_state *ts = tcp_state(sk, true);
	if (!ts) {
		COUNT(drops, NETLATD_DROP_SOCK_STATE_FAILED);
		return NULL;
	}
	/* A tcp_probe of a later segment may have set it meanwhile. */
	if (!ts->cursor_valid) {
		ts->cursor = start;
		ts->cursor_valid = 1;
	}
	return ts;
}

/* A TCP read returned `ret` bytes: the range (end - ret, end] of the stream,
 * where `end` is copied_seq after this call's last copy. */
static __always_inline int on_tcp_read(struct sock *sk, int ret, struct reader_state *rs, const struct read_view *v)
{
	if (!ret)
		return 0; /* end of stream: no bytes */
	struct tcp_sock_state *ts = tcp_state(sk, false);
	if (!ts || !ts->cursor_valid) {
		if (!rs || rs->tcp_sk != (__u64)sk)
			return 0;
		ts = tcp_adopt(sk, rs->tcp_end - (__u32)ret);
		if (!ts)
			return 0; /* nothing tracked was ever queued here */
	}
	ADD(counters, NETLATD_CNT_TCP_BYTES_READ, ret);
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
	if (w.queue_unseen)
		ADD(counters, NETLATD_CNT_QUEUE_UNSEEN, w.queue_unseen);
	if (w.gaps)
		ADD(drops, NETLATD_DROP_TCP_GAP, w.gaps);
	if (w.skipped)
		ADD(counters, NETLATD_CNT_TCP_BYTES_SKIPPED, w.skipped);
	if (w.copies)
		ADD(drops, NETLATD_DROP_TCP_COPIES, w.copies);
	return 0;
}

#endif /* NETLATD_TCP_BPF_H */
