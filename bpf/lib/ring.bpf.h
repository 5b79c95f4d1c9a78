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

/* Add to count `idx` of this CPU's block of a counter map (`counters`,
 * `drops`: one element, a block of counts). */
#define ADD(map, idx, n)                                                          \
	do {                                                                      \
		__u32 __zero = 0, __i = (idx);                                    \
		typeof(*map.value) *__b = bpf_map_lookup_elem(&map, &__zero);     \
		if (__b && __i < sizeof(__b->v) / sizeof(__b->v[0]))             \
			__b->v[__i] += (n);                                       \
	} while (0)
#define COUNT(map, idx) ADD(map, idx, 1)

#endif /* NETLATD_LIB_RING_BPF_H */
