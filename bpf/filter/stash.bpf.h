/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the stash, where a UDP datagram's stamps wait between
 * netif_receive_skb and its socket (or, where the kernel names reads, its
 * read), at a set chosen by its skb address. */
#ifndef NETLATD_FILTER_STASH_BPF_H
#define NETLATD_FILTER_STASH_BPF_H

/* UDP datagrams between netif_receive_skb and their socket's queue, at a set
 * chosen by their skb address (stash_set below). A global array rather than a
 * map: a socket's lock region may look entries up (no helper calls are
 * allowed there), and the daemon maps it to expire stale ones. In a section
 * of its own, the last and only variable there, so that the daemon can size
 * it before load (bpf_map__set_value_size, --stash-entries): declared with
 * one entry, it has targ_stash_mask + 1 once loaded. */
struct netlatd_stash_entry stash[1] SEC(".data.stash") __attribute__((aligned(64)));

#define STASH_WAYS (1U << NETLATD_STASH_WAY_BITS)

/* The first of the entries of the set where `skb` may be: several ways, so
 * that datagrams queued unread whose addresses map alike each keep an entry.
 * skb heads are 256-byte slab objects: the set is the address's object
 * number, so that neighbours in a slab page are neighbours here, and the
 * entries in use share few pages and lines. A hash of the address spread them
 * over the whole table: a cache and TLB miss on most packets, the costliest
 * load of netif_receive_skb. */
static __always_inline __u32 stash_set(__u64 skb)
{
	return (ptr_low32(skb) >> (8 - NETLATD_STASH_WAY_BITS)) & ~(STASH_WAYS - 1);
}

/* The entry at `idx` modulo the table's size. The mask is frozen rodata, a
 * known constant to the verifier: the offset is bounded by the size the
 * daemon gave the section. The base goes through a barrier: indexing an array
 * declared with one entry, clang may take every index for 0 (any other would
 * be past its end) and drop it. */
static __always_inline struct netlatd_stash_entry *stash_at(__u32 idx)
{
	struct netlatd_stash_entry *base = stash;
	barrier_var(base);
	return base + (idx & targ_stash_mask);
}

/* The entry of `skb`, if it is there. No helper calls: usable under a lock. */
static __always_inline struct netlatd_stash_entry *stash_find(__u64 skb)
{
	__u32 idx = stash_set(skb);
#pragma unroll
	for (__u32 w = 0; w < STASH_WAYS; w++) {
		struct netlatd_stash_entry *e = stash_at(idx + w);
		if (e->skb == skb)
			return e;
	}
	return NULL;
}

/* Marks an entry of the set of `skb` busy for the caller: the one an earlier
 * packet at this address still holds (never queued nor seen dropped: it is
 * lost), else a free one; when none is free, the one whose packet came first
 * among those not queued (most likely one that never reached a socket),
 * else among all: where the kernel names reads, a queued entry waits for its
 * read, and taking it loses a datagram about to be read. Taking an entry that
 * held a packet counts that packet as unjoined. NULL if the chosen one is
 * being written by another CPU this instant. */
static __always_inline struct netlatd_stash_entry *stash_take(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *same = stash_find(skb);
	if (same && __sync_val_compare_and_swap(&same->skb, skb, NETLATD_STASH_BUSY) == skb) {
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return same;
	}
	__u32 oldest = idx;
	__u64 oldest_ns = ~0ULL;
#pragma unroll
	for (__u32 w = 0; w < STASH_WAYS; w++) {
		struct netlatd_stash_entry *e = stash_at(idx + w);
		if (e->skb == NETLATD_STASH_FREE &&
		    __sync_val_compare_and_swap(&e->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
			return e;
		/* Not queued first: their age counts from 0, a queued one's from 2^63. */
		__u64 age_key = e->rx.receive_ns | (e->queued_ns ? 1ULL << 63 : 0);
		if (age_key < oldest_ns) {
			oldest_ns = age_key;
			oldest = idx + w;
		}
	}
	struct netlatd_stash_entry *victim = stash_at(oldest);
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
