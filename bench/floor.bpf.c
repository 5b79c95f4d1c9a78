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
