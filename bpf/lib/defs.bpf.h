/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: constants vmlinux.h lacks, kernel structs that differ
 * across the kernels we run on, and the arithmetic every part uses. BPF only:
 * user space never includes a file of bpf/. */
#ifndef NETLATD_LIB_DEFS_BPF_H
#define NETLATD_LIB_DEFS_BPF_H

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

#include "lib/arith.h"

#endif /* NETLATD_LIB_DEFS_BPF_H */
