/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: --count-ops, what the programs do per packet in
 * operations a host's speed does not change: lock pairs, ring reservations,
 * map lookups and updates, clock reads (enum netlatd_op, abi.h).
 *
 * Each helper of those is redefined here as a macro that counts, then calls
 * the helper: every call site of bpf/ is counted, present and future, with
 * no change at the call (a function-like macro does not expand inside its
 * own expansion, so the helper itself is still what is called). Included
 * after bpf_helpers.h and before any header with code.
 *
 * Off (the default), targ_count_ops is a constant of the frozen rodata: the
 * verifier drops the counting branch, and a run pays nothing for it. On, the
 * counts are atomic adds to one global array: a counting run's timing means
 * nothing, its counts are the point. */
#ifndef NETLATD_LIB_OPS_BPF_H
#define NETLATD_LIB_OPS_BPF_H

const volatile bool targ_count_ops = false;
__u64 op_counts[NETLATD_OP_COUNT] = {};

static __always_inline void count_op(__u32 op)
{
	if (targ_count_ops && op < NETLATD_OP_COUNT)
		__sync_fetch_and_add(&op_counts[op], 1);
}

#define bpf_spin_lock(lock) (count_op(NETLATD_OP_LOCK_PAIRS), bpf_spin_lock(lock))
#define bpf_ringbuf_reserve(ring, size, flags) (count_op(NETLATD_OP_RING_RESERVES), bpf_ringbuf_reserve(ring, size, flags))
#define bpf_ringbuf_output(ring, data, size, flags) \
	(count_op(NETLATD_OP_RING_RESERVES), bpf_ringbuf_output(ring, data, size, flags))
#define bpf_map_lookup_elem(map, key) (count_op(NETLATD_OP_MAP_LOOKUPS), bpf_map_lookup_elem(map, key))
#define bpf_sk_storage_get(map, sk, value, flags) \
	(count_op(NETLATD_OP_MAP_LOOKUPS), bpf_sk_storage_get(map, sk, value, flags))
#define bpf_task_storage_get(map, task, value, flags) \
	(count_op(NETLATD_OP_MAP_LOOKUPS), bpf_task_storage_get(map, task, value, flags))
#define bpf_map_update_elem(map, key, value, flags) \
	(count_op(NETLATD_OP_MAP_UPDATES), bpf_map_update_elem(map, key, value, flags))
#define bpf_map_delete_elem(map, key) (count_op(NETLATD_OP_MAP_UPDATES), bpf_map_delete_elem(map, key))
#define bpf_ktime_get_ns() (count_op(NETLATD_OP_CLOCK_READS), bpf_ktime_get_ns())
#define bpf_ktime_get_boot_ns() (count_op(NETLATD_OP_CLOCK_READS), bpf_ktime_get_boot_ns())

#endif /* NETLATD_LIB_OPS_BPF_H */
