/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a UDP socket's slots, one datagram each in the order
 * the socket queued them (socket-local storage: eight inline, 1,024 in a second
 * storage once a socket holds more). Everything in a socket's slots changes
 * under its bpf_spin_lock, where no helper may be called: counts are
 * collected in a struct and added after the unlock. */
#ifndef NETLATD_UDP_ORDER_SLOTS_H
#define NETLATD_UDP_ORDER_SLOTS_H

static __always_inline struct udp_slot *slot_at(struct udp_sock_state *st, struct udp_big_state *big, __u32 i)
{
	if (st->big && big)
		return &big->slots[i & (UDP_BIG_SLOTS - 1)];
	return &st->small[i & (UDP_SMALL_SLOTS - 1)];
}



/* Room for `n` more slots: promotes the socket to its big slots (copying the
 * live window) when the inline ones cannot take them and `big` is at hand.
 * Lock held. */
static __always_inline void make_room(struct udp_sock_state *st, struct udp_big_state *big, __u32 n)
{
	if (st->big || !big || st->tail - st->head + n <= UDP_SMALL_SLOTS)
		return;
	for (__u32 i = 0; i < UDP_SMALL_SLOTS; i++) {
		__u32 idx = st->head + i;
		if (idx == st->tail)
			break;
		__builtin_memcpy(&big->slots[idx & (UDP_BIG_SLOTS - 1)], &st->small[idx & (UDP_SMALL_SLOTS - 1)],
				 sizeof(struct udp_slot));
	}
	st->big = 1;
}

/* Under the lock, a socket's slots are its inline ones or its big ones;
 * which is chosen once (netlatd.bpf.c udp_decide) and passed down as
 * (slots, mask): the verifier never merges pointers into two different maps,
 * so choosing per access would double its work at every access. */

/* The newest LIVE slot of `skb` in the scan window, as an offset from the
 * head, or -1. A gone slot is never one (push_stamps). */
static __always_inline int find_slot(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask, __u64 skb)
{
	__u32 h = st->head, n = st->tail - h;
	__u64 found = 0; /* offset + 1 */
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 match = eq_bit(s->skb, skb) & eq_bit(s->state, SLOT_LIVE) & (s->gone ^ 1);
		found += match * (i + 1 - found);
	}
	return (int)found - 1;
}

/* The newest LIVE slot of `skb` among the `n` (<= UDP_SCAN) slots from
 * `from`, as an offset back from the newest of them (0 = the newest), or -1. */
static __always_inline int recent_slot_in(struct udp_slot *slots, __u32 mask, __u32 from, __u32 n, __u64 skb)
{
	__u64 found = 0; /* index from `from`, + 1 */
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(from + i) & mask];
		__u64 match = eq_bit(s->skb, skb) & eq_bit(s->state, SLOT_LIVE) & (s->gone ^ 1);
		found += match * (i + 1 - found);
	}
	return found ? (int)(n - found) : -1;
}

/* The newest LIVE slot of `skb` among the newest UDP_SCAN slots, as an
 * offset back from the tail (0 = the newest), or -1: where a data-ready walk
 * looks, since the datagrams at the queue's tail have the newest slots. */
static __always_inline int find_recent_slot(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask, __u64 skb)
{
	__u32 n = st->tail - st->head;
	if (n > UDP_SCAN)
		n = UDP_SCAN;
	return recent_slot_in(slots, mask, st->tail - n, n, skb);
}

/* The same, outside the lock, as functions the verifier walks once on their
 * own (global: it sees only their arguments' types) rather than once per
 * state that reaches a call: the data-ready walk's steps call them up to 130
 * times a walk, and inlined they were ~80 % of what the verifier walked for
 * udp_queue_* (459k instructions on 6.18). A pointer to the whole array
 * gives the verifier its size. */
__noinline int recent_small_slot(struct udp_slot (*slots)[UDP_SMALL_SLOTS], __u32 from, __u32 n, __u64 skb)
{
	if (!slots)
		return -1;
	return recent_slot_in(*slots, UDP_SMALL_SLOTS - 1, from, n > UDP_SCAN ? UDP_SCAN : n, skb);
}

__noinline int recent_big_slot(struct udp_slot (*slots)[UDP_BIG_SLOTS], __u32 from, __u32 n, __u64 skb)
{
	if (!slots)
		return -1;
	return recent_slot_in(*slots, UDP_BIG_SLOTS - 1, from, n > UDP_SCAN ? UDP_SCAN : n, skb);
}

/* Slot `s` done when `done` is 1, untouched when 0, with the socket's counts
 * of live, stamped, marked and gone slots kept. Branch-free: settle_on runs it per
 * drop, where a branch each would double the verifier's walk. Lock held. */
static __always_inline void slot_done(struct udp_sock_state *st, struct udp_slot *s, __u64 done)
{
	s->state += (__u8)(done * (__u8)(SLOT_DONE - s->state));
	st->live -= done & ne_bit(st->live, 0);
	st->stamped -= done & (s->no_record ^ 1) & ne_bit(st->stamped, 0);
	st->marked -= done & s->marked & ne_bit(st->marked, 0);
	st->gone -= done & s->gone & ne_bit(st->gone, 0);
}

/* The socket's slots stop mirroring its queue: a datagram queued now has no
 * slot. Counted order_lost once, when the socket turns incomplete. Lock held. */
static __always_inline void mark_missing(struct udp_sock_state *st, struct push_counts *pushes)
{
	pushes->lost_order |= !st->incomplete;
	st->incomplete = 1;
	st->missing++;
}

/* A new slot at the tail, or NULL when the socket has none left: the slots
 * then stop mirroring the queue. Lock held. */
static __always_inline struct udp_slot *slot_append(struct udp_sock_state *st, struct udp_big_state *big,
						    struct push_counts *pushes)
{
	make_room(st, big, 1);
	if (st->tail - st->head >= (st->big ? UDP_BIG_SLOTS : UDP_SMALL_SLOTS)) {
		mark_missing(st, pushes);
		return NULL;
	}
	struct udp_slot *s = slot_at(st, big, st->tail);
	s->state = SLOT_LIVE;
	s->marked = 0;
	s->no_record = 0;
	s->gone = 0;
	s->queue_after = 0;
	s->skb = 0;
	st->tail++;
	st->live++;
	return s;
}


/* Slot `s` stands for a datagram dequeued before it was made: a candidate of
 * every read wherever it sits, and marked, since a read took it and may have
 * been left undecided (decide.h). Lock held. */
static __always_inline void mark_gone(struct udp_sock_state *st, struct udp_slot *s)
{
	s->gone = 1;
	s->marked = 1;
	st->marked++;
	st->gone++;
}

/* A new slot for a tracked datagram: its stamps `rx`, just moved out of the
 * stash entry at `skb`, queued before `now`. Lock held.
 *
 * With `gone`, the datagram was dequeued already: a data-ready call saw it
 * queued without a slot, and a read took it before the call's lock
 * (queue.bpf.h). Its gone placeholder keeps the stamps. It sits and counts
 * like any gone placeholder, a candidate of every read, and names no read:
 * named, or written out, it gives its datagram's packet-only record. Without
 * it those stamps stayed in the stash until the entry was reused
 * (unjoined_reused, the most lost at high rates). Its address `skb` is kept
 * only so that a drop of that datagram at its read settles it (drops.bpf.h);
 * the head and the data-ready walk never match a gone slot by address, since
 * the address may already be a later datagram's. */
static __always_inline void push_stamps(struct udp_sock_state *st, struct udp_big_state *big, __u64 skb,
					const struct netlatd_rx *rx, __u64 now, bool gone, struct push_counts *pushes)
{
	struct udp_slot *s = slot_append(st, big, pushes);
	if (!s) {
		pushes->full++; /* its stamps, claimed, are lost here: sock_fifo_full */
		return;
	}
	__builtin_memcpy(&s->rx, rx, sizeof(*rx));
	s->skb = skb;
	s->queue_after = before(now, rx->receive_ns);
	if (gone)
		mark_gone(st, s);
	st->stamped++;
	pushes->pushed++;
}

/* A datagram that finds its socket's slots full: the slots stop mirroring the
 * queue (its data-ready call makes no slot). Its stamps `rx` (claimed from the
 * stash; NULL: none), queued before `now`, go into the socket's spill while
 * it has room and no read is writing it out; else they are lost, counted
 * (sock_fifo_full). Every datagram past the slots is queued after all of
 * theirs, and its read is counted ambiguous until the socket is found
 * drained: then the spill is written out with the stale slots (retire.h
 * write_stale). Lock held. */
static __always_inline void push_full(struct udp_sock_state *st, struct udp_spill_state *spill,
				      const struct netlatd_rx *rx, __u64 now, struct push_counts *pushes)
{
	mark_missing(st, pushes);
	if (!rx)
		return;
	__u32 i = st->spilled;
	if (!spill || st->spill_busy || i >= UDP_SPILL) {
		pushes->full++;
		return;
	}
	struct udp_resync_rec *r = &spill->recs[i];
	__builtin_memcpy(&r->rx, rx, sizeof(*rx));
	r->queue_after = before(now, rx->receive_ns);
	st->spilled = i + 1;
	pushes->spilled++;
}

/* A slot for a datagram netlatd gives no record of: still queued (`skb`, of
 * `len` bytes, seen queued before `now`), or already dequeued (skb 0: gone,
 * mark_gone). Lock held. */
static __always_inline void push_placeholder(struct udp_sock_state *st, struct udp_big_state *big, __u64 skb,
					     __u32 len, __u64 now, struct push_counts *pushes)
{
	struct udp_slot *s = slot_append(st, big, pushes);
	if (!s)
		return;
	s->no_record = 1;
	s->skb = skb;
	s->rx.len = len;
	s->rx.receive_ns = now;
	if (!skb)
		mark_gone(st, s);
}

#endif /* NETLATD_UDP_ORDER_SLOTS_H */
