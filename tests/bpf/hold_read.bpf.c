// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* A test program of the bpf tier, not part of netlatd (tests/bpf/
 * test_readers_held.cpp): it holds each receive call of a thread named
 * "nlr-held" (nlreaders --held-threads) for HOLD_NS at the call's return
 * tracepoint, sock_recv_length, interrupts enabled. Attached before netlatd,
 * it runs before netlatd's program at that tracepoint: the read has taken its
 * datagram and the kernel has freed the skb, and netlatd has not yet seen the
 * return, as with a reader interrupted or preempted at that instant. Its
 * datagram's slot stays held meanwhile, while other threads read on
 * (docs/JOIN.md, step 5). Loaded by bpftool (prog loadall ... autoattach). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define HOLD_NS 2000000ULL
/* "nlr-held" as one little-endian load of comm's first 8 bytes. */
#define HELD_COMM8 0x646c65682d726c6eULL

__u64 held; /* reads held, read by the test through the pinned .bss */

static long spin(__u64 i, void *ctx)
{
	return bpf_ktime_get_ns() >= *(__u64 *)ctx;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(hold_read, struct sock *sk, int ret, int flags)
{
	if (ret <= 0)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (*(__u64 *)task->comm != HELD_COMM8)
		return 0;
	__sync_fetch_and_add(&held, 1);
	__u64 deadline = bpf_ktime_get_ns() + HOLD_NS;
	bpf_loop(1 << 23, spin, &deadline, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
