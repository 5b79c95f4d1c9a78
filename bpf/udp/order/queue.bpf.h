/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a UDP socket's datagrams moved into its slots
 * (slots.h) when its data-ready call (or, on older kernels, the enqueue
 * function's entry) sees them queued, in the order the socket queued them. */
#ifndef NETLATD_UDP_ORDER_QUEUE_BPF_H
#define NETLATD_UDP_ORDER_QUEUE_BPF_H

/* Moves the stash entry of `skb_key` into a new slot (with `gone`, a gone
 * placeholder that keeps the stamps: the datagram was dequeued). False when
 * another CPU moved it first, or, with `seen_at`, when the entry was made at
 * or after that time: a data-ready walk that began then saw a datagram at
 * this address queued, so such an entry is a later datagram's (the one seen
 * was read and freed since, and its address reused). Lock held. */
static __always_inline bool push_tracked(struct udp_sock_state *st, struct udp_big_state *big, __u64 skb_key,
					 __u64 now, __u64 seen_at, bool gone, struct push_counts *pushes)
{
	int way = stash_way(skb_key);
	if (way < 0)
		return false;
	struct netlatd_rx rx;
	__builtin_memcpy(&rx, &stash_set_of(skb_key)->rx[STASH_WAY(way)], sizeof(rx));
	if (seen_at && (__s64)(seen_at - rx.receive_ns) <= 0)
		return false;
	if (!stash_claim(skb_key, way))
		return false;
	push_stamps(st, big, skb_key, &rx, now, gone, pushes);
	return true;
}

/* A data-ready call's first look at the receive queue: its newest datagram,
 * and the clock just before (push_tracked: a stash entry made later is not
 * of a datagram the walk saw). */
struct queue_look {
	__u64 at_ns;
	__u64 newest_at; /* as a number */
	__u64 mine;      /* the datagram this call queued, if certain (call_datagram); 0 = not known */
	__u64 mine_ns;   /* and its receive stamp */
};

/* The datagram this data-ready call queued, when that is certain, else 0.
 * netif_receive_skb's filter counts every packet it sees on this CPU, and
 * keeps the last one's address if the stash took it whole (filter.bpf.h
 * track_udp); a NET_RX run's start, the end of each NAPI poll and each call
 * here set the count back. So in a call inside a NET_RX run, a count of one
 * means the run has taken one packet up the stack since: this call's datagram is
 * it, or was made from it (an encapsulation's inner datagram, a multicast
 * copy: the same arrival). A list of packets (a NIC's GRO batch) passes the
 * filter before any is queued: the count is more than one, and nothing is
 * known. Nor outside a run: netfilter's queue gives a datagram back in a
 * task's context, long after its filter. Each call takes it once. */
static __always_inline void call_datagram(struct cpu_state *cs, int pc, struct queue_look *look)
{
	__u32 seen = cs->ready_seen;
	cs->ready_seen = 0;
	__u64 mine = seen == 1 && cs->ready_skb && net_rx_running(cs, pc) ? cs->ready_skb : 0;
	/* The plain variant knows a NET_RX run only where softirq_exit ends
	 * each one (no preempt count read): elsewhere "in NET_RX" outlasts it. */
	if (pc == PC_NONE && targ_preempt_count)
		mine = 0;
	/* A number the verifier does not know: known 0 on some ways here, it
	 * made it walk the rest of the call twice (348k instructions, not 256k). */
	look->mine = opaque_on(cs, mine, SCRATCH_QUEUE);
	look->mine_ns = cs->ready_ns;
}

/* Whether this CPU alone has received the port's packets for a while. */
static __always_inline bool sole_producer(int pidx, __u64 now)
{
	struct port_producers *pp = &port_prod[pidx & (NETLATD_MAX_PORTS - 1)];
	return pp->last_cpu == bpf_get_smp_processor_id() + 1 && (__s64)(now - pp->mixed_until) > 0;
}

static __always_inline void count_push(struct cpu_state *cs, const struct push_counts *pushes)
{
	if (pushes->lost_order)
		COUNT_ON(cs, drops, NETLATD_DROP_ORDER_LOST);
	if (pushes->pushed + pushes->spilled)
		ADD_ON(cs, counters, NETLATD_CNT_QUEUED, pushes->pushed + pushes->spilled);
	if (pushes->full)
		ADD_ON(cs, drops, NETLATD_DROP_SOCK_FIFO_FULL, pushes->full);
}

static __always_inline struct udp_sock_state *udp_state_create(struct sock *sk)
{
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	/* Two CPUs creating it at once: the one that loses gets NULL. */
	if (!st)
		st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	if (!st)
		COUNT(drops, NETLATD_DROP_SOCK_STATE_FAILED);
	return st;
}

/* A reader more than UDP_BIG_SLOTS datagrams behind: no walk can make a slot,
 * and the walk is what costs (up to UDP_MIRROR_WALK steps that each scan
 * UDP_SCAN slots: ~2-3 us a call under a flood, against ~0.2 us). The slot
 * the call would have made is missing, as the append would say under the
 * lock; the newest datagram, if still in the stash, is claimed, its stamps
 * kept in the socket's spill or counted once (slots.h push_full), not again
 * when its stash entry is reused or expires. True when done.
 *
 * The calls of a batch do not name their datagrams: once the newest is
 * claimed, this call's own is an older one, left in the stash and counted
 * when it expires (unjoined_expired). Counting each call too counted those
 * twice. */
static __always_inline bool slots_full_counted(struct cpu_state *cs, struct sock *sk, struct udp_sock_state *st,
					       struct udp_big_state **big, struct sk_buff_head *rq,
					       const struct queue_look *look, struct push_counts *pushes)
{
	if (!st->big || st->tail - st->head < UDP_BIG_SLOTS)
		return false;
	/* Claimed before the lock (no helper may run under it): if the slots
	 * turn out to have room after all, its stamps are counted lost. */
	struct netlatd_rx rx;
	bool claimed = false;
	struct sk_buff *newest = rq->prev;
	if (newest && (void *)newest != (void *)rq) {
		__u64 key = ptr_value_on(cs, newest, SCRATCH_QUEUE);
		int way = stash_way(key);
		if (way >= 0) {
			__builtin_memcpy(&rx, &stash_set_of(key)->rx[STASH_WAY(way)], sizeof(rx));
			claimed = stash_claim(key, way);
		}
	}
	struct udp_spill_state *spill = claimed ? udp_spill_of(sk) : NULL;
	/* Whatever happens below, the call is done: with room after all (a
	 * read found the socket drained between the look and the lock), its
	 * slot is missing, the socket out of order again. One way on from
	 * here, so that the verifier walks the rest of the call once. */
	if (lock_with_big(sk, st, big)) {
		push_full(st, spill, claimed ? &rx : NULL, look->at_ns, pushes);
		bpf_spin_unlock(&st->lock);
	} else {
		pushes->full += claimed;
	}
	return true;
}

/* Under the lock: the slot a data-ready call makes for what its walk `w`
 * found, begun at `now`: for the oldest datagram without a slot (`skb`), or,
 * if a read took that one, a gone placeholder that keeps the stamps of the
 * datagram at `gone_key` if it never had a slot (seen queued at
 * `gone_seen`). False: another CPU's call made the slot first; look again. */
static __always_inline bool push_found(struct udp_sock_state *st, struct udp_big_state *big,
				       const struct mirror_walk *w, struct sk_buff *skb, __u64 gone_key,
				       __u64 gone_seen, __u64 now, struct push_counts *pushes)
{
	if (!(w->flags & MIRROR_DONE)) {
		/* More datagrams without a slot than the walk reaches: the
		 * oldest is out of sight, and order cannot be kept. */
		mark_missing(st, pushes);
	} else if (!skb || (w->flags & MIRROR_DEQUEUED) || !skb->next) {
		/* A read took the oldest datagram without a slot. The one
		 * the call saw queued, if it never had a slot, keeps its
		 * stamps in the gone placeholder. */
		if (!gone_key || !push_tracked(st, big, gone_key, now, gone_seen, true, pushes))
			push_placeholder(st, big, 0, 0, 0, pushes);
	} else if (stash_has(w->oldest_key)) {
		/* Before any slot of its address: one LIVE there is an
		 * older datagram's (the stash entry goes with the push). */
		return push_tracked(st, big, w->oldest_key, now, now, false, pushes);
	} else if ((st->big && big ? find_recent_slot(st, big->slots, UDP_BIG_SLOTS - 1, w->oldest_key)
				   : find_recent_slot(st, st->small, UDP_SMALL_SLOTS - 1, w->oldest_key)) >= 0) {
		return false; /* another CPU's call made it: look again */
	} else {
		/* Queued with its header pulled (udp_csum_pull_header):
		 * skb->len is the payload's. */
		push_placeholder(st, big, w->oldest_key, skb->len, now, pushes);
	}
	return true;
}

/* Where only queue order says which datagram a read took: every datagram the
 * socket queues gets a slot, so that every datagram a read can have taken has
 * one (docs/JOIN.md). 6.18 calls data-ready once per datagram queued, so each
 * call makes exactly one slot: for the oldest datagram still queued without
 * one (tracked: its stamps; untracked: a placeholder with its length), or, if
 * none is left, a placeholder for the datagram a read took before any call
 * could see it. */
static __always_inline void push_mirrored(struct cpu_state *cs, struct sock *sk, struct udp_sock_state *st,
					  struct sk_buff_head *rq, struct sk_buff_head *readq, struct push_counts *pushes,
					  const struct queue_look *look, __u64 *now_out)
{
	struct udp_big_state *big = udp_big_of(sk, st, st->tail - st->head >= UDP_SMALL_SLOTS - 1);
	if (slots_full_counted(cs, sk, st, &big, rq, look, pushes))
		return;
	for (int attempt = 0; attempt < 3; attempt++) {
		/* Before the walk: a stash entry made later is not of a datagram
		 * it saw (push_tracked). The first walk's is the call's first
		 * look's. */
		__u64 now = attempt ? bpf_ktime_get_ns() : look->at_ns;
		*now_out = now;
		struct mirror_walk w = {.cs = cs, .st = st, .big = st->big ? big : NULL, .readq = readq,
					.rq_at = ptr_value_on(cs, rq, SCRATCH_QUEUE),
					.readq_at = ptr_value_on(cs, readq, SCRATCH_QUEUE),
					.at = ptr_value_on(cs, rq->prev, SCRATCH_QUEUE)};
		/* + 2: the steps over each queue's start */
		if (!mirror_alone(&w))
			bpf_loop(UDP_MIRROR_WALK + 2, mirror_step, &w, 0);
		/* Typed again from its number (sk_data_ready came in 6.5, the
		 * cast in 6.2): a pointer the walk carried would make each step
		 * two states for the verifier, before and after it found one. */
		struct sk_buff *skb = w.oldest_key ? bpf_core_cast((void *)w.oldest_key, struct sk_buff) : NULL;
		/* Whose stamps a gone placeholder may keep: the datagram the walk
		 * chose (if dequeued by the lock, below), or with nothing left to
		 * slot, the newest of the call's first look if a read took it
		 * since (dequeued now, dequeued at the lock), else this call's
		 * own datagram if known (call_datagram): nothing is left without
		 * a slot, so it was dequeued, unless another call slotted it (its
		 * entry is claimed then). Only its own entry: one at its address
		 * made after its receive stamp is a later datagram's (made after
		 * it was freed). As numbers the verifier does not know: one walk
		 * of what follows, not three. */
		__u64 gone_key = w.oldest_key, gone_seen = now;
		if (!gone_key) {
			gone_key = look->mine;
			gone_seen = look->mine_ns + 1;
			if (look->newest_at != w.rq_at) {
				struct sk_buff *first = bpf_core_cast((void *)look->newest_at, struct sk_buff);
				if (!first->next) {
					gone_key = look->newest_at;
					gone_seen = look->at_ns;
				}
			}
		}
		gone_key = opaque_on(cs, gone_key, SCRATCH_QUEUE);
		gone_seen = opaque_on(cs, gone_seen, SCRATCH_QUEUE);
		if (!lock_with_big(sk, st, &big))
			return;
		bool made = push_found(st, big, &w, skb, gone_key, gone_seen, now, pushes);
		bpf_spin_unlock(&st->lock);
		if (made)
			return;
	}
	/* Still racing with other CPUs' calls for the oldest datagram without a
	 * slot: every call makes exactly one slot, so that the slots count the
	 * datagrams; a dequeued one's placeholder stands for whichever datagram
	 * ends up without a slot of its own (placeholders are interchangeable:
	 * unknown length, a candidate wherever they sit). */
	if (lock_with_big(sk, st, &big)) {
		push_placeholder(st, big, 0, 0, 0, pushes);
		bpf_spin_unlock(&st->lock);
	}
}

/* UDP data-ready (6.5+ tracepoint): the datagram is already on a queue.
 * `pc`: see net_rx_running. */
static __always_inline int on_sk_data_ready(struct sock *sk, int pc)
{
	ARM(ARMED_SOCK_QUEUE);
	if (sk->sk_protocol != IPPROTO_UDP)
		return 0;
	int pidx = port_index(sk->__sk_common.skc_num);
	if (pidx < 0)
		return 0;
	/* The queue's newest datagram, first of all: if a read takes it
	 * before the walk below, its address is still known from here, and
	 * its stamps go into the gone placeholder of this call
	 * (push_stamps). One a read took before this look leaves nothing
	 * to tie them to. The lookups below take about as long as the
	 * kernel's own way here from the queueing. */
	__u64 look_ns = bpf_ktime_get_ns();
	struct sk_buff *newest = sk->sk_receive_queue.prev;
	struct sk_buff_head *rq = &sk->sk_receive_queue;
	struct udp_sock *up = bpf_core_cast(sk, struct udp_sock);
	struct sk_buff_head *readq = &up->reader_queue;
	struct push_counts pushes = {};
	struct udp_sock_state *st;
	__u64 now = 0; /* the clock read of the push, reused for the wake hint */
	/* Where the kernel names reads, the enqueue is fentry's (the plan takes
	 * the join by skb only with it): this tracepoint is not attached. */
	if (targ_udp_join == UDP_JOIN_CONSUME)
		return 0;
	/* Once for the whole call: the walk's scratch words and the wake hint. */
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	st = udp_state_create(sk);
	if (!st)
		return 0;
	struct queue_look look = {.at_ns = look_ns, .newest_at = ptr_value_on(cs, newest, SCRATCH_QUEUE)};
	call_datagram(cs, pc, &look);
	push_mirrored(cs, sk, st, rq, readq, &pushes, &look, &now);
	count_push(cs, &pushes);
	/* Something pushed: the push read the clock. */
	if (pushes.pushed)
		leave_wake_hint(cs, sk, now ? now : bpf_ktime_get_ns());
	return 0;
}

/* UDP enqueue on kernels without sock:sk_data_ready, at its entry (fentry):
 * before the datagram is queued and before the wake-up the call makes, so the
 * slot exists before any read can take the datagram. A datagram the call then
 * drops (receive buffer full) is marked by on_udp_enqueue_failed. */
static __always_inline int on_udp_enqueue_entry(struct sock *sk, struct sk_buff *skb)
{
	ARM(ARMED_SOCK_QUEUE);
	__u64 key = (__u64)skb;
	if (targ_udp_join == UDP_JOIN_CONSUME)
		return stamp_queued(sk, key);
	if (!stash_has(key))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct udp_sock_state *st = udp_state_create(sk);
	if (!st)
		return 0;
	struct udp_big_state *big = udp_big_of(sk, st, st->tail - st->head >= UDP_SMALL_SLOTS - 1);
	struct push_counts pushes = {};
	if (!lock_with_big(sk, st, &big))
		return 0;
	push_tracked(st, big, key, now, 0, false, &pushes);
	bpf_spin_unlock(&st->lock);
	struct cpu_state *cs = this_cpu();
	count_push(cs, &pushes);
	if (cs && pushes.pushed) {
		cs->pushed_skb = key; /* for on_udp_enqueue_failed */
		leave_wake_hint(cs, sk, now);
	}
	return 0;
}

/* udp:udp_fail_queue_rcv_skb: the enqueue the fentry above saw failed, and
 * the datagram was freed. Its slot, the newest of this socket pushed on this
 * CPU, yields no record. */
static __always_inline int on_udp_enqueue_failed(struct sock *sk)
{
	if (targ_udp_join == UDP_JOIN_CONSUME)
		return 0; /* kfree_skb takes its entry (stamp_queued) */
	struct cpu_state *cs = this_cpu();
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	if (!cs || !st || !cs->pushed_skb)
		return 0;
	struct udp_big_state *big = udp_big_of(sk, st, false);
	__u64 key = cs->pushed_skb;
	cs->pushed_skb = 0;
	bool dropped = false;
	if (!lock_with_big(sk, st, &big))
		return 0;
	for (__u32 i = 1; i <= 4; i++) {
		if (st->tail - st->head < i)
			break;
		struct udp_slot *s = slot_at(st, big, st->tail - i);
		if (s->skb == key && s->state == SLOT_LIVE) {
			slot_done(st, s, 1);
			s->no_record = 1;
			dropped = true;
			break;
		}
	}
	bpf_spin_unlock(&st->lock);
	if (dropped)
		COUNT(drops, NETLATD_DROP_STACK_DROPPED);
	return 0;
}

#endif /* NETLATD_UDP_ORDER_QUEUE_BPF_H */
