/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: each CPU's state: the stamps packets and readers pick
 * up later, and room for what does not fit on a program's stack. */
#ifndef NETLATD_LIB_CPU_BPF_H
#define NETLATD_LIB_CPU_BPF_H

/* Who uses a cpu_state scratch word (ptr_value_on, opaque_on). */
enum scratch_user {
	SCRATCH_RECV = 0,   /* the receive return */
	SCRATCH_QUEUE = 1,  /* the UDP data-ready call */
	SCRATCH_WAKE = 2,   /* sched_waking */
	SCRATCH_USERS = 4,
};

struct cpu_state {
	/* First: the daemon reads it at offset 0 (abi.h). */
	struct netlatd_cpu_counts counts;
	/* NIC IRQ and NET_RX (stamps/cpu.bpf.h) */
	__u64 cur_irq_ts;    /* entry of the interface IRQ running now, 0 outside one */
	__u64 pend_irq_ts;   /* the interface IRQ during which NET_RX was raised since the last run */
	__u64 pend_raise_ts; /* that raise; else the first raise since the last run */
	__u64 run_irq_ts;    /* of the current (or last) NET_RX run */
	__u64 run_raise_ts;
	__u64 softirq_ts;    /* entry of the current (or last) NET_RX run */
	__u8 in_net_rx;
	__u8 in_ksoftirqd;
	__u8 in_softirq;     /* any vector; kept only while softirq_exit is attached */
	__u8 _pad0[5];
	/* The last task switched in on this CPU, and when: the task a receive
	 * call returns in has been on CPU since then. */
	__u64 oncpu_ts;
	__u32 oncpu_tid;
	__u32 copy_tid;
	__u64 copy_ts;       /* the last skb_copy_datagram_iovec here */
	/* A tracked packet was just queued on hint_sk with someone asleep on
	 * its wait queue: the wakings that follow on this CPU are that socket's
	 * (reader/wake.bpf.h checks each woken task really waits on it). */
	__u64 hint_sk;
	__u64 hint_ts;
	__u32 given_up;  /* stamped slots given up without a record (retire.h) */
	__u32 n_out;
	__u32 n_resync;  /* records a resync left in this CPU's udp_resync_outs */
	__u32 n_spill;   /* and in the socket's udp_spills */
	/* TCP: the skb tcp_probe last stamped here, and its range, so that a
	 * drop of it right after (TCP refused it) undoes the stamps. */
	__u64 probed_skb;
	struct netlatd_tcp_key probed_key;
	__u32 probed_end;
	__u32 _pad2;
	/* UDP: what fentry/__udp_enqueue_schedule_skb pushed, and a read's records. */
	__u64 pushed_skb;
	/* The packets netif_receive_skb saw on this CPU since its NET_RX run
	 * began, a NAPI poll ended or a watched UDP socket's data-ready call
	 * here last looked;
	 * when that was one, and a datagram the stash took whole (not GSO),
	 * its address and receive stamp: the datagram that call queued
	 * (udp/order/queue.bpf.h call_datagram). */
	__u64 ready_skb;
	__u64 ready_ns;
	__u32 ready_seen;
	__u32 _pad3;
	/* The filter's last answer of the `watch` map on this CPU
	 * (filter/watch.bpf.h watched_here): its key, cfg_watch_gen + 1 when
	 * it was looked up (0: never), whether the device was watched, and its
	 * entry then. */
	struct netlatd_watch_key wc_key;
	__u32 wc_gen;
	__u32 wc_found;
	struct netlatd_watch wc_val;
	/* This CPU's __preempt_count, found once from its runqueue
	 * (PC_RUNQUEUE, stamps/cpu.bpf.h): a static per-CPU variable does not
	 * move. 0 until then. */
	__u64 preempt_count_at;
	/* ptr_value_on's and opaque_on's round trip through memory, one word per
	 * program that makes it: a program interrupted between its store and
	 * its load (a softirq's data-ready call on top of a receive return, a
	 * waking in a hard IRQ) must not find the interrupter's value. A
	 * program does not nest in itself on a CPU (the kernel's recursion
	 * guard), so one word each is enough. */
	__u64 scratch[SCRATCH_USERS];
	/* read_bufsize's copies of the reader's msghdr and iovecs: here, not
	 * on a stack that 6.1's combined limit has no room left on. */
	struct user_msghdr rb_msg;
	struct iovec rb_iov[4];
	/* What the scan for a read's dropped datagrams found (udp/order/drops.bpf.h
	 * drop_scan_step), for the same reason. */
	__u32 ds_found;                 /* bit d: ds_at[d] holds drop d's slot */
	__u32 ds_ngone;
	__u32 ds_at[READ_DROPS];        /* absolute slot numbers */
	__u32 ds_gone_at[2 * READ_DROPS];
	struct udp_slot out[UDP_OUT_MAX];
	__u8 out_ambiguous[UDP_OUT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

static __always_inline struct cpu_state *this_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

#endif /* NETLATD_LIB_CPU_BPF_H */
