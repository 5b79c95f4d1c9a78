/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a TCP read takes the segments whose last byte lies in
 * the byte range it copied, which tcp_rcv_space_adjust gives exactly. */
#ifndef NETLATD_TCP_READ_BPF_H
#define NETLATD_TCP_READ_BPF_H

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
	__u32 too_many;      /* segments of an earlier read past its walk's bound */
	__u32 cut;           /* this walk reached its bound */
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
	if (i >= TCP_READ_WALK) {
		w->cut = 1;
		return 1;
	}
	struct netlatd_tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &w->k);
	__u32 at = w->k.seq;
	if (!sg) {
		if ((__s32)(w->end - at) <= 0 || at != w->ts->cursor)
			return 1; /* past this read, or not the oldest: nothing to heal */
		/* On only if it moved: a bridge to where it starts would spin
		 * to the walk's bound. */
		return tcp_skip_gap(w) && w->k.seq != at ? 0 : 1;
	}
	__u32 se = sg->rx.end_seq;
	if ((__s32)(se - w->end) > 0 || se == at)
		return 1; /* not read to its end yet (or empty: no way on) */
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
	} else if (w->ts->cut_valid && (__s32)(se - w->ts->cut_end) <= 0) {
		/* In the range of a read whose walk stopped at its bound: that
		 * read's, certainly, and too late for its record. */
		if (__sync_val_compare_and_swap(&sg->state, was, TCP_SEG_READ) == was)
			w->too_many++;
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

/* The walk of a read of (start, end] from the socket's cursor, and what it
 * counted. */
static __always_inline void tcp_walk(struct sock *sk, struct tcp_sock_state *ts, const struct read_view *v,
				     __u32 start, __u32 end)
{
	struct read_walk w = {.ts = ts, .v = v, .start = start, .end = end, .tid = (__u32)v->pid_tgid};
	tcp_key_of(sk, ts->cursor, &w.k);
	/* + 1: the step that finds the bound reached */
	bpf_loop(TCP_READ_WALK + 1, read_step, &w, 0);
	if (w.cut) {
		ts->cut_end = end;
		ts->cut_valid = 1;
	} else if (ts->cut_valid && (__s32)(ts->cursor - ts->cut_end) >= 0) {
		ts->cut_valid = 0; /* all of it counted: no compare across a wrap */
	}
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
	if (w.too_many)
		ADD(drops, NETLATD_DROP_TCP_READ_TOO_MANY, w.too_many);
}

/* A TCP read returned `ret` bytes: the range (end - ret, end] of the stream,
 * where `end` is copied_seq after this call's last copy. A read that returned
 * none (the end of the stream) after one that went past its walk's bound
 * walks an empty range at that read's end: the rest of its segments are
 * counted now, as the only ones behind it. One call of the walk: a second
 * was 62k more instructions for the verifier to walk. */
static __always_inline int on_tcp_read(struct sock *sk, int ret, struct reader_state *rs, const struct read_view *v)
{
	struct tcp_sock_state *ts = tcp_state(sk, false);
	__u32 end;
	if (!ret) {
		if (!ts || !ts->cursor_valid || !ts->cut_valid)
			return 0;
		end = ts->cut_end;
	} else {
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
		__u32 tid = (__u32)v->pid_tgid;
		end = rs->tcp_end;
		rs->tcp_sk = 0;
		if (!ts->reader_tid)
			ts->reader_tid = tid;
		else if (ts->reader_tid != tid && ts->reader_tid != ~0U)
			ts->reader_tid = ~0U; /* read by several threads from now on */
	}
	tcp_walk(sk, ts, v, end - (__u32)ret, end);
	return 0;
}

#endif /* NETLATD_TCP_READ_BPF_H */
