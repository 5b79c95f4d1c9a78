/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: after a UDP read's decision, under its socket's lock:
 * the datagrams of ambiguous reads written out, the slots resynced, the head
 * moved on. */
#ifndef NETLATD_UDP_ORDER_RETIRE_H
#define NETLATD_UDP_ORDER_RETIRE_H

/* Datagrams read by ambiguous reads that returned, written as packet-only
 * records (no reader) once it is certain that no read in flight holds them.
 * Two ways to be certain, each needing every datagram's slot made (a quiet
 * producer side) and no debt in doubt (owed_unsure):
 *
 * - Marked datagrams all owed: every ambiguous read marked all its
 *   candidates, its own among them, so when the marked ones are as many as
 *   the reads that owe one, each is one of those reads'. Marking only the
 *   candidates in sight broke that: a read whose own datagram lay past them
 *   left it unmarked, a marked datagram of a read still in flight made the
 *   counts match, and it was written out; on its return that read found
 *   another thread's datagram as its only candidate: 1 to 7 wrong records
 *   in 4096 reads with two of eight threads held at their return
 *   (tests/bpf/test_readers_held.cpp).
 * - The socket drained: its queues empty, so every LIVE slot is a dequeued
 *   datagram's, and as many LIVE slots as owed reads leave none for a read
 *   in flight. Every LIVE slot in sight goes, marked or not.
 *
 * Each retired lowers both counts, so the rest stay all owed. Lock held. */
static __always_inline void retire_marked(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					  const struct udp_read_in *in, struct cpu_state *cs,
					  const struct head_pos *hp)
{
	if (!st->owed || !in->quiet || st->incomplete || st->owed_unsure)
		return;
	/* Drained by the look, and still so: no slot made since (look_fresh). */
	__u64 drained = eq_bit(in->head, 0) & eq_bit(st->live, st->owed) & look_fresh(st, in);
	if (!drained && (st->marked != st->owed || st->owed_unseen))
		return;
	/* The frontier of the read's candidates (read_frontier). */
	__u32 h = st->head, t = st->tail, f = hp->idx;
	__u32 n = t - h < UDP_SCAN ? t - h : UDP_SCAN;
	/* Each slot is copied out unconditionally, and kept (the count moves
	 * past it) only if it is one to retire with a record. */
	__u32 k = cs->n_out, retired = 0, gone_retired = 0, marked_retired = 0, stamped_retired = 0;
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 mk = eq_bit(s->state, SLOT_LIVE) & (s->marked | drained) & (gt_bit(f, h + i) | s->gone);
		__builtin_memcpy(&cs->out[k & (UDP_OUT_MAX - 1)], s, sizeof(*s));
		cs->out_ambiguous[k & (UDP_OUT_MAX - 1)] = 1;
		k += mk & (s->no_record ^ 1);
		s->state += mk * (SLOT_DONE - SLOT_LIVE);
		retired += mk;
		stamped_retired += mk & (s->no_record ^ 1);
		gone_retired += mk & s->gone;
		marked_retired += mk & s->marked;
	}
	cs->n_out = k < UDP_OUT_MAX ? k : UDP_OUT_MAX;
	st->marked -= marked_retired;
	st->owed -= retired;
	st->gone -= gone_retired;
	st->live -= retired;
	st->stamped -= stamped_retired;
	if (!st->owed)
		st->owed_unseen = 0;
}

/* The window emptied (head = tail): a slot outside it is never looked at,
 * and slot_append writes each one afresh. Lock held. */
static __always_inline void empty_window(struct udp_sock_state *st)
{
	st->head = st->tail;
	st->big = 0;
	st->live = 0;
	st->stamped = 0;
	st->marked = 0;
	st->owed = 0;
	st->owed_unseen = 0;
	st->gone = 0;
}

/* The window's stale slots written out: each stamped LIVE one copied into the
 * CPU's buffer `ro`, to be written after the unlock as a packet-only record
 * (read by the reads that owe them); all 1,024 if need be; and the spill
 * after them (slots.h push_full). Writing only the
 * 16 in sight gave up the other 1,008 of every overflow: the most lost at
 * 200k pps on one socket. With no buffer at hand, or after a drop that could
 * not be told for sure (a slot may stand for a datagram the kernel dropped),
 * each is left out and counted instead (cs->given_up: order_given_up). Every
 * LIVE slot is a dequeued datagram's: the caller's look found the queues
 * empty, and no slot made since. Lock held. */
static __always_inline void write_stale(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					struct cpu_state *cs, struct udp_resync_out *ro)
{
	/* The whole window: at most mask + 1 slots (slot_append). */
	__u32 h = st->head, n = st->tail - h, k = 0;
	__u64 keep_all = st->drops_unsure ^ 1;
	if (ro) {
		for (__u32 i = 0; i <= mask; i++) {
			if (i >= n)
				break;
			struct udp_slot *s = &slots[(h + i) & mask];
			struct udp_resync_rec *r = &ro->recs[k & (UDP_BIG_SLOTS - 1)];
			__builtin_memcpy(&r->rx, &s->rx, sizeof(s->rx));
			r->queue_after = s->queue_after;
			k += eq_bit(s->state, SLOT_LIVE) & (s->no_record ^ 1) & keep_all;
		}
	}
	cs->n_resync = k;
	/* The spill: datagrams queued after every slot's, all dequeued too.
	 * The read writes it out from the socket's storage after the unlock;
	 * until it is done (spill_busy), no datagram joins the spill. */
	__u32 spilled = st->spilled * (__u32)keep_all;
	cs->n_spill = spilled;
	st->spill_busy |= (__u32)ne_bit(spilled, 0);
	cs->given_up = st->stamped - k + (st->spilled - spilled);
	st->spilled = 0;
}

/* Slots that stopped mirroring the queue (`incomplete`: a datagram got no
 * slot) mirror it again when a read returns to find the socket's queues empty
 * and no producer mid-batch, with no slot made since it looked (a datagram
 * queued and pushed in between would have one: look_fresh), on a socket only
 * this thread has ever read: no other read can be in flight, nothing queued
 * has a slot, and the LIVE slots left are all stale. They are written out
 * (write_stale), and the window is emptied (empty_window), so that no stale
 * slot can be taken for a later datagram. A thread that had never read may
 * still have been in flight with one of them: reads by any other thread are
 * never named after a resync (decide_by_order).
 *
 * With several reader threads, one may hold a datagram whose slot is LIVE
 * while another read owes one too many, and nothing in the kernel (without
 * fentry) says which: such a socket stays unnamed after an overflow, its
 * reads counted ambiguous. When a read finds it drained, every LIVE slot is
 * a dequeued datagram's: they are written out as well, and the window
 * emptied, but the socket stays incomplete, so that a read still in flight
 * with one of them is never named (it returns ambiguous, and nothing of it
 * is left to write twice). Without this they left with the socket,
 * uncounted (and, written only in sight, were given up). Where only `owed`
 * is in doubt (owed_unsure), the counts are reset once no slot is LIVE and
 * none is missing: then no read can be in flight with a datagram the slots
 * know. Lock held. */
static __always_inline void resync_slots(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					 const struct udp_read_in *in, struct cpu_state *cs,
					 struct udp_resync_out *ro)
{
	if (!(st->incomplete || st->owed_unsure) || !in->quiet || in->head || !look_fresh(st, in))
		return;
	if (st->readers_many && !st->incomplete && (st->live || st->missing))
		return;
	write_stale(st, slots, mask, cs, ro);
	if (st->readers_many && st->incomplete) {
		empty_window(st);
		return;
	}
	/* A reset that emptied LIVE slots or lost datagrams may have taken a
	 * datagram from a read still in flight: a thread that never read the
	 * socket, so readers_many did not stop the reset (one whose unsure
	 * debt came from a first read, read.bpf.h udp_first_read). From then
	 * on other threads' reads are never named (decide.h read_frontier). A
	 * reset with nothing live and nothing missing wrote nothing out. */
	st->resynced |= st->incomplete | (__u32)ne_bit(st->live, 0);
	empty_window(st);
	st->missing = 0;
	st->incomplete = 0;
	st->owed_unsure = 0;
	st->drops_unsure = 0;
}

/* The head passes slots that are done; an empty socket goes back to its
 * inline slots. Lock held. */
static __always_inline void advance_head(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask)
{
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (st->head == st->tail)
			break;
		if ((&slots[st->head & mask])->state != SLOT_DONE)
			break;
		st->head++;
	}
	if (st->head == st->tail)
		st->big = 0;
}

#endif /* NETLATD_UDP_ORDER_RETIRE_H */
