/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a UDP data-ready call's walk of its socket's queues,
 * where only queue order names reads: from the newest datagram back, for the
 * oldest that has no slot yet (queue.bpf.h pushes what it finds). */
#ifndef NETLATD_UDP_ORDER_WALK_BPF_H
#define NETLATD_UDP_ORDER_WALK_BPF_H

/* The walk of a data-ready call, from the newest datagram back, for the
 * oldest one that has no slot yet (a bpf_loop callback). It stops at one that
 * has a slot: datagrams get their slots in queue order, so every older one
 * has one too.
 *
 * What a step changes is kept as numbers the verifier does not know
 * (opaque_on): it checks a bpf_loop by walking the callback again until the
 * state at the call repeats, and each field known on one step and not on
 * the next (which queue, the flags, the first key, a typed pointer) made
 * every call some 35 walks of the step and of all that follows the loop:
 * 97,329 instructions walked on 6.18, ~90 ms of each start; 25,121 so. */
struct mirror_walk {
	struct cpu_state *cs;       /* this CPU's, looked up once by the data-ready call */
	struct udp_sock_state *st;  /* its slots are a racy view: checked again under the lock */
	struct udp_big_state *big;  /* the big slots, while the socket uses them */
	struct sk_buff_head *readq; /* walked after the receive queue, if that had no slot */
	__u64 rq_at;                /* the receive queue's head, as a number */
	__u64 readq_at;             /* the reader queue's head, as a number */
	__u64 at;                   /* the datagram the walk stands on, as a number; 0: dequeued */
	__u64 oldest_key;           /* the oldest without a slot so far, 0 = none */
	__u64 flags;                /* MIRROR_DONE, MIRROR_DEQUEUED */
};
#define MIRROR_DONE 1           /* stopped at a slot, or at the start of the queues */
#define MIRROR_DEQUEUED 2       /* reached a datagram a read took under the walk */

static long mirror_step(__u32 i, struct mirror_walk *w)
{
	struct cpu_state *cs = w->cs;
	__u64 at = w->at;
	if (!at) {
		/* A read dequeued the one the walk stood on, which had no slot:
		 * the oldest datagram without a slot, it or an older one, is
		 * already dequeued. */
		w->flags = opaque_on(cs, MIRROR_DONE | MIRROR_DEQUEUED, SCRATCH_QUEUE);
		return 1;
	}
	/* The start of a queue: from the receive queue's, on to the reader
	 * queue's tail; the reader queue's start is the start of both. A walk
	 * inside the receive queue while the reader splices it into its own
	 * goes on inside the reader queue, and meets that start. */
	if (at == w->readq_at) {
		w->flags = opaque_on(cs, MIRROR_DONE, SCRATCH_QUEUE);
		return 1;
	}
	if (at == w->rq_at) {
		w->at = ptr_value_on(cs, w->readq->prev, SCRATCH_QUEUE);
		return 0;
	}
	/* A racy view of the window, like the rest of the walk. */
	__u32 tail = w->st->tail, n = tail - w->st->head;
	n = n > UDP_SCAN ? UDP_SCAN : n;
	int slot = w->big ? recent_big_slot(&w->big->slots, tail - n, n, at)
			  : recent_small_slot(&w->st->small, tail - n, n, at);
	if (!stash_has(at) && slot >= 0) {
		w->flags = opaque_on(cs, MIRROR_DONE, SCRATCH_QUEUE);
		return 1;
	}
	w->oldest_key = at;
	struct sk_buff *skb = bpf_core_cast((void *)at, struct sk_buff);
	w->at = ptr_value_on(cs, skb->prev, SCRATCH_QUEUE);
	return 0;
}

/* The walk's outcome without the walk, in the common case of a reader that
 * keeps up: the newest datagram, tracked (in the stash), alone on the
 * receive queue, and the reader queue empty. The walk would take it as the
 * oldest without a slot (a tracked one never has one: the push takes its
 * entry), step to the receive queue's start, on to the reader queue's, and
 * stop there: the same loads in the same order, here straight, where the walk
 * pays for bpf_loop and three calls of its step. False: walk. */
static __always_inline bool mirror_alone(struct mirror_walk *w)
{
	struct cpu_state *cs = w->cs;
	__u64 at = w->at;
	if (!at || at == w->readq_at || at == w->rq_at || !stash_has(at))
		return false;
	struct sk_buff *skb = bpf_core_cast((void *)at, struct sk_buff);
	if (ptr_value_on(cs, skb->prev, SCRATCH_QUEUE) != w->rq_at ||
	    ptr_value_on(cs, w->readq->prev, SCRATCH_QUEUE) != w->readq_at)
		return false;
	w->oldest_key = at;
	w->flags = opaque_on(cs, MIRROR_DONE, SCRATCH_QUEUE);
	return true;
}

#endif /* NETLATD_UDP_ORDER_WALK_BPF_H */
