/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the stash, where a UDP datagram's stamps wait between
 * netif_receive_skb and its socket (or, where the kernel names reads, its
 * read), at a set chosen by its skb address. */
#ifndef NETLATD_FILTER_STASH_BPF_H
#define NETLATD_FILTER_STASH_BPF_H

/* UDP datagrams between netif_receive_skb and their socket's queue, at a set
 * chosen by their skb address (stash_set_of below). A global array rather
 * than a map: a socket's lock region may look entries up (no helper calls are
 * allowed there), and the daemon maps it to expire stale ones. In a section
 * of its own, the last and only variable there, so that the daemon can size
 * it before load (bpf_map__set_value_size, --stash-entries): declared with
 * one set, it has targ_stash_set_mask + 1 once loaded. An entry is named by
 * its datagram's skb address and its way in that address's set. */
struct netlatd_stash_set stash[1] SEC(".data.stash") __attribute__((aligned(64)));

#define STASH_WAY(w) ((w) & (NETLATD_STASH_WAYS - 1))

/* The set where `skb` may be: several ways, so that datagrams queued unread
 * whose addresses map alike each keep an entry. skb heads are 256-byte slab
 * objects: the set is the address's object number, so that neighbours in a
 * slab page are neighbours here, and the sets in use share few pages. A hash
 * of the address spread them over the whole table: a cache and TLB miss on
 * most packets. The mask is frozen rodata, a known constant to the verifier:
 * the offset is bounded by the size the daemon gave the section. The base
 * goes through a barrier: indexing an array declared with one element, clang
 * may take every index for 0 (any other would be past its end) and drop it. */
static __always_inline struct netlatd_stash_set *stash_set_of(__u64 skb)
{
	struct netlatd_stash_set *base = stash;
	barrier_var(base);
	return base + ((ptr_low32(skb) >> 8) & targ_stash_set_mask);
}

/* The way of `skb`'s set that holds it, or -1. Reads the set's first line
 * only. No helper calls: usable under a lock. */
static __always_inline int stash_way(__u64 skb)
{
	struct netlatd_stash_set *set = stash_set_of(skb);
#pragma unroll
	for (int w = 0; w < (int)NETLATD_STASH_WAYS; w++)
		if (set->skb[w] == skb)
			return w;
	return -1;
}

static __always_inline bool stash_has(__u64 skb) { return stash_way(skb) >= 0; }

/* Marks a way of the set of `skb` busy for the caller, and returns it: the
 * one an earlier packet at this address still holds (never queued nor seen
 * dropped: it is lost), else a free one; when none is free, the one whose
 * packet came first among those not queued (most likely one that never
 * reached a socket), else among all: where the kernel names reads, a queued
 * entry waits for its read, and taking it loses a datagram about to be read.
 * Taking an entry that held a packet counts that packet as unjoined. -1 if
 * the chosen one is being written by another CPU this instant. */
static __always_inline int stash_take(__u64 skb)
{
	struct netlatd_stash_set *set = stash_set_of(skb);
	int same = stash_way(skb);
	if (same >= 0 && __sync_val_compare_and_swap(&set->skb[STASH_WAY(same)], skb, NETLATD_STASH_BUSY) == skb) {
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return same;
	}
#pragma unroll
	for (int w = 0; w < (int)NETLATD_STASH_WAYS; w++)
		if (set->skb[w] == NETLATD_STASH_FREE &&
		    __sync_val_compare_and_swap(&set->skb[w], NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
			return w;
	/* Full: the receive stamps are read only now. Not queued first: their
	 * age counts from 0, a queued one's from 2^63. */
	int oldest = 0;
	__u64 oldest_ns = ~0ULL;
#pragma unroll
	for (int w = 0; w < (int)NETLATD_STASH_WAYS; w++) {
		__u64 age_key = set->rx[w].receive_ns | (set->queued_ns[w] ? 1ULL << 63 : 0);
		if (age_key < oldest_ns) {
			oldest_ns = age_key;
			oldest = w;
		}
	}
	__u64 old = __sync_lock_test_and_set(&set->skb[STASH_WAY(oldest)], NETLATD_STASH_BUSY);
	if (old == NETLATD_STASH_BUSY)
		return -1; /* another CPU is filling it right now; it keeps it */
	if (old != NETLATD_STASH_FREE)
		COUNT(drops, NETLATD_DROP_UNJOINED);
	return oldest;
}

/* Takes the entry of `skb` at `way` for the caller: exactly one of several
 * CPUs racing for one packet wins. Read the entry before claiming it: a
 * writer marks it busy before changing it, which makes a later claim fail. */
static __always_inline bool stash_claim(__u64 skb, int way)
{
	return __sync_val_compare_and_swap(&stash_set_of(skb)->skb[STASH_WAY(way)], skb, NETLATD_STASH_FREE) == skb;
}

#endif /* NETLATD_FILTER_STASH_BPF_H */
