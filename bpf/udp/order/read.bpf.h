/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a UDP read's return where only queue order says which
 * datagram it took (docs/JOIN.md). */
#ifndef NETLATD_UDP_ORDER_READ_BPF_H
#define NETLATD_UDP_ORDER_READ_BPF_H

static __always_inline void emit_out(struct cpu_state *cs, const struct read_view *v)
{
	for (__u32 i = 0; i < UDP_OUT_MAX; i++) {
		if (i >= cs->n_out)
			break;
		bool ambiguous = cs->out_ambiguous[i];
		emit_udp(&cs->out[i], ambiguous ? NULL : v, NETLATD_READER_AMBIGUOUS);
	}
	cs->n_out = 0;
}

/* The packet-only records a resync writes after the unlock (retire.h
 * write_stale): the stale slots from this CPU's buffer, then the spill from
 * the socket's (bpf_loop callbacks: up to 1,024 and 1,280). */
struct resync_emit {
	struct udp_resync_out *ro;
	struct udp_spill_state *spill;
};

/* One of them: a packet-only record, its reader not known. */
static __always_inline void emit_stale(const struct udp_resync_rec *r)
{
	emit_record(&r->rx, r->queue_after, true, NULL, NETLATD_READER_AMBIGUOUS);
}

static long resync_emit_step(__u32 i, struct resync_emit *e)
{
	emit_stale(&e->ro->recs[i & (UDP_BIG_SLOTS - 1)]);
	return 0;
}

static long spill_emit_step(__u32 i, struct resync_emit *e)
{
	if (i >= UDP_SPILL)
		return 1;
	emit_stale(&e->spill->recs[i]);
	return 0;
}

/* The spill written out, and opened again to the datagrams that find the
 * slots full. */
static __always_inline void write_spill(struct cpu_state *cs, struct sock *sk, struct udp_sock_state *st,
					struct resync_emit *re)
{
	__u32 n = cs->n_spill;
	re->spill = bpf_sk_storage_get(&udp_spills, sk, 0, 0);
	if (re->spill)
		bpf_loop(n, spill_emit_step, re, 0);
	else
		ADD_ON(cs, drops, NETLATD_DROP_ORDER_GIVEN_UP, n); /* defensive: it was there under the lock */
	bpf_spin_lock(&st->lock);
	st->spill_busy = 0;
	bpf_spin_unlock(&st->lock);
}

/* This CPU's buffer for a resync's records. A lookup in an array is a few
 * inlined instructions: made for every read (one map lookup a packet more),
 * since a pointer that may or may not be NULL on two ways into the lock is
 * two walks of all that the verifier follows under it (looked up only when
 * the socket was out of order, recv_ret_btf's walk went from under 357k
 * instructions to 548k, and the start 100 ms longer). */
static __always_inline struct udp_resync_out *resync_out(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&udp_resync_outs, &cpu);
}


/* No state yet: this read took a datagram no data-ready call of ours had
 * seen when it looked. What it owes is decided under the lock
 * (locked.h udp_first_decide), where the unit tier's checker drives it too. */
static __always_inline void udp_first_read(struct cpu_state *cs, struct sock *sk, bool typed)
{
	struct udp_sock_state *st = udp_state_create(sk);
	int r = READ_UNTRACKED;
	if (st) {
		bool quiet = targ_push_before_queue || producers_quiet(cs, sk, typed);
		bpf_spin_lock(&st->lock);
		r = udp_first_decide(st, quiet);
		bpf_spin_unlock(&st->lock);
	}
	if (r == READ_AMBIGUOUS)
		COUNT_ON(cs, counters, NETLATD_CNT_AMBIGUOUS_READS);
	else
		COUNT_ON(cs, counters, NETLATD_CNT_UNTRACKED_READS);
}

/* Whether the read's look may take the socket for quiet: no producer
 * mid-batch, nor a datagram a call in flight dropped (`in->quiet`); or, on
 * kernels without that signal, one CPU alone feeding the port (`in->sole`). */
static __always_inline void read_quiet(struct udp_read_in *in, struct cpu_state *cs, struct sock *sk, int pidx,
				       const struct read_view *v, bool typed)
{
	/* Where the kernel says when a producer is mid-batch, it alone decides:
	 * one CPU feeding the port for 10 ms (sole_producer) is a timing
	 * assumption, which a vCPU stalled by its host breaks. It stands in
	 * only on kernels without that signal. */
	if (targ_push_before_queue) {
		in->quiet = true;
	} else if (targ_udp_join == UDP_JOIN_ORDER_PRODQ) {
		/* And no call in flight holds a datagram of the port it dropped
		 * (drops_pending): its slot stands LIVE as if a read held it, one
		 * more than the reads hold, until that call returns (drops.bpf.h
		 * settle_read_drop); nor a FIONREAD's or a poll's, until the task's
		 * next read (asks_pending). */
		__u32 p = pidx & (NETLATD_MAX_PORTS - 1);
		__u64 none_held = eq_bit(drops_pending[p], 0) &
				  (eq_bit(asks_pending[p], 0) | gt_bit(v->now, asks_last_ns[p] + ASK_HOLD_NS));
		in->quiet = opaque_on(cs, producers_quiet(cs, sk, typed) & none_held, SCRATCH_RECV);
	} else {
		in->sole = sole_producer(pidx, v->now);
	}
}

/* Where only queue order says which datagram a read took (docs/JOIN.md).
 * `cs`: this CPU's state, looked up once by the return. */
static __always_inline void on_udp_read(struct cpu_state *cs, struct sock *sk, int pidx, int ret, int flags,
					const struct read_view *v, struct reader_state *rs, bool typed)
{
	/* First, and alone: 6.1's verifier then leaves the queue-order way
	 * unwalked where the kernel names reads. With the test made in the
	 * caller instead, it walked it, and refused read_bufsize's bound. */
	if (targ_udp_join == UDP_JOIN_CONSUME) {
		on_udp_named_read(sk, v, rs);
		return;
	}
	struct udp_read_in in = {.ret = ret, .trunc = flags & MSG_TRUNC_FLAG, .tid = (__u32)v->pid_tgid};
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	if (!st) {
		udp_first_read(cs, sk, typed);
		return;
	}
	/* Opaque: known 0 on most of read_bufsize's ways out and unknown on
	 * the rest, it would fork the verifier's walk of the decision. */
	in.bufsize = (__u32)opaque_on(cs, st->tail - st->head >= 2 ? read_bufsize(cs) : 0, SCRATCH_RECV);
	struct udp_big_state *big = udp_big_of(sk, st, false);
	/* The slots' tail, then the head: a datagram queued after the head was
	 * read and given its slot before the lock then shows as a moved tail,
	 * or one that got none as a moved missing count (decide.h look_fresh).
	 * Volatile loads and a compiler barrier keep them in that order
	 * (x86-64 does not reorder loads). */
	in.tail = *(volatile __u32 *)&st->tail;
	in.missing = *(volatile __u32 *)&st->missing;
	asm volatile("" ::: "memory");
	in.head = queue_head(cs, sk, typed);
	read_quiet(&in, cs, sk, pidx, v, typed);
	struct head_pos hp = {.kind = HEAD_EMPTY};
	struct resync_emit re = {.ro = resync_out()};
	cs->n_out = 0;
	cs->n_resync = 0;
	cs->n_spill = 0;
	cs->given_up = 0;
	if (!lock_with_big(sk, st, &big))
		return;
	int r = udp_decide(st, big, &in, cs, &hp, re.ro);
	bpf_spin_unlock(&st->lock);
	if (cs->given_up)
		ADD_ON(cs, drops, NETLATD_DROP_ORDER_GIVEN_UP, cs->given_up);
	if (r == READ_AMBIGUOUS)
		COUNT_ON(cs, counters, NETLATD_CNT_AMBIGUOUS_READS);
	else if (r == READ_UNTRACKED)
		COUNT_ON(cs, counters, NETLATD_CNT_UNTRACKED_READS);
	else if (r == READ_EARLY)
		COUNT_ON(cs, counters, NETLATD_CNT_EARLY_READS);
	emit_out(cs, v);
	if (cs->n_resync && re.ro)
		bpf_loop(cs->n_resync, resync_emit_step, &re, 0);
	if (cs->n_spill)
		write_spill(cs, sk, st, &re);
}

#endif /* NETLATD_UDP_ORDER_READ_BPF_H */
