// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * netlatd kernel side: timestamps each stage of each matching packet's
 * receive path and hands one record per packet to user space when the
 * receive call returns it. One object, one skeleton: this file includes the
 * headers of bpf/, by concern, and holds the programs. A header uses what the
 * headers before it define, so the order below is the order they need.
 *
 *   lib/         defs.bpf.h (constants, kernel struct flavours), config.bpf.h
 *                (rodata set before load), ops.bpf.h (--count-ops: the
 *                helpers counted), ring.bpf.h (the ring, counters,
 *                drops), cpu.bpf.h (per-CPU state), verifier.bpf.h (every
 *                verifier workaround), ports.bpf.h (the watched ports)
 *   filter/      watch.bpf.h (watched devices), stash.bpf.h (UDP datagrams in
 *                flight), parse.bpf.h (headers), filter.bpf.h (netif_receive_skb)
 *   stamps/      cpu.bpf.h: NIC IRQ, NET_RX softirq, NAPI, sched_switch, copy
 *   reader/      reader.bpf.h (the reading task's state, call start, TCP
 *                range), wake.bpf.h (the wake-up), view.bpf.h (what a return
 *                knows of its reader)
 *   udp/named/   where the kernel names each read's datagram (fentry):
 *                queue.bpf.h (the enqueue's stamp), read.bpf.h (consume, return)
 *   udp/order/   where only queue order says (docs/JOIN.md): state.bpf.h,
 *                walk.bpf.h and queue.bpf.h (data-ready), read_in.bpf.h
 *                (before the lock), drops.bpf.h, read.bpf.h; and in plain
 *                C, which the unit tier's checker compiles too: types.h,
 *                slots.h, decide.h, retire.h, locked.h (the rules under the
 *                socket's lock)
 *   tcp/         state.bpf.h (segments, cursor), probe.bpf.h (tcp_probe),
 *                read.bpf.h (a read's byte range)
 *   emit/        record.bpf.h (the ring record's halves), emit.bpf.h (writing it)
 *   aggregate/   --aggregate: per-stage histograms in the kernel, with the
 *                stage math of include/netlatd/stage_math.h
 *
 * Hooks are tp_btf programs, with fentry/fexit variants where older kernels
 * lack the tracepoint or where fentry adds what no tracepoint gives; a
 * point's variants share one __always_inline handler, and user space keeps
 * the ones its probe of the running kernel chose (src/kernel/hooks.cpp). Typed (BTF)
 * arguments let kernel structs be read with direct loads; only the packet
 * bytes and fields behind a type cast go through bpf_probe_read_kernel /
 * BPF_CORE_READ.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "netlatd/abi.h"
#include "netlatd/stage_math.h"
#include "lib/defs.bpf.h"
#include "lib/config.bpf.h"
#include "lib/ops.bpf.h"
#include "lib/ring.bpf.h"
#include "udp/order/state.bpf.h"
#include "lib/cpu.bpf.h"
#include "lib/verifier.bpf.h"
#include "filter/watch.bpf.h"
#include "filter/stash.bpf.h"
#include "lib/ports.bpf.h"
#include "reader/reader.bpf.h"
#include "stamps/cpu.bpf.h"
#include "filter/parse.bpf.h"
#include "tcp/state.bpf.h"
#include "filter/filter.bpf.h"
#include "udp/order/slots.h"
#include "reader/wake.bpf.h"
#include "udp/named/queue.bpf.h"
#include "udp/order/walk.bpf.h"
#include "udp/order/queue.bpf.h"
#include "reader/view.bpf.h"
#include "emit/record.bpf.h"
#include "aggregate/aggregate.bpf.h"
#include "emit/emit.bpf.h"
#include "tcp/probe.bpf.h"
#include "tcp/read.bpf.h"
#include "udp/named/read.bpf.h"
#include "udp/order/read_in.bpf.h"
#include "udp/order/decide.h"
#include "udp/order/retire.h"
#include "udp/order/locked.h"
#include "udp/order/drops.bpf.h"
#include "udp/order/read.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* ---- the receive call returns, and drops ------------------------------------- */

/* The kernel dropped a packet we were following: a datagram before its
 * socket had it, or a TCP skb TCP refused right after tcp_probe stamped it;
 * or a datagram a read took off its socket's queue and dropped. */
static __always_inline int on_kfree_skb(struct sk_buff *skb, int pc)
{
	__u64 key = (__u64)skb;
	struct cpu_state *cs = this_cpu();
	if (cs && cs->probed_skb == key) {
		tcp_probe_undo(cs, skb);
		return 0;
	}
	int way = stash_way(key);
	bool claimed = way >= 0 && stash_claim(key, way);
	if (claimed)
		COUNT(drops, NETLATD_DROP_STACK_DROPPED);
	/* Where the kernel names reads, a dropped datagram's entry was still in
	 * the stash, wherever it was dropped: there is no slot to settle. */
	if (targ_udp_join == UDP_JOIN_CONSUME)
		return 0;
	/* Not claimed here: its stamps are in a slot, or on their way into one
	 * (a data-ready call on another CPU claimed the entry a moment ago),
	 * and the read's return settles it. Noted only without an entry, a
	 * datagram dropped by a poll as its push ran went unnoted: its slot
	 * stayed LIVE, and was written out as a record of a datagram no read
	 * returned, its drop uncounted (the bpf tier's "bad checksums dropped
	 * by polls, 4 threads", once in CI). */
	note_read_drop(skb, !claimed, cs, pc);
	return 0;
}

/* `typed`: see producers_quiet (udp/order/read_in.bpf.h). */
static __always_inline int on_recv_return(struct sock *sk, int ret, int flags, bool typed)
{
	ARM(ARMED_RECV_RETURN);
	/* Every receive call on the host passes here: sockets on other ports
	 * leave before any lookup. */
	if (!sk)
		return 0;
	int pidx = port_index(sk->__sk_common.skc_num);
	if (pidx < 0)
		return 0;
	struct reader_state *rs = current_reader(false);
	bool data = ret >= 0 && !(flags & MSG_PEEK_FLAG);
	/* This CPU's state, looked up once and passed down, and only for a
	 * return that uses it (not an EAGAIN's). Never NULL: one element. */
	struct cpu_state *cs = data || (rs && rs->drop_n) ? this_cpu() : NULL;
	/* Before the read's own decision: datagrams this call dropped are
	 * not candidates of it, nor of any later read. */
	if (cs && rs && rs->drop_n)
		settle_read_drop(cs, sk, rs, pidx);
	struct read_view v;
	if (cs && data)
		view_here(&v, cs, bpf_ktime_get_ns(), bpf_get_current_pid_tgid(), sk, rs);
	/* The call's start and the wake-up it slept for end with it, whatever
	 * it returned (a peek, an error): the task's next call may not sleep,
	 * and must not be given this one's. Before the read's decision, which
	 * has them in `v`: where the decision does not use `rs`, whether it
	 * is NULL is then no matter to the verifier's walk of it. */
	if (rs) {
		rs->call_sk = 0;
		rs->woken_sk = 0;
		/* A call that returned no data has no datagram to name. */
		if (!data)
			forget_consumed(rs);
	}
	if (cs && data) {
		if (sk->sk_protocol == IPPROTO_UDP)
			on_udp_read(cs, sk, pidx, ret, flags, &v, rs, typed);
		else if (sk->sk_protocol == IPPROTO_TCP)
			on_tcp_read(sk, ret, rs, &v);
	}
	return 0;
}

/* ---- program variants ----------------------------------------------------------
 * Names are <point>_<kind>; src/hooks.cpp lists them per point in order of
 * preference. */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_entry_btf, int irq) { return on_irq_handler_entry(irq); }

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(irq_exit_btf, int irq) { return on_irq_handler_exit(); }

SEC("tp_btf/softirq_raise")
int BPF_PROG(sirq_raise_btf, unsigned int vec) { return on_softirq_raise(vec, PC_NONE); }

/* The _pc and _rq variants read the CPU's preempt count (by its symbol; from
 * the runqueue), and softirq_exit is left detached (stamps/cpu.bpf.h
 * net_rx_running). */
SEC("tp_btf/softirq_raise")
int BPF_PROG(sirq_raise_pc, unsigned int vec) { return on_softirq_raise(vec, PC_KSYM); }

SEC("tp_btf/softirq_raise")
int BPF_PROG(sirq_raise_rq, unsigned int vec) { return on_softirq_raise(vec, PC_RUNQUEUE); }

SEC("tp_btf/softirq_entry")
int BPF_PROG(sirq_entry_btf, unsigned int vec) { return on_softirq_entry(vec); }

SEC("tp_btf/softirq_exit")
int BPF_PROG(sirq_exit_btf, unsigned int vec) { return on_softirq_exit(vec); }

SEC("tp_btf/napi_poll")
int BPF_PROG(napi_poll_btf, struct napi_struct *napi, int work, int budget)
{
	return on_napi_poll(napi, work, budget);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(rcv_skb_btf, struct sk_buff *skb) { return on_netif_receive_skb(skb, PC_NONE); }

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(rcv_skb_pc, struct sk_buff *skb) { return on_netif_receive_skb(skb, PC_KSYM); }

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(rcv_skb_rq, struct sk_buff *skb) { return on_netif_receive_skb(skb, PC_RUNQUEUE); }

/* The _pc and _rq variants tell a call inside a NET_RX run by the preempt
 * count, as rcv_skb's (udp/order/queue.bpf.h call_datagram). */
SEC("tp_btf/sk_data_ready")
int BPF_PROG(udp_queue_btf, struct sock *sk) { return on_sk_data_ready(sk, PC_NONE); }

SEC("tp_btf/sk_data_ready")
int BPF_PROG(udp_queue_pc, struct sock *sk) { return on_sk_data_ready(sk, PC_KSYM); }

SEC("tp_btf/sk_data_ready")
int BPF_PROG(udp_queue_rq, struct sock *sk) { return on_sk_data_ready(sk, PC_RUNQUEUE); }

SEC("fentry/__udp_enqueue_schedule_skb")
int BPF_PROG(udp_queue_fentry, struct sock *sk, struct sk_buff *skb) { return on_udp_enqueue_entry(sk, skb); }

SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(udp_fail_btf, int rc, struct sock *sk) { return on_udp_enqueue_failed(sk); }

SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_queue_btf, struct sock *sk, struct sk_buff *skb) { return on_tcp_probe(sk, skb); }

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_skb_btf, struct sk_buff *skb) { return on_kfree_skb(skb, PC_NONE); }

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_skb_pc, struct sk_buff *skb) { return on_kfree_skb(skb, PC_KSYM); }

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_skb_rq, struct sk_buff *skb) { return on_kfree_skb(skb, PC_RUNQUEUE); }

SEC("tp_btf/sched_waking")
int BPF_PROG(waking_typed, struct task_struct *p) { return on_sched_waking(p, true); }

SEC("tp_btf/sched_waking")
int BPF_PROG(waking_btf, struct task_struct *p) { return on_sched_waking(p, false); }

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	if (prev_state == TASK_DEAD_STATE && targ_udp_join != UDP_JOIN_CONSUME)
		count_exit_drops(prev);
	return on_sched_switch(next);
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(copy_btf) { return on_skb_copy_datagram(); }

SEC("fentry/sock_recvmsg")
int BPF_PROG(recv_call_fentry, struct socket *sock) { return on_recv_call(sock); }

SEC("fentry/skb_consume_udp")
int BPF_PROG(udp_consume_fentry, struct sock *sk, struct sk_buff *skb, int len) { return on_udp_consume(sk, skb, len); }

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(tcp_copied_btf, struct sock *sk) { return on_tcp_copied(sk); }

SEC("tp_btf/sock_recv_length")
int BPF_PROG(recv_ret_btf, struct sock *sk, int ret, int flags) { return on_recv_return(sk, ret, flags, true); }

SEC("fexit/sock_recvmsg")
int BPF_PROG(recv_ret_fexit, struct socket *sock, struct msghdr *msg, int flags, int ret)
{
	return on_recv_return(sock->sk, ret, flags, false);
}
