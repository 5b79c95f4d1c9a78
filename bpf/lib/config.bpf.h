/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the configuration the daemon sets before load (const
 * volatile rodata) and the state it updates while running. */
#ifndef NETLATD_LIB_CONFIG_BPF_H
#define NETLATD_LIB_CONFIG_BPF_H

/* ---- configuration, set before load ------------------------------------------ */

const volatile __u16 targ_ports[NETLATD_MAX_PORTS] = {};
const volatile __u32 targ_nports = 0;
/* Force a reader wake-up once this much data waits in the ring; below it,
 * records are submitted without a wake-up and the daemon drains on a timer. */
const volatile __u64 targ_wakeup_bytes = 1 << 20;
/* --by cgroup: records carry their reader's cgroup id (a helper call each). */
const volatile bool targ_reader_cgroup = false;
/* --cgroup: records are written only for readers under one of the first
 * targ_ncgroup_filters cgroups of `cgroup_filter` (emit/emit.bpf.h). */
const volatile __u32 targ_ncgroup_filters = 0;

/* How a UDP read is tied to its datagram (docs/JOIN.md). */
enum udp_join {
	UDP_JOIN_CONSUME = 0,     /* fentry/skb_consume_udp names it (and fentry enqueue stamps it) */
	UDP_JOIN_ORDER_PRODQ = 1, /* queue order; 6.18's udp_prod_queue says when pushes lag */
	UDP_JOIN_ORDER = 2,       /* queue order, with no way to see a lagging push */
};
const volatile __u32 targ_udp_join = UDP_JOIN_ORDER;
/* The UDP enqueue hook runs before the datagram is queued (fentry): its slot
 * exists before any read can take it. */
const volatile bool targ_push_before_queue = false;
/* Queue order, seen by the data-ready tracepoint (6.5+): the filter then
 * tells that call which datagram it queued, when it can be sure
 * (udp/order/queue.bpf.h call_datagram). */
#define READY_SIGNAL (targ_udp_join != UDP_JOIN_CONSUME && !targ_push_before_queue)
/* Where this CPU's preempt count is (enum PreemptCount, include/netlatd/hooks.hpp):
 * 0 = not read, softirq_exit ends each NET_RX run; 1 = __preempt_count;
 * 2 = pcpu_hot.preempt_count; 3 = __preempt_count, at
 * targ_preempt_count_from_rq bytes from this CPU's runqueue. */
const volatile __u32 targ_preempt_count = 0;
const volatile __s64 targ_preempt_count_from_rq = 0;
/* udp_prod_queue entries per socket (nr_node_ids). */
const volatile __u32 targ_numa_nodes = 1;
/* --sample N: a matching packet is kept when a 32-bit draw is below this
 * (2^32 / N); 0 keeps every packet (filter/filter.bpf.h sampled_out). */
const volatile __u32 targ_sample_below = 0;
/* The stash's sets less one (filter/stash.bpf.h): the daemon sizes it at
 * load, a power of two, and sets this to match. 0 until then, so that an
 * object loaded without it touches only the one set it declares. */
const volatile __u32 targ_stash_set_mask = 0;
/* Wait-queue callbacks of readers asleep inside a receive call, from
 * /proc/kallsyms (0 = unknown): receiver_wake_function (UDP and other
 * datagram sockets), woken_wake_function (TCP's sk_wait_data). */
const volatile __u64 targ_receiver_wake_fn = 0;
const volatile __u64 targ_woken_wake_fn = 0;

/* ---- state the daemon updates while running ------------------------------------ */

/* The IRQ lines of every watched device (traced interfaces and their lower
 * devices); the devices themselves are in the `watch` map below. */
volatile __u64 cfg_irq_bitmap[NETLATD_IRQ_BITMAP_WORDS] = {};
/* Bumped by the daemon when it forgets readers it has not seen for a while
 * (RecordDecoder::prune): every task tells who it is again, once. */
volatile __u32 cfg_readers_gen = 0;
/* Bumped by the daemon after each change of the `watch` map: the filter's
 * per-CPU copy of its last answer (filter/watch.bpf.h) is then looked up
 * again. */
volatile __u32 cfg_watch_gen = 0;
/* Bits set by the first run of the key hooks: tells the daemon they are live
 * (a freshly attached tracepoint program starts firing a moment later). */
volatile __u32 armed = 0;
#define ARMED_RECEIVE_SKB 1
#define ARMED_SOCK_QUEUE 2
#define ARMED_RECV_RETURN 4
#define ARM(bit)                          \
	do {                              \
		if (!(armed & (bit)))     \
			armed |= (bit);   \
	} while (0)

#endif /* NETLATD_LIB_CONFIG_BPF_H */
