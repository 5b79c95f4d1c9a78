/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what every part writes to: the ring of records and
 * each CPU's counts of counters and drops (in its cpu_state, lib/cpu.bpf.h). */
#ifndef NETLATD_LIB_RING_BPF_H
#define NETLATD_LIB_RING_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the daemon before load */
} events SEC(".maps");

/* A block of a CPU's counts (`counters` or `drops`) in its state `cs`
 * (NULL: none): a program that has its CPU's state counts with no lookup. */
#define BLOCK_ON(cs, block)                                                       \
	({                                                                        \
		struct cpu_state *__cs = (struct cpu_state *)(cs);                \
		__cs ? &__cs->counts.block : NULL;                                \
	})
/* This CPU's block, for a program that has not looked its state up: one
 * lookup for all the counts it adds to (BUMP). */
#define BLOCK(block) BLOCK_ON(this_cpu(), block)
/* Add `n` to count `idx` of a block (NULL: nothing). */
#define BUMP(b, idx, n)                                                           \
	do {                                                                      \
		__u32 __i = (idx);                                                \
		if ((b) && __i < sizeof((b)->v) / sizeof((b)->v[0]))             \
			(b)->v[__i] += (n);                                       \
	} while (0)
/* Add to count `idx` of a block of the CPU's counts. */
#define ADD_ON(cs, block, idx, n)                                                 \
	do {                                                                      \
		typeof(BLOCK_ON(cs, block)) __b = BLOCK_ON(cs, block);            \
		BUMP(__b, idx, n);                                                \
	} while (0)
#define ADD(block, idx, n) ADD_ON(this_cpu(), block, idx, n)
#define COUNT_ON(cs, block, idx) ADD_ON(cs, block, idx, 1)
#define COUNT(block, idx) ADD(block, idx, 1)

#endif /* NETLATD_LIB_RING_BPF_H */
