// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bench/floor.bpf.c: the physical floor of netlatd's design on a host.
 *
 * nlbench-floor (bench/floor.cpp) attaches one of these programs at every hook
 * netlatd's plan chose on the running kernel, with the same attach kind; the
 * target is set at load time (bpf_program__set_attach_target), so one program
 * per kind and flavour serves every hook. Two flavours:
 *
 *   *_empty  returns at once: what the kernel charges for running a program
 *            at that hook (the trampoline or tracepoint call, the statistics);
 *   *_clock  reads the clock once (bpf_ktime_get_ns), as every netlatd hook
 *            that stamps a packet must: on a VM the clock read is often the
 *            dearest thing a small program does.
 *
 * netlatd's own per-hook and per-round-trip figures are reported as ratios to
 * these (docs/BENCHMARKS.md).
 *
 * And what single operations cost at one hook on this host (--flavour
 * primitives: five programs side by side at the receive return, each with
 * its own run-time statistics): nothing, one clock read, one atomic add to
 * this CPU's cell, the same add with IRQs saved and restored around it (the
 * bpf_local_irq_save kfunc, 6.14+), and the same add under a bpf_spin_lock,
 * which saves and restores IRQs too: netlatd takes a socket's lock at each
 * datagram's enqueue and at its read.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The clock's value must not be dropped: the call stays (helpers are opaque
 * to clang), and this keeps the result live without a store to memory. */
static __always_inline void read_clock_once(void)
{
	__u64 t = bpf_ktime_get_ns();
	asm volatile("" ::"r"(t));
}

/* Both flavours for one attach kind: <kind>_empty and <kind>_clock, in the
 * section libbpf knows the kind by (the target is set before load). */
#define FLOOR_PROGRAMS(kind)                             \
	SEC(#kind) int kind##_empty(void *ctx) { return 0; } \
	SEC(#kind) int kind##_clock(void *ctx)               \
	{                                                    \
		read_clock_once();                           \
		return 0;                                    \
	}

FLOOR_PROGRAMS(tp_btf)
FLOOR_PROGRAMS(fentry)
FLOOR_PROGRAMS(fexit)

/* One cell per CPU (up to 256), so that no two CPUs share a lock: netlatd's
 * per-socket locks are mostly taken by one CPU at a time. */
struct cell {
	struct bpf_spin_lock lock;
	__u64 n;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct cell);
} cells SEC(".maps");

/* Weak: kernels before 6.14 lack them, and the other programs must still
 * load there (nlbench-floor leaves prim_irq out where vmlinux has none). */
extern void bpf_local_irq_save(unsigned long *flags) __ksym __weak;
extern void bpf_local_irq_restore(unsigned long *flags) __ksym __weak;

static __always_inline struct cell *this_cell(void)
{
	__u32 cpu = bpf_get_smp_processor_id() & 255;
	return bpf_map_lookup_elem(&cells, &cpu);
}

/* The primitives beyond the floor's own two flavours, which stand for
 * "nothing" and "one clock read" among them. */
#define PRIMITIVE_PROGRAMS(kind)                               \
	SEC(#kind) int kind##_prim_atomic(void *ctx)               \
	{                                                      \
		struct cell *c = this_cell();                  \
		if (c)                                         \
			__sync_fetch_and_add(&c->n, 1);        \
		return 0;                                      \
	}                                                      \
	SEC(#kind) int kind##_prim_irq(void *ctx)                  \
	{                                                      \
		struct cell *c = this_cell();                  \
		unsigned long flags;                           \
		if (!c || !bpf_ksym_exists(bpf_local_irq_save)) \
			return 0;                              \
		bpf_local_irq_save(&flags);                    \
		__sync_fetch_and_add(&c->n, 1);                \
		bpf_local_irq_restore(&flags);                 \
		return 0;                                      \
	}                                                      \
	SEC(#kind) int kind##_prim_lock(void *ctx)                 \
	{                                                      \
		struct cell *c = this_cell();                  \
		if (!c)                                        \
			return 0;                              \
		bpf_spin_lock(&c->lock);                       \
		c->n++;                                        \
		bpf_spin_unlock(&c->lock);                     \
		return 0;                                      \
	}

PRIMITIVE_PROGRAMS(tp_btf)
PRIMITIVE_PROGRAMS(fexit)
