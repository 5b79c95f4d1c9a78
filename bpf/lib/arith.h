/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: arithmetic in plain C, which the unit tier's checker
 * of udp/order/'s rules compiles on the host too. */
#ifndef NETLATD_LIB_ARITH_H
#define NETLATD_LIB_ARITH_H

/* How long before `now` the instant `then` was, as a nonzero 32-bit count of
 * nanoseconds; 0 when `then` is 0 (not seen), later than `now`, or 4 s or
 * more before it. */
static __always_inline __u32 before(__u64 now, __u64 then)
{
	if (!then || then > now || now - then > 0xffffffffULL)
		return 0;
	return now - then ? (__u32)(now - then) : 1;
}

#endif /* NETLATD_LIB_ARITH_H */
