/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: tcp_probe stamps the queueing of TCP segments, and a
 * drop of the skb right after undoes it. */
#ifndef NETLATD_TCP_PROBE_BPF_H
#define NETLATD_TCP_PROBE_BPF_H

/* The walks below (bpf_loop callbacks: each verified once, not per
 * iteration) follow a flow's chain of tracked segments from one's end to the
 * next one's start. This is their step: the segment at `k`, if it starts
 * before `end` and is tracked; else NULL, where the walk ends. */
static __always_inline struct netlatd_tcp_seg *seg_in_range(const struct netlatd_tcp_key *k, __u32 end)
{
	if ((__s32)(end - k->seq) <= 0)
		return NULL;
	return bpf_map_lookup_elem(&tcp_segs, k);
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
	struct netlatd_tcp_seg *sg = seg_in_range(&w->k, w->end);
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
 * previous probe to this one's start (a bpf_loop callback). Unlike the
 * others it tells its end from a segment not tracked (a break), so it makes
 * seg_in_range's two tests itself. */
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
	leave_wake_hint(cs, sk, w.now);
	return 0;
}

/* One step of undoing a probe's stamps (a bpf_loop callback). */
struct undo_walk {
	struct netlatd_tcp_key k;
	__u32 end;
};

static long undo_step(__u32 i, struct undo_walk *w)
{
	struct netlatd_tcp_seg *sg = seg_in_range(&w->k, w->end);
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

#endif /* NETLATD_TCP_PROBE_BPF_H */
