/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* BPF-only helpers for netlatd.bpf.c. User space never includes this file. */
#ifndef NETLATD_BPF_H
#define NETLATD_BPF_H

#ifndef ETH_P_IP
#define ETH_P_IP 0x0800
#endif
#ifndef ETH_P_IPV6
#define ETH_P_IPV6 0x86DD
#endif
#define ETH_P_8021Q_NR 0x8100
#define VLAN_VID_MASK_NR 0x0fff
#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif
#define NET_RX_SOFTIRQ_NR 3
#define MSG_PEEK_FLAG 2
#define MSG_TRUNC_FLAG 0x20
#define AF_INET6_NR 10
/* "ksoftirq", the first 8 bytes of ksoftirqd's name, as a little-endian word. */
#define KSOFTIRQ_NAME8 0x71726974666f736bULL

/* Kernel structs that differ across the kernels we run on. */

/* sk_buff::vlan_all says whether a hardware-accelerated tag is there since
 * 6.2 (commit 354259fa73e2, "net: remove skb->vlan_present"); before, the
 * vlan_present bit did. */
struct sk_buff___vlan_present {
	__u8 vlan_present : 1;
} __attribute__((preserve_access_index));

/* udp_sock::reader_queue exists since 4.13 (commit 2276f58ac589, "udp: use a
 * separate rx queue for packet reception"); both our kernels have it. */

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

/* The low 32 bits of a kernel pointer as a plain number. The verifier keeps
 * a pointer's type through C casts and refuses shifts or multiplies on it;
 * a 32-bit move is how it lets a program loaded with CAP_PERFMON turn one
 * into a number. (A whole pointer: ptr_value in maps.bpf.h.) */
static __always_inline __u32 ptr_low32(__u64 p)
{
	__u32 lo = (__u32)p;
	asm volatile("%[lo] = %[lo]" : [lo] "+w"(lo));
	return lo;
}

/* Comparisons as arithmetic (1 or 0): BPF has no set-on-condition, and a
 * branch per slot would fork the verifier's walk of the lock region at every
 * slot of every loop. In asm, or clang turns them back into branches. */
static __always_inline __u64 ne_bit(__u64 a, __u64 b)
{
	__u64 d = a ^ b, n;
	asm volatile("%[n] = %[d]\n\t"
		     "%[n] = -%[n]\n\t"
		     "%[n] |= %[d]\n\t"
		     "%[n] >>= 63"
		     : [n] "=&r"(n)
		     : [d] "r"(d));
	return n;
}
static __always_inline __u64 eq_bit(__u64 a, __u64 b) { return ne_bit(a, b) ^ 1; }
/* a > b, for values below 2^63 */
static __always_inline __u64 gt_bit(__u64 a, __u64 b)
{
	__u64 n;
	asm volatile("%[n] = %[b]\n\t"
		     "%[n] -= %[a]\n\t"
		     "%[n] >>= 63"
		     : [n] "=&r"(n)
		     : [a] "r"(a), [b] "r"(b));
	return n;
}

#endif /* NETLATD_BPF_H */
