// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* A test program of the vm tier's phase `reuse`, not part of netlatd: it holds
 * each UDP read of port 5000 for STALL_NS right after skb_consume_udp has
 * freed the read's skb, interrupts enabled, as a vCPU preempted by its
 * hypervisor at that instant would. A datagram the NIC delivers to this CPU
 * meanwhile is received, queued and given a slot by netlatd before the read
 * returns, and the slab usually hands it the skb just freed: the read's
 * datagram and the next one then have the same address (docs/JOIN.md). Loaded
 * in the guest by bpftool (prog loadall ... autoattach). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define STALL_PORT 5000
#define STALL_NS 3000000ULL

static long spin(__u64 i, void *ctx)
{
	return bpf_ktime_get_ns() >= *(__u64 *)ctx;
}

SEC("fexit/skb_consume_udp")
int BPF_PROG(stall_after_consume, struct sock *sk, struct sk_buff *skb, int len)
{
	if (sk->__sk_common.skc_num != STALL_PORT)
		return 0;
	__u64 deadline = bpf_ktime_get_ns() + STALL_NS;
	bpf_loop(1 << 23, spin, &deadline, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
