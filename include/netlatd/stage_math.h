/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The stage math, one source for both sides: the kernel side's --aggregate
 * (bpf/aggregate/aggregate.bpf.h) and the daemon (src/model/stages.cpp,
 * histogram.cpp; src/kernel/tracer.cpp for the series). Which stamps bound
 * each stage, whether a record's stamps are in order, where the reader's read
 * started, the histogram bucket of a duration, and the series of
 * --aggregate's breakdown.
 *
 * Plain C that C++ compiles too: no BPF helper, map or kfunc. The BPF side
 * includes it after vmlinux.h, which defines the __u64 family there.
 * Stamps are nanoseconds, 0 = not seen.
 */
#ifndef NETLATD_STAGE_MATH_H
#define NETLATD_STAGE_MATH_H

#ifndef __bpf__
#include <linux/types.h>
#endif
#include "netlatd/abi.h"

/* Inlined into the BPF programs (a call would be a frame of its own, and
 * 6.1 counts each against the receive return's 512 bytes). */
#define NETLATD_STAGE_MATH_FN static inline __attribute__((always_inline))

/* The stamps of a record's path, in the order they must come, then the
 * reader's two stamps that are not on it (they may come before the packet:
 * the read start stands for them). */
enum netlatd_path_stamp {
	NETLATD_PATH_IRQ,
	NETLATD_PATH_RAISE,
	NETLATD_PATH_ENTRY,
	NETLATD_PATH_RECEIVE,
	NETLATD_PATH_QUEUED,
	NETLATD_PATH_WAKEUP,
	NETLATD_PATH_READ_START,
	NETLATD_PATH_COPY,
	NETLATD_PATH_RETURN,
	NETLATD_PATH_LEN, /* the stamps above are the path */
	NETLATD_PATH_SWITCH_IN = NETLATD_PATH_LEN,
	NETLATD_PATH_CALL_START,
	NETLATD_PATH_STAMPS
};

/* A stage not known: a stamp missing, or its end before its start. */
#define NETLATD_SPAN_NONE (~0ULL)

NETLATD_STAGE_MATH_FN __u64 netlatd_span(__u64 start, __u64 end)
{
	if (!start || !end || end < start)
		return NETLATD_SPAN_NONE;
	return end - start;
}

/* The stamps that bound each stage but the total: X(stage, from, to), in the
 * order of enum class Stage (include/netlatd/model/stages.hpp), which is the
 * order of the kernel side's blocks (NETLATD_AGG_STAGES). */
#define NETLATD_STAGE_BOUNDS(X)                                    \
	X(0, NETLATD_PATH_IRQ, NETLATD_PATH_ENTRY)                 \
	X(1, NETLATD_PATH_ENTRY, NETLATD_PATH_RECEIVE)             \
	X(2, NETLATD_PATH_RECEIVE, NETLATD_PATH_QUEUED)            \
	X(3, NETLATD_PATH_QUEUED, NETLATD_PATH_READ_START)         \
	X(4, NETLATD_PATH_READ_START, NETLATD_PATH_RETURN)         \
	X(5, NETLATD_PATH_QUEUED, NETLATD_PATH_RETURN)
/* The total runs from netlatd_total_start to the return. */
#define NETLATD_STAGE_TOTAL 6

/* Where the total starts: the first of these the packet has. lo and veth
 * have no IRQ, and a softirq started by another device's IRQ leaves only
 * the later ones. */
NETLATD_STAGE_MATH_FN __u64 netlatd_total_start(const __u64 *t)
{
	__u64 first = t[NETLATD_PATH_IRQ];
	if (!first)
		first = t[NETLATD_PATH_RAISE];
	if (!first)
		first = t[NETLATD_PATH_ENTRY];
	if (!first)
		first = t[NETLATD_PATH_RECEIVE];
	return first;
}

/* Whether the stamps on the path are in order, those missing skipped. A
 * record that is not is counted, not added. */
NETLATD_STAGE_MATH_FN int netlatd_path_ordered(const __u64 *t)
{
	__u64 latest = 0;
	/* A loop the BPF side's verifier walks as one: unrolled, its stamps
	 * stay in registers across it and spill. */
#ifdef __clang__
#pragma clang loop unroll(disable)
#endif
	for (int i = 0; i < NETLATD_PATH_LEN; i++) {
		__u64 s = t[i];
		if (!s)
			continue;
		if (s < latest)
			return 0;
		latest = s;
	}
	return 1;
}

/* Where the `oncpu` stage starts: the moment the receive call that returned
 * the packet was running for it; 0 when not known (never guessed).
 *  - The socket woke the reader during this call (it slept in the call
 *    waiting for data; known from the call's start, or without one from
 *    NETLATD_PKT_SLEPT_IN_CALL): its switch-in after the wake-up. Even a
 *    call that began after the queue stamp, which some kernels take just
 *    before the datagram is queued.
 *  - The call started after the packet was queued (an event loop, a busy
 *    reader): its start.
 *  - The call was already waiting when the packet was queued: the reader's
 *    switch-in, or the queueing itself if it never switched out during the
 *    call (its switch-in before the call's start, timed or known from
 *    NETLATD_PKT_ON_CPU_BEFORE_CALL).
 * Otherwise unknown: no hook gave the call's start, and the application may
 * have been busy elsewhere between its switch-in and the call. */
NETLATD_STAGE_MATH_FN __u64 netlatd_read_start(__u64 queued, __u64 woke, __u64 sw, __u64 call, __u32 flags)
{
	if (!queued)
		return 0;
	if (woke && (!call || woke >= call) && ((flags & NETLATD_PKT_SLEPT_IN_CALL) || call))
		return sw && sw >= woke ? sw : 0;
	if (!call)
		return 0;
	if (call >= queued)
		return call;
	if (!sw)
		return flags & NETLATD_PKT_ON_CPU_BEFORE_CALL ? queued : 0;
	return sw >= call ? (queued > sw ? queued : sw) : queued;
}

/* Histogram buckets: values below 2^NETLATD_SUB_BUCKET_BITS get one bucket
 * each (exact). A value whose highest set bit is k >= NETLATD_SUB_BUCKET_BITS
 * lies in [2^k, 2^(k+1)), split into 2^NETLATD_SUB_BUCKET_BITS buckets of
 * width 2^(k - NETLATD_SUB_BUCKET_BITS): consecutive powers of two tile the
 * index space without gaps, and every value is known to 1.5625 % of itself. */
#define NETLATD_SUB_BUCKET_BITS 6
#define NETLATD_SUB_BUCKETS (1u << NETLATD_SUB_BUCKET_BITS)

/* The highest set bit of `v` (not 0) by halving, spelled out: BPF has no
 * count of leading zeros, and as a loop, even unrolled, clang keeps more
 * live, and agg_add's frame grew from 12 to 48 bytes, past 6.1's 512 for
 * the receive return's chain (tests/unit/scripts/bpf_stack_check.py). */
NETLATD_STAGE_MATH_FN __u32 netlatd_msb_by_halving(__u64 v)
{
	__u64 x = v;
	__u32 msb = 0;
#define NETLATD_HALVE(half)            \
	do {                           \
		if (x >> (half)) {     \
			x >>= (half);  \
			msb += (half); \
		}                      \
	} while (0)
	NETLATD_HALVE(32);
	NETLATD_HALVE(16);
	NETLATD_HALVE(8);
	NETLATD_HALVE(4);
	NETLATD_HALVE(2);
	NETLATD_HALVE(1);
#undef NETLATD_HALVE
	return msb;
}

/* The same in one instruction where there is one (the daemon records every
 * stage of every packet); the unit test checks the two agree. */
NETLATD_STAGE_MATH_FN __u32 netlatd_msb(__u64 v)
{
#ifdef __bpf__
	return netlatd_msb_by_halving(v);
#else
	return 63u - (__u32)__builtin_clzll(v);
#endif
}

NETLATD_STAGE_MATH_FN __u32 netlatd_bucket_index(__u64 v)
{
	if (v < NETLATD_SUB_BUCKETS)
		return (__u32)v;
	__u32 shift = netlatd_msb(v) - NETLATD_SUB_BUCKET_BITS;
	return shift * NETLATD_SUB_BUCKETS + (__u32)(v >> shift);
}

/* --aggregate's series of a record within its side: the index of its
 * destination port among the watched ones (`port`, -1 when not watched),
 * then its protocol, then its family, each only as `by` (NETLATD_AGG_BY_*)
 * asks. -1: a port not watched, or more series than there are. */
NETLATD_STAGE_MATH_FN int netlatd_series_index(__u32 by, int port, __u32 flags, __u32 nseries)
{
	__u32 idx = 0;
	if (by & NETLATD_AGG_BY_DPORT) {
		if (port < 0)
			return -1;
		idx = port;
	}
	if (by & NETLATD_AGG_BY_PROTO)
		idx = idx * 2 + ((flags & NETLATD_PKT_TCP) ? 1 : 0);
	if (by & NETLATD_AGG_BY_FAMILY)
		idx = idx * 2 + ((flags & NETLATD_PKT_IPV6) ? 1 : 0);
	if (idx >= nseries)
		return -1;
	return idx;
}

/* The inverse, for the daemon reading the kernel side's blocks: the port's
 * index (0 when `by` has no port), whether TCP, whether IPv6. */
NETLATD_STAGE_MATH_FN void netlatd_series_parts(__u32 by, __u32 idx, __u32 *port, int *tcp, int *ipv6)
{
	*ipv6 = 0;
	*tcp = 0;
	if (by & NETLATD_AGG_BY_FAMILY) {
		*ipv6 = idx & 1;
		idx >>= 1;
	}
	if (by & NETLATD_AGG_BY_PROTO) {
		*tcp = idx & 1;
		idx >>= 1;
	}
	*port = (by & NETLATD_AGG_BY_DPORT) ? idx : 0;
}

#endif /* NETLATD_STAGE_MATH_H */
