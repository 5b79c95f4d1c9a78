/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the stash, where a UDP datagram's stamps wait between
 * netif_receive_skb and its socket (or, where the kernel names reads, its
 * read), at a set chosen by its skb address. */
#ifndef NETLATD_FILTER_STASH_BPF_H
#define NETLATD_FILTER_STASH_BPF_H

/* UDP datagrams between netif_receive_skb and their socket's queue, at a set
 * chosen by their skb address (stash_set below). A global array rather than a
 * map: a socket's lock region may look entries up (no helper calls are
 * allowed there), and the daemon maps .bss to expire stale ones. */
struct netlatd_stash_entry stash[1 << NETLATD_STASH_BITS] __attribute__((aligned(64)));

/* The first of the two entries (a set) where `skb` may be: two-way, so two
 * packets in flight at once that map alike both keep an entry. skb heads are
 * 256-byte slab objects, and a host's receive path recycles a few dozen of
 * them: the set is the address's object number, so that neighbours in a slab
 * page are neighbours here, and the few entries in use share a few pages and
 * lines. A hash of the address spread them over the whole table: a cache and
 * TLB miss on most packets, the costliest load of netif_receive_skb. */
static __always_inline __u32 stash_set(__u64 skb)
{
	return (ptr_low32(skb) >> 7) & ~1U;
}

static __always_inline struct netlatd_stash_entry *stash_at(__u32 idx)
{
	return &stash[idx & ((1 << NETLATD_STASH_BITS) - 1)];
}

/* The entry of `skb`, if it is there. No helper calls: usable under a lock. */
static __always_inline struct netlatd_stash_entry *stash_find(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *e = stash_at(idx);
	if (e->skb == skb)
		return e;
	e = stash_at(idx | 1);
	return e->skb == skb ? e : NULL;
}

/* Marks an entry of the set of `skb` busy for the caller: the one an earlier
 * packet at this address still holds (never queued nor seen dropped: it is
 * lost), else a free one; when neither is free, the one whose packet came
 * first (most likely one that never reached a socket). Taking an entry that
 * held a packet counts that packet as unjoined. NULL if both are being written
 * by other CPUs this instant. */
static __always_inline struct netlatd_stash_entry *stash_take(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *a = stash_at(idx), *b = stash_at(idx | 1);
	struct netlatd_stash_entry *same = a->skb == skb ? a : b->skb == skb ? b : NULL;
	if (same && __sync_val_compare_and_swap(&same->skb, skb, NETLATD_STASH_BUSY) == skb) {
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return same;
	}
	if (a->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&a->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return a;
	if (b->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&b->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return b;
	struct netlatd_stash_entry *victim = a->rx.receive_ns <= b->rx.receive_ns ? a : b;
	__u64 old = __sync_lock_test_and_set(&victim->skb, NETLATD_STASH_BUSY);
	if (old == NETLATD_STASH_BUSY)
		return NULL; /* another CPU is filling it right now; it keeps it */
	if (old != NETLATD_STASH_FREE)
		COUNT(drops, NETLATD_DROP_UNJOINED);
	return victim;
}

/* Takes the entry for the caller: exactly one of several CPUs racing for one
 * packet wins. Read the entry before claiming it: a writer marks it busy
 * before changing it, which makes a later claim fail. */
static __always_inline bool stash_claim(struct netlatd_stash_entry *e, __u64 skb)
{
	return __sync_val_compare_and_swap(&e->skb, skb, NETLATD_STASH_FREE) == skb;
}

#endif /* NETLATD_FILTER_STASH_BPF_H */
