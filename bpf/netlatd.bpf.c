// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * netlatd kernel side: timestamps each stage of each matching packet's
 * receive path and hands one record per packet to user space when the
 * receive call returns it. One object, one skeleton; the code is split by
 * concern into the headers included below:
 *
 *   maps.bpf.h        configuration, maps, per-CPU, per-socket, per-task state
 *   cpu_stamps.bpf.h  NIC IRQ, NET_RX softirq, NAPI, sched_switch, copy (per CPU)
 *   filter.bpf.h      netif_receive_skb: interface/namespace/port filter, first stamps
 *   udp_slots.bpf.h   a UDP socket's slots: its datagrams in queue order (socket storage)
 *   udp_queue.bpf.h   datagrams moved into the slots at data-ready
 *   tcp.bpf.h         TCP segments by flow and sequence, queued at tcp_probe, read by range
 *   reader.bpf.h      the reading task: call start, named datagram, TCP range, wake-up
 *   udp_read.bpf.h    which datagram a UDP read returned (docs/JOIN.md)
 *   emit.bpf.h        the ring-buffer record
 *
 * Hooks are tp_btf programs, with fentry/fexit variants where older kernels
 * lack the tracepoint or where fentry adds what no tracepoint gives; a
 * point's variants share one __always_inline handler, and user space keeps
 * the ones its probe of the running kernel chose (src/hooks.cpp). Typed (BTF)
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
#include "netlatd.bpf.h"
#include "maps.bpf.h"
#include "cpu_stamps.bpf.h"
#include "filter.bpf.h"
#include "udp_slots.bpf.h"
#include "udp_queue.bpf.h"
#include "reader.bpf.h"
#include "emit.bpf.h"
#include "tcp.bpf.h"
#include "udp_read.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* ---- the receive call returns --------------------------------------------------- */

static __always_inline void emit_out(struct cpu_state *cs, const struct read_view *v)
{
	for (__u32 i = 0; i < UDP_OUT_MAX; i++) {
		if (i >= cs->n_out)
			break;
		bool ambiguous = cs->out_ambiguous[i];
		emit_udp(&cs->out[i], ambiguous ? NULL : v, NETLATD_READER_AMBIGUOUS);
	}
	cs->n_out = 0;
}

/* A UDP read's decision under its socket's lock, on the slots in use. */
static __always_inline int udp_decide_on(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					 const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp)
{
	int r;
	if (!st->reader_tid)
		st->reader_tid = in->tid;
	else if (st->reader_tid != in->tid)
		st->readers_many = 1;
	r = decide_by_order(st, slots, mask, in, cs, hp);
	/* The decision and the head as numbers the verifier does not know:
	 * each outcome would otherwise be a walk of its own through all that
	 * follows under the lock (942k instructions of its 1M budget on 6.18,
	 * 375k with these). */
	__u64 o = opaque_on(cs, ((__u64)hp->kind << 48) | ((__u64)(__u32)r << 32) | hp->idx, SCRATCH_RECV);
	r = (int)((o >> 32) & 0xffff);
	hp->kind = (enum head_kind)(o >> 48);
	hp->idx = (__u32)o;
	retire_marked(st, slots, mask, in, cs, hp);
	resync_slots(st, slots, mask, in, cs);
	advance_head(st, slots, mask);
	return r;
}

static __always_inline int udp_decide(struct udp_sock_state *st, struct udp_big_state *big,
				      const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp)
{
	if (st->big && big)
		return udp_decide_on(st, big->slots, UDP_BIG_SLOTS - 1, in, cs, hp);
	return udp_decide_on(st, st->small, UDP_SMALL_SLOTS - 1, in, cs, hp);
}


/* Where the kernel names each read's datagram (fentry/skb_consume_udp): the
 * stamps the consume took from the stash are this read's. No socket state and
 * no lock: the skb is the datagram's name. */
static __always_inline void on_udp_named_read(struct sock *sk, const struct read_view *v, struct reader_state *rs)
{
	/* Nothing consumed here: the call began before netlatd attached. */
	if (!rs || rs->consumed_sk != (__u64)sk)
		return;
	rs->consumed_sk = 0;
	if (!rs->named) {
		COUNT(counters, NETLATD_CNT_UNTRACKED_READS);
		return;
	}
	rs->named = 0;
	emit_record(&rs->named_rx, rs->named_queue_after, true, v, NETLATD_READER_KNOWN);
}

/* Where only queue order says which datagram a read took (docs/JOIN.md). */
static __always_inline void on_udp_read(struct sock *sk, int pidx, int ret, int flags, const struct read_view *v,
					struct reader_state *rs, bool typed)
{
	/* First, and alone: 6.1's verifier then leaves the queue-order way
	 * unwalked where the kernel names reads. With the test made in the
	 * caller instead, it walked it, and refused read_bufsize's bound. */
	if (targ_udp_join == UDP_JOIN_CONSUME) {
		on_udp_named_read(sk, v, rs);
		return;
	}
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return;
	struct udp_read_in in = {.ret = ret, .trunc = flags & MSG_TRUNC_FLAG, .tid = (__u32)v->pid_tgid};
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	/* No state yet: this read took a datagram no data-ready call of ours
	 * has seen. With the producer side quiet, it was queued before netlatd
	 * attached and nothing will ever stand for it: the read owes nothing.
	 * With a producer mid-batch, its data-ready call may still be to come
	 * and give it a slot (gone, marked), which this read owes; or it was
	 * queued before attach after all, and `owed` is one too many. One too
	 * many would let a retirement or a resync run while a read of a
	 * datagram with a slot is in flight, so the socket is marked unsure
	 * until no slot is left that a read could hold (udp_read.bpf.h
	 * resync_slots). */
	if (!st) {
		st = udp_state_create(sk);
		if (st && !targ_push_before_queue && !producers_quiet(sk, typed)) {
			bpf_spin_lock(&st->lock);
			st->owed++;
			st->owed_unsure = 1;
			bpf_spin_unlock(&st->lock);
			COUNT(counters, NETLATD_CNT_AMBIGUOUS_READS);
		} else {
			COUNT(counters, NETLATD_CNT_UNTRACKED_READS);
		}
		return;
	}
	/* Opaque: known 0 on most of read_bufsize's ways out and unknown on
	 * the rest, it would fork the verifier's walk of the decision. */
	in.bufsize = (__u32)opaque_on(cs, st->tail - st->head >= 2 ? read_bufsize(cs) : 0, SCRATCH_RECV);
	struct udp_big_state *big = udp_big_of(sk, st, false);
	in.head = queue_head(sk, typed);
	/* Where the kernel says when a producer is mid-batch, it alone decides:
	 * one CPU feeding the port for 10 ms (sole_producer) is a timing
	 * assumption, which a vCPU stalled by its host breaks. It stands in
	 * only on kernels without that signal. */
	if (targ_push_before_queue) {
		in.quiet = true;
	} else if (targ_udp_join == UDP_JOIN_ORDER_PRODQ) {
		/* And no call in flight holds a datagram of the port it dropped
		 * (drops_pending): its slot stands LIVE as if a read held it, one
		 * more than the reads hold, until that call returns (udp_read.bpf.h
		 * settle_read_drop); nor a FIONREAD's or a poll's, until the task's
		 * next read (asks_pending). */
		__u32 p = pidx & (NETLATD_MAX_PORTS - 1);
		__u64 none_held = eq_bit(drops_pending[p], 0) &
				  (eq_bit(asks_pending[p], 0) | gt_bit(v->now, asks_last_ns[p] + ASK_HOLD_NS));
		in.quiet = opaque_on(cs, producers_quiet(sk, typed) & none_held, SCRATCH_RECV);
	} else {
		in.sole = sole_producer(pidx, v->now);
	}
	struct head_pos hp = {.kind = HEAD_EMPTY};
	cs->n_out = 0;
	if (!lock_with_big(sk, st, &big))
		return;
	int r = udp_decide(st, big, &in, cs, &hp);
	bpf_spin_unlock(&st->lock);
	if (r == READ_AMBIGUOUS)
		COUNT(counters, NETLATD_CNT_AMBIGUOUS_READS);
	else if (r == READ_UNTRACKED)
		COUNT(counters, NETLATD_CNT_UNTRACKED_READS);
	emit_out(cs, v);
}

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
	struct netlatd_stash_entry *e = stash_find(key);
	bool claimed = e && stash_claim(e, key);
	if (claimed)
		COUNT(drops, NETLATD_DROP_STACK_DROPPED);
	/* Where the kernel names reads, a dropped datagram's entry was still in
	 * the stash, wherever it was dropped: there is no slot to settle. */
	if (targ_udp_join == UDP_JOIN_CONSUME)
		return 0;
	if (claimed)
		note_read_drop(skb, false, cs, pc);
	else if (!e)
		note_read_drop(skb, true, cs, pc);
	return 0;
}

/* `typed`: see producers_quiet (udp_read.bpf.h). */
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
	/* Before the read's own decision: datagrams this call dropped are
	 * not candidates of it, nor of any later read. */
	if (rs && rs->drop_n)
		settle_read_drop(sk, rs, pidx);
	bool data = ret >= 0 && !(flags & MSG_PEEK_FLAG);
	struct read_view v;
	if (data)
		view_here(&v, bpf_ktime_get_ns(), bpf_get_current_pid_tgid(), sk, rs);
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
	if (data) {
		if (sk->sk_protocol == IPPROTO_UDP)
			on_udp_read(sk, pidx, ret, flags, &v, rs, typed);
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
 * the runqueue), and softirq_exit is left detached (cpu_stamps.bpf.h
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

SEC("tp_btf/sk_data_ready")
int BPF_PROG(udp_queue_btf, struct sock *sk) { return on_sk_data_ready(sk); }

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
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
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
