/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* BPF-only helpers for netlatd.bpf.c. User space never includes this file. */
#ifndef NETLATD_BPF_H
#define NETLATD_BPF_H

#ifndef ETH_P_IP
#define ETH_P_IP 0x0800
#endif
#ifndef ETH_P_IPV6
#define ETH_P_IPV6 0x86DD
#endif
#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif
#define NET_RX_SOFTIRQ_NR 3
#define MSG_PEEK_FLAG 2
/* "ksoftirq", the first 8 bytes of ksoftirqd's name, as a little-endian word. */
#define KSOFTIRQ_NAME8 0x71726974666f736bULL

/* Kernel structs that differ across the kernels we run on. */

/* udp_sock::reader_queue exists since 4.13 (commit 2276f58ac589, "udp: use a
 * separate rx queue for packet reception"); both our kernels have it. */

static __always_inline __u64 min_u64(__u64 a, __u64 b) { return a < b ? a : b; }
static __always_inline __u64 max_u64(__u64 a, __u64 b) { return a > b ? a : b; }

/* How long before `now` the instant `then` was, as a nonzero 32-bit count of
 * nanoseconds; 0 when `then` is 0 (not seen), later than `now`, or 4 s or
 * more before it. */
static __always_inline __u32 before(__u64 now, __u64 then)
{
	if (!then || then > now || now - then > 0xffffffffULL)
		return 0;
	return now - then ? (__u32)(now - then) : 1;
}

/* Add one to a per-CPU counter slot of an array map. */
#define COUNT(map, idx)                                                   \
	do {                                                              \
		__u32 __k = (idx);                                        \
		__u64 *__v = bpf_map_lookup_elem(&map, &__k);             \
		if (__v)                                                  \
			(*__v)++;                                         \
	} while (0)

#endif /* NETLATD_BPF_H */
