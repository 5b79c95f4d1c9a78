/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a UDP read's turn under its socket's lock, by queue
 * order: the decision (decide.h), then the datagrams of ambiguous reads
 * written out, the slots resynced and the head moved on (retire.h); or, for
 * a read that found no state, what it owes. Plain C,
 * as the headers it uses: the unit tier's checker (tests/unit/order/) drives
 * this same code through every interleaving of small scenarios. */
#ifndef NETLATD_UDP_ORDER_LOCKED_H
#define NETLATD_UDP_ORDER_LOCKED_H

/* A UDP read's decision under its socket's lock, on the slots in use. */
static __always_inline int udp_decide_on(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					 const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp,
					 struct udp_resync_out *ro)
{
	int r;
	if (!st->reader_tid)
		st->reader_tid = in->tid;
	else if (st->reader_tid != in->tid)
		st->readers_many = 1;
	r = decide_by_order(st, slots, mask, in, cs, hp);
	/* The decision and the head as numbers the verifier does not know:
	 * each outcome would otherwise be a walk of its own through all that
	 * follows under the lock (942k instructions of its 1M budget on 6.18,
	 * 375k with these). */
	__u64 o = opaque_on(cs, ((__u64)hp->kind << 48) | ((__u64)(__u32)r << 32) | hp->idx, SCRATCH_RECV);
	r = (int)((o >> 32) & 0xffff);
	hp->kind = (enum head_kind)(o >> 48);
	hp->idx = (__u32)o;
	retire_marked(st, slots, mask, in, cs, hp);
	resync_slots(st, slots, mask, in, cs, ro);
	advance_head(st, slots, mask);
	return r;
}

/* A read that found its socket without state: no data-ready call of ours
 * had run for it when it looked, so it took a datagram no slot stood for
 * then (read.bpf.h udp_first_read). `quiet`: no producer mid-batch since,
 * so every data-ready call of what was queued has run. If its datagram was
 * queued after netlatd attached, that call ran after the read took it, and
 * left a gone placeholder for it (that call's, or a later one's of the same
 * batch): the read owes it. Counted untracked, the read left it LIVE and
 * owed by no one, a candidate of every later read: none was named again,
 * and neither retirement could run (the unit tier's checker, a fresh
 * socket's first read). Only with no gone placeholder LIVE was it queued
 * before attach, with nothing ever to stand for it: the read owes nothing.
 * With a producer mid-batch, its data-ready call may still be to come.
 * Either debt may be one too many (the placeholder another read's, or the
 * datagram queued before attach after all): the socket is unsure until no
 * slot is left that a read could hold (retire.h resync_slots). Lock held. */
static __always_inline int udp_first_decide(struct udp_sock_state *st, bool quiet)
{
	if (quiet && !st->gone)
		return READ_UNTRACKED;
	st->owed++;
	st->owed_unsure = 1;
	return READ_AMBIGUOUS;
}

/* `ro`: this CPU's buffer for what a resync writes out (NULL: none). */
static __always_inline int udp_decide(struct udp_sock_state *st, struct udp_big_state *big,
				      const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp,
				      struct udp_resync_out *ro)
{
	if (st->big && big)
		return udp_decide_on(st, big->slots, UDP_BIG_SLOTS - 1, in, cs, hp, ro);
	return udp_decide_on(st, st->small, UDP_SMALL_SLOTS - 1, in, cs, hp, ro);
}

#endif /* NETLATD_UDP_ORDER_LOCKED_H */
