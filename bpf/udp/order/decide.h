/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: which datagram a UDP read returned, by the socket's
 * queue order, its head and the read's length (docs/JOIN.md); a read they
 * cannot decide is counted as ambiguous, never guessed. */
#ifndef NETLATD_UDP_ORDER_DECIDE_H
#define NETLATD_UDP_ORDER_DECIDE_H

/* How far past its head an ambiguous read marks its candidates (decide_by_order). */
#define UDP_MARK_REACH 64

/* Whether this read may have truncated a longer datagram to what it returned:
 * no MSG_TRUNC (which returns the whole length) and a buffer it filled, or one
 * of unknown size. */
static __always_inline __u64 may_truncate(const struct udp_read_in *in)
{
	if (in->trunc)
		return 0;
	/* Only a buffer known to be full: with its size unknown (recvmmsg)
	 * every longer candidate would fit, and a read would be named for a
	 * longer datagram another reader had just dequeued. Such a truncated
	 * read is left ambiguous instead. */
	return eq_bit(in->bufsize, in->ret) & (eq_bit(in->bufsize, 0) ^ 1);
}

/* Whether this read may have been cut short at all: as may_truncate, or with
 * its buffer's size unknown. Then a longer candidate is still one it may have
 * taken: one of exactly the returned length is named only when no longer one
 * is left (the unit tier's checker: a recvmmsg read of a 200-byte datagram cut
 * to 150 was named for another reader's 150-byte one). */
static __always_inline __u64 may_be_cut(const struct udp_read_in *in)
{
	return (in->trunc ^ 1) & (eq_bit(in->bufsize, in->ret) | eq_bit(in->bufsize, 0));
}

/* Could a datagram of `len` bytes be what this read returned? */
static __always_inline __u64 compatible_bit(__u32 len, __u32 ret, __u64 trunc_ok)
{
	return eq_bit(len, ret) | (gt_bit(len, ret) & trunc_ok);
}


/* Hands slot `idx` to the emitter: `ambiguous` for a packet-only record. */
static __always_inline void take_slot(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask, __u32 idx,
				      struct cpu_state *cs, bool ambiguous)
{
	struct udp_slot *s = &slots[idx & mask];
	__u32 n = cs->n_out;
	if (n < UDP_OUT_MAX && !s->no_record) {
		__builtin_memcpy(&cs->out[n & (UDP_OUT_MAX - 1)], s, sizeof(*s));
		cs->out_ambiguous[n & (UDP_OUT_MAX - 1)] = ambiguous;
		cs->n_out = n + 1;
	}
	slot_done(st, s, 1);
}


/* The head's slot, if it has one. Lock held. */
static __always_inline struct head_pos resolve_head(__u64 head, struct udp_sock_state *st, struct udp_slot *slots,
						    __u32 mask)
{
	struct head_pos hp = {.kind = HEAD_EMPTY};
	if (!head)
		return hp;
	hp.kind = HEAD_UNPUSHED;
	if (stash_has(head))
		return hp;
	int at = find_slot(st, slots, mask, head);
	if (at >= 0) {
		hp.kind = HEAD_SLOT;
		hp.idx = st->head + at;
	}
	return hp;
}

/* Whether the read's look (taken before the lock: the tail and the missing
 * count, then the head, then whether a producer is mid-batch) still holds
 * under the lock: no data-ready call ran since, neither one that made a slot
 * nor one that found none left. A datagram queued and pushed in between is
 * not in the look: with the queues seen empty, a resync would empty the
 * window while that datagram, still queued, has a slot in it, and a later
 * read could be named for it (the hole the unit tier's checker found,
 * docs/JOIN.md "Resync"). One queued in between that got no slot (counted
 * missing) is no more in it: a resync then forgot it was missing, and its
 * read, owing a datagram no slot would ever stand for, left `owed` one too
 * many with nothing unsure, so that no read of the socket was named again
 * (the checker's liveness check, 9 datagrams into 8 inline slots). Only the
 * queues-empty branches need it (resync_slots, a drained retirement); the
 * candidates end where the look did (read_frontier). Lock held. */
static __always_inline __u64 look_fresh(const struct udp_sock_state *st, const struct udp_read_in *in)
{
	return eq_bit(st->tail, in->tail) & eq_bit(st->missing, in->missing);
}

/* Where this read's candidates end (the head's slot; with none, the tail
 * the look saw: a slot made since is a datagram queued after this read's own
 * was dequeued, or one's a read took before it was made, a gone placeholder,
 * a candidate wherever it sits) into `hp`, and whether the read can be
 * certain so far. Lock held. */
static __always_inline bool read_frontier(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					  const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp,
					  __u32 h)
{
	*hp = resolve_head(in->head, st, slots, mask);
	__u32 f = hp->kind == HEAD_SLOT ? hp->idx : in->tail;
	/* Not before the head: another thread's turn since the look may have
	 * moved it past that tail (every slot it passed is done). */
	f += (__u32)gt_bit(h, f) * (h - f);
	/* Every datagram before the head has its slot once the data-ready
	 * calls of everything queued so far have run: with one CPU feeding the
	 * port they run in queue order, each before the next datagram's, so a
	 * head with a slot says so; otherwise only a quiet producer side does. */
	bool certain = !st->incomplete && (in->quiet || (hp->kind == HEAD_SLOT && in->sole));
	/* After a resync, a thread other than the one that resynced may have
	 * been in flight with a datagram whose slot the resync wrote out: its
	 * read cannot be named, and what it owes may be nothing (resync_slots). */
	if (st->resynced && st->reader_tid != in->tid) {
		certain = false;
		st->owed_unsure = 1;
	}
	/* A read looks at UDP_SCAN slots past the head: the candidates must all
	 * be in sight, those before the head and the dequeued ones anywhere. */
	if (f - h > UDP_SCAN)
		certain = false;
	/* The head, and whether the read can be certain so far, as numbers
	 * the verifier does not know: each way resolve_head and the checks
	 * above can go would otherwise be a walk of its own through the loops
	 * below (about ten of them on 6.18). The head's slot index is `f`
	 * when it has one. */
	__u64 o = opaque_on(cs, ((__u64)certain << 40) | ((__u64)hp->kind << 32) | f, SCRATCH_RECV);
	f = (__u32)o;
	hp->kind = (enum head_kind)((o >> 32) & 3);
	hp->idx = f;
	certain = (o >> 40) & 1;
	return certain;
}

/* The bits set in `v` (BPF has no population count). */
static __always_inline __u64 bit_count(__u64 v)
{
	v = v - ((v >> 1) & 0x5555555555555555ULL);
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	return (((v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL) * 0x0101010101010101ULL) >> 56;
}

/* An ambiguous read marks its candidates: this read took one of them, or
 * one whose slot is not made yet (it will be, marked). Lock held. */
static __always_inline void mark_candidates(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask, __u32 h,
					    __u32 n, __u32 f, __u64 live, bool in_sight)
{
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 bit = (live >> i) & 1;
		st->marked += bit & (s->marked ^ 1);
		s->marked |= bit;
	}
	/* And those past the slots a read looks at: its own datagram may be
	 * one of them, and retire_marked rests on every owing read's datagram
	 * being marked. Only when the candidates run out of sight (a read
	 * held up while more than UDP_SCAN slots piled up behind it), up to
	 * the head's slot, or the tail if that is unknown (marking a queued
	 * datagram too only delays a retirement); and up to UDP_MARK_REACH
	 * slots, which the verifier walks once per state that reaches here
	 * (all 256 cost it 260,000 instructions more on 6.18). Candidates
	 * beyond that are left unmarked, and the socket says so
	 * (owed_unseen): marked datagrams are then no longer known to be all
	 * owed. */
	if (!in_sight) {
		for (__u32 i = UDP_SCAN; i < UDP_MARK_REACH; i++) {
			if (h + i >= f)
				break;
			struct udp_slot *s = &slots[(h + i) & mask];
			__u64 lv = eq_bit(s->state, SLOT_LIVE);
			st->marked += lv & (s->marked ^ 1);
			s->marked |= lv;
		}
		st->owed_unseen |= f - h > UDP_MARK_REACH;
	}
}

/* Candidates and the decision, by queue order (docs/JOIN.md). Lock held. */
static __always_inline int decide_by_order(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					   const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp)
{
	__u32 h = st->head, t = st->tail;
	bool certain = read_frontier(st, slots, mask, in, cs, hp, h);
	__u32 f = hp->idx;
	__u32 n = t - h < UDP_SCAN ? t - h : UDP_SCAN;
	/* Bit i: slot h + i is a candidate (live, before the head, or dequeued
	 * before it had a slot); and one whose length fits what the read
	 * returned (a dequeued one's length is unknown). */
	__u64 trunc_ok = may_truncate(in), cut = may_be_cut(in), live = 0, fit = 0, nameable = 0, gone_seen = 0;
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 lv = eq_bit(s->state, SLOT_LIVE);
		__u64 c = lv & (gt_bit(f, h + i) | s->gone);
		gone_seen += lv & s->gone;
		live |= c << i;
		/* fit: what it may have taken; nameable: what it may be named for. */
		fit |= (c & (compatible_bit(s->rx.len, in->ret, cut) | s->gone)) << i;
		nameable |= (c & (compatible_bit(s->rx.len, in->ret, trunc_ok) | s->gone)) << i;
	}
	/* Every candidate in sight: those before the head within the slots a
	 * read looks at, and every gone placeholder. */
	bool in_sight = f - h <= UDP_SCAN && gone_seen == st->gone;
	if (!in_sight)
		certain = false;
	/* Each read that returned ambiguous owes one of the dequeued
	 * datagrams, all of them live candidates of this read too (before the
	 * head, or gone). Fewer candidates than those debts and this read
	 * means a dequeued datagram without a slot in sight, and the one
	 * candidate may be a debtor's. */
	if ((__u64)st->owed + 1 > bit_count(live))
		certain = false;
	/* Where the walk stopped is no matter after it: without this, each
	 * place it can stop is a state of its own through all that follows. */
	n = (__u32)opaque_on(cs, n, SCRATCH_RECV);
	if (certain && fit && !(fit & (fit - 1)) && (fit & nameable)) {
		__u32 pick = 0;
		for (__u32 i = 0; i < UDP_SCAN; i++)
			pick += ((fit >> i) & 1) * i;
		/* A gone slot stands for whichever dequeued datagram has no slot
		 * of its own: it names no read, and one with stamps gives its
		 * datagram's record without a reader (slots.h push_stamps). */
		struct udp_slot *s = &slots[(h + pick) & mask];
		bool gone = s->gone, stamps = !s->no_record;
		take_slot(st, slots, mask, h + pick, cs, gone);
		if (!stamps)
			return READ_UNTRACKED;
		return gone ? READ_EARLY : READ_MATCH;
	}
	if (certain && !live)
		return READ_UNTRACKED; /* defensive: every datagram has a slot */
	mark_candidates(st, slots, mask, h, n, f, live, in_sight);
	st->owed++;
	return READ_AMBIGUOUS;
}

#endif /* NETLATD_UDP_ORDER_DECIDE_H */
