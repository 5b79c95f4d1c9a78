/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what every part writes to: the ring of records and
 * the per-CPU counts of counters and drops. */
#ifndef NETLATD_LIB_RING_BPF_H
#define NETLATD_LIB_RING_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the daemon before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netlatd_drop_block);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netlatd_counter_block);
} counters SEC(".maps");

/* This CPU's block of a counter map (`counters`, `drops`: one element, a
 * block of counts), for a program that adds to several of its counts: one
 * lookup for all of them (BUMP). */
#define BLOCK(map)                                                                \
	({                                                                        \
		__u32 __zero = 0;                                                 \
		(typeof(*map.value) *)bpf_map_lookup_elem(&map, &__zero);         \
	})
/* Add `n` to count `idx` of a block (NULL: nothing). */
#define BUMP(b, idx, n)                                                           \
	do {                                                                      \
		__u32 __i = (idx);                                                \
		if ((b) && __i < sizeof((b)->v) / sizeof((b)->v[0]))             \
			(b)->v[__i] += (n);                                       \
	} while (0)
/* Add to count `idx` of this CPU's block of a counter map. */
#define ADD(map, idx, n)                                                          \
	do {                                                                      \
		typeof(*map.value) *__b = BLOCK(map);                             \
		BUMP(__b, idx, n);                                                \
	} while (0)
#define COUNT(map, idx) ADD(map, idx, 1)

#endif /* NETLATD_LIB_RING_BPF_H */
