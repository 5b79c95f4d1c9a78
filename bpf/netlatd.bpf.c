// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * netlatd kernel side: timestamps each stage of each matching packet's
 * receive path and hands one record per packet to user space when the
 * receive call returns it.
 *
 * Join keys along the path:
 *   NIC IRQ, softirq raise/entry  per-CPU state, copied into the packet at netif_receive_skb
 *   netif_receive_skb -> enqueue  the skb address (map `stash`, a two-way set-associative table)
 *   enqueue -> receive return     a FIFO per socket (map `sockets`): UDP pops one datagram
 *                                 per receive call, TCP pops every segment below copied_seq
 *   wakeup                        the enqueue leaves a per-CPU hint naming its FIFO slot;
 *                                 the waking it causes next on that CPU stamps the slot
 *   on-CPU, copy                  per-CPU: the task a receive call returns in has run on
 *                                 this CPU since the last sched_switch here, which put it on
 *
 * Hooks are tp_btf programs, with fexit variants where older kernels lack
 * the tracepoint; a point's variants share one __always_inline handler, and
 * user space keeps the one the running kernel supports and switches the
 * others' autoload off (src/hooks.cpp). Both kinds see typed (BTF)
 * arguments, so kernel structs are read with direct loads, not helper
 * calls; only the packet bytes and fields behind a type cast go through
 * bpf_probe_read_kernel / BPF_CORE_READ. (raw_tp would add nothing: tp_btf
 * is 5.5+, the BPF ring buffer netlatd needs is 5.8+.)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "netlatd/abi.h"
#include "netlatd.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set before load. */
const volatile __u16 targ_ports[NETLATD_MAX_PORTS] = {};
const volatile __u32 targ_nports = 0;
/* Force a reader wake-up once this much data waits in the ring; below it,
 * records are submitted without a wake-up and the daemon drains on a timer. */
const volatile __u64 targ_wakeup_bytes = 1 << 20;
/* The UDP enqueue hook runs after the datagram is on the socket's queue
 * (sock:sk_data_ready, fexit): then a published slot is a queued or read
 * datagram, never one still on its way to the queue. */
const volatile bool targ_push_after_queue = true;

/* Updated by the daemon while running (the interface may go and come back). */
volatile __u32 cfg_ifindex = 0;
volatile __u32 cfg_netns = 0; /* network namespace inode; 0 = any */
volatile __u64 cfg_irq_bitmap[NETLATD_IRQ_BITMAP_WORDS] = {};
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

/* One queued packet: 64 bytes, one cache line. The record is built from it
 * when the packet is read. */
struct sock_fifo_slot {
	struct netlatd_rx rx;  /* TCP: the segment is read once copied_seq passes rx.end_seq */
	__u64 skb;             /* UDP: to check the head of the queue at receive time */
	__u32 queue_after;     /* the enqueue, after rx.receive_ns */
	__u32 wake_after;      /* the reader's waking, after rx.receive_ns; 0 = none */
	__u32 seq;             /* index + 1 once the slot is published */
	__u8 dead;             /* lost the race to move its packet: readers skip it */
	__u8 _pad[3];
};
_Static_assert(sizeof(struct sock_fifo_slot) == 64, "a FIFO slot is one cache line");

/* What a receive return knows of its reader, for the record it emits. */
/* Datagrams one UDP data-ready call moves at most (a batch, see enqueue_from_tail). */
#define UDP_TAIL_WALK 8

struct read_view {
	__u64 now;       /* the receive return */
	__u64 pid_tgid;
	__u64 oncpu_ts;  /* the reader's switch-in on its CPU, 0 if unknown */
	__u64 copy_ts;   /* its last copy there, 0 if none */
	__u64 name[2];   /* comm */
	__u32 cpu;
	__u32 _pad;
	__u64 _pad2;
};

/* A socket's FIFO, placed on a 64-byte boundary in memory (see sock_fifo). */
struct fifo {
	struct netlatd_fifo_hdr h;  /* indices, on a producers' and a readers' cache line */
	struct read_view pend[NETLATD_FIFO_PEND]; /* readers' views while pend_seq says so */
	struct sock_fifo_slot slots[NETLATD_SOCK_FIFO_SLOTS];
};
_Static_assert(sizeof(struct netlatd_fifo_hdr) == 128, "producers' and readers' lines");
_Static_assert(sizeof(struct read_view) == 64, "the slots start on a line");

/* A value of `sockets`. A hash map value is 8-byte aligned: its 64-byte
 * slots would each straddle two cache lines, and a producer's slot would share
 * one with the slot the reader is on. So the FIFO sits at the first 64-byte
 * boundary past the first 8 bytes, which say where (for the daemon's sweep). */
struct sock_fifo {
	__u32 fifo_off;  /* NETLATD_FIFO_OFF_MIN..+56: where struct fifo starts */
	__u32 _pad;
	__u8 raw[56 + sizeof(struct fifo)];
};

/* TCP segments by flow and sequence: a segment that arrives while the reader
 * holds the socket lock can be coalesced into the backlog's tail skb
 * (tcp_add_backlog) and freed without passing tcp_probe; the tail skb then
 * covers its sequence range, and this index finds its record. */
struct tcp_seg_key {
	__u64 flow; /* addresses folded, ports: see tcp_flow() */
	__u32 seq;
	__u32 _pad;
};

struct tcp_seg {
	__u64 skb; /* its entry in `stash` */
	__u32 end_seq;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct tcp_seg_key);
	__type(value, struct tcp_seg);
} tcp_segs SEC(".maps");

static __always_inline __u64 tcp_flow(__u32 saddr, __u32 daddr, __u16 sport_be, __u16 dport_be)
{
	return (__u64)(saddr ^ (daddr << 16 | daddr >> 16)) << 32 | (__u32)sport_be << 16 | dport_be;
}

struct cpu_state {
	__u64 irq_ts;        /* last NIC IRQ on this CPU */
	__u64 raise_ts;      /* last NET_RX raise on this CPU */
	__u64 softirq_ts;    /* entry of the current (or last) NET_RX run */
	__u64 run_irq_ts;    /* the IRQ that started the current run, 0 if none */
	__u64 run_raise_ts;  /* the raise that started the current run, 0 if none */
	/* A tracked packet was just queued on a socket with a sleeping reader:
	 * the next waking on this CPU is that reader's. */
	__u64 wake_hint_ts;
	/* The datagram the running UDP receive call dequeued (skb_consume_udp). */
	__u64 consumed_skb;
	__u32 consumed_tid;
	__u64 wake_hint_sk;  /* the socket: the packet is in slot wake_hint_idx of its FIFO */
	__u32 wake_hint_idx;
	/* The last task switched in on this CPU, and when: the task a receive
	 * call returns in has been on CPU since then. */
	__u32 oncpu_tid;
	__u64 oncpu_ts;
	/* Socket and skbs of a UDP batch being moved (see enqueue_from_tail),
	 * handed to netlatd_push_older as plain numbers. */
	__u64 batch_sk;
	__u64 batch_skb[UDP_TAIL_WALK];
	__u32 emitted;       /* records this CPU wrote, for the ring fill check */
	/* The last skb_copy_datagram_iovec on this CPU. */
	__u64 copy_ts;
	__u32 copy_tid;
	__u8 in_net_rx;
	__u8 in_ksoftirqd;
	__u8 _pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the daemon before load */
} events SEC(".maps");

/* Packets seen at netif_receive_skb and not queued on a socket yet, at a slot
 * chosen by their skb address. Not a hash map: an array lookup is inlined by
 * the verifier and ownership moves with one atomic exchange, where a hash map
 * takes a bucket lock on insert and delete, three times per packet. Two
 * packets in flight at once that share a slot lose the older one (counted as
 * unjoined): with a few dozen in flight, a fraction of a per cent of them.
 * The daemon maps the table to expire packets that never reach a socket. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << NETLATD_STASH_BITS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct netlatd_stash_entry);
} stash SEC(".maps");

/* 128 KiB a socket: allocated when a socket first gets a tracked packet, not
 * up front for all 512 (the sweep frees closed sockets' entries). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* sock address */
	__type(value, struct sock_fifo);
} sockets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

/* Sockets a receive call found without a FIFO, by a hash of the address:
 * written and read only on those rare paths (see fifo_get). */
#define NOFIFO_HINTS 64
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NOFIFO_HINTS);
	__type(key, __u32);
	__type(value, __u64);
} nofifo_reads SEC(".maps");


/* A zeroed sock_fifo to insert from: too large for the BPF stack. Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_fifo);
} zero_fifo SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETLATD_DROP_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETLATD_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline struct cpu_state *this_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

/* ---- the stash: packets between netif_receive_skb and their socket ------------ */

/* The low 32 bits of a kernel pointer as a plain number. The verifier keeps
 * a pointer's type through C casts and refuses shifts or multiplies on it;
 * a 32-bit move is how it lets a program loaded with CAP_PERFMON turn one
 * into a number. */
static __always_inline __u32 ptr_low32(__u64 p)
{
	__u32 lo = (__u32)p;
	asm volatile("%[lo] = %[lo]" : [lo] "+w"(lo));
	return lo;
}

/* The first of the two entries (a set) where `skb` may be: two-way, so two
 * packets in flight at once that hash alike both keep an entry. */
static __always_inline __u32 stash_set(__u64 skb)
{
	/* skb heads are cache-aligned slab objects: drop the low bits and
	 * take the top bits of a multiplicative hash of the rest. */
	return (((ptr_low32(skb) >> 6) * 0x9E3779B1U) >> (32 - NETLATD_STASH_BITS)) & ~1U;
}

/* The entry of `skb`, if it is there. */
static __always_inline struct netlatd_stash_entry *stash_find(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *e = bpf_map_lookup_elem(&stash, &idx);
	if (e && e->skb == skb)
		return e;
	idx |= 1;
	e = bpf_map_lookup_elem(&stash, &idx);
	return e && e->skb == skb ? e : NULL;
}

/* Marks an entry of the set of `skb` busy for the caller: the one an earlier
 * packet at this address still holds (never queued nor seen dropped: it is
 * lost), else a free one; when neither is free, the one whose packet came
 * first (most likely one that never reached a socket). Taking an entry that
 * held a packet counts that packet as unjoined. NULL if both are being written
 * by other CPUs this instant. */
static __always_inline struct netlatd_stash_entry *stash_take(__u64 skb)
{
	__u32 idx = stash_set(skb);
	struct netlatd_stash_entry *a = bpf_map_lookup_elem(&stash, &idx);
	idx |= 1;
	struct netlatd_stash_entry *b = bpf_map_lookup_elem(&stash, &idx);
	if (!a || !b)
		return NULL;
	struct netlatd_stash_entry *same = a->skb == skb ? a : b->skb == skb ? b : NULL;
	if (same && __sync_val_compare_and_swap(&same->skb, skb, NETLATD_STASH_BUSY) == skb) {
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return same;
	}
	if (a->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&a->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return a;
	if (b->skb == NETLATD_STASH_FREE &&
	    __sync_val_compare_and_swap(&b->skb, NETLATD_STASH_FREE, NETLATD_STASH_BUSY) == NETLATD_STASH_FREE)
		return b;
	struct netlatd_stash_entry *victim = a->rx.receive_ns <= b->rx.receive_ns ? a : b;
	__u64 old = __sync_lock_test_and_set(&victim->skb, NETLATD_STASH_BUSY);
	if (old == NETLATD_STASH_BUSY)
		return NULL; /* another CPU is filling it right now; it keeps it */
	if (old != NETLATD_STASH_FREE)
		COUNT(drops, NETLATD_DROP_UNJOINED);
	return victim;
}

/* Takes the entry for the caller: exactly one of several CPUs racing for
 * one packet wins. Read the entry before claiming it: a writer marks it busy
 * before changing it, which makes a later claim fail. */
static __always_inline bool stash_claim(struct netlatd_stash_entry *e, __u64 skb)
{
	return __sync_val_compare_and_swap(&e->skb, skb, NETLATD_STASH_FREE) == skb;
}

/* The index of `port` in targ_ports, or -1. */
static __always_inline int port_index(__u16 port)
{
	for (__u32 i = 0; i < NETLATD_MAX_PORTS; i++) {
		if (i >= targ_nports)
			break;
		if (targ_ports[i] == port)
			return i;
	}
	return -1;
}

static __always_inline bool port_watched(__u16 port) { return port_index(port) >= 0; }

/* Which CPUs receive a watched port's packets. While one CPU alone does, a
 * UDP data-ready call knows every datagram still to move was received on
 * it, before its own (see on_sk_data_ready). Written only when the CPU
 * changes, so a single producer keeps the line in its cache. */
#define MULTI_PRODUCER_HOLD_NS 10000000 /* 10 ms */
struct port_producers {
	__u32 last_cpu;      /* + 1; 0 = none yet */
	__u32 _pad;
	__u64 mixed_until;   /* another CPU received for this port until shortly before */
	__u64 _pad2[6];
};
static struct port_producers port_prod[NETLATD_MAX_PORTS];

/* ---- NIC hard IRQ and NET_RX softirq (per-CPU) ---------------------------- */

static __always_inline int on_irq_handler_entry(int irq_signed)
{
	__u32 irq = (__u32)irq_signed;
	if (irq >= NETLATD_IRQ_BITMAP_WORDS * 64)
		return 0;
	/* clang drops a mask it can prove redundant for a 32-bit value, but the
	 * ctx slot is 64 bits wide: hide the value from it so the verifier
	 * sees the index bounded. */
	__u64 word = irq >> 6;
	barrier_var(word);
	word &= NETLATD_IRQ_BITMAP_WORDS - 1;
	if (!(cfg_irq_bitmap[word] & (1ULL << (irq & 63))))
		return 0;
	struct cpu_state *cs = this_cpu();
	if (cs)
		cs->irq_ts = bpf_ktime_get_ns();
	COUNT(counters, NETLATD_CNT_IRQ);
	return 0;
}

static __always_inline int on_softirq_raise(unsigned int vec)
{
	if (vec != NET_RX_SOFTIRQ_NR)
		return 0;
	struct cpu_state *cs = this_cpu();
	if (cs)
		cs->raise_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_softirq_entry(unsigned int vec)
{
	if (vec != NET_RX_SOFTIRQ_NR)
		return 0;
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	/* An IRQ or raise since the previous NET_RX run on this CPU started this one. */
	cs->run_irq_ts = cs->irq_ts > cs->softirq_ts ? cs->irq_ts : 0;
	cs->run_raise_ts = cs->raise_ts > cs->softirq_ts ? cs->raise_ts : 0;
	cs->softirq_ts = bpf_ktime_get_ns();
	cs->in_net_rx = 1;
	/* "ksoftirqd/N": the first 8 bytes of the name, in one load. */
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 name8 = *(__u64 *)task->comm;
	cs->in_ksoftirqd = name8 == KSOFTIRQ_NAME8;
	return 0;
}

static __always_inline int on_softirq_exit(unsigned int vec)
{
	if (vec != NET_RX_SOFTIRQ_NR)
		return 0;
	struct cpu_state *cs = this_cpu();
	if (cs)
		cs->in_net_rx = 0;
	return 0;
}

/* ---- netif_receive_skb: the filter ------------------------------------------ */

struct l4_ports_seq {
	__be16 sport;
	__be16 dport;
	__be32 seq;      /* TCP only */
	__be32 ack_seq;  /* TCP only */
	__u8 doff_res;   /* TCP only: data offset in the upper nibble */
	__u8 flags;
};

static __always_inline int on_netif_receive_skb(struct sk_buff *skb)
{
	ARM(ARMED_RECEIVE_SKB);
	struct net_device *dev = skb->dev;
	if (!dev || (__u32)dev->ifindex != cfg_ifindex)
		return 0;
	if (cfg_netns && dev->nd_net.net->ns.inum != cfg_netns)
		return 0;

	/* Drivers call eth_type_trans() before this point, so skb->data is
	 * the network header; skb->network_header is not reset yet. */
	unsigned char *data = skb->data;
	__u16 proto = bpf_ntohs(skb->protocol);
	__u8 l4proto;
	__u32 l3len, l4off;
	__u16 flags = 0;
	struct l4_ports_seq l4;
	/* One read covers the network header and the ports (and TCP's
	 * sequence) in the common cases: IPv4 without options, IPv6 without
	 * extension headers. Bytes past a short packet are never used. */
	__u8 hdr[40 + sizeof(struct l4_ports_seq)];

	if (proto == ETH_P_IP) {
		if (bpf_probe_read_kernel(hdr, 20 + sizeof(l4), data))
			return 0;
		__u16 frag = ((__u16)hdr[6] << 8 | hdr[7]) & 0x1fff;
		if (frag) /* not the first fragment: no ports */
			return 0;
		l4proto = hdr[9];
		l4off = (hdr[0] & 0xf) * 4;
		l3len = (__u32)((__u16)hdr[2] << 8 | hdr[3]);
		if (l4off == 20)
			__builtin_memcpy(&l4, hdr + 20, sizeof(l4));
		else if (bpf_probe_read_kernel(&l4, sizeof(l4), data + (l4off & 0x3f)))
			return 0;
	} else if (proto == ETH_P_IPV6) {
		if (bpf_probe_read_kernel(hdr, sizeof(hdr), data))
			return 0;
		/* Extension headers are not walked: such packets are not tracked. */
		l4proto = hdr[6];
		l4off = 40;
		l3len = 40 + (__u32)((__u16)hdr[4] << 8 | hdr[5]);
		flags |= NETLATD_PKT_IPV6;
		__builtin_memcpy(&l4, hdr + 40, sizeof(l4));
	} else {
		return 0;
	}
	if (l4proto != IPPROTO_UDP && l4proto != IPPROTO_TCP)
		return 0;
	__u16 dport = bpf_ntohs(l4.dport);
	int pidx = port_index(dport);
	if (pidx < 0)
		return 0;
	__u32 saddr, daddr;
	if (flags & NETLATD_PKT_IPV6) {
		__u32 a[8];
		__builtin_memcpy(a, hdr + 8, sizeof(a));
		saddr = a[0] ^ a[1] ^ a[2] ^ a[3];
		daddr = a[4] ^ a[5] ^ a[6] ^ a[7];
	} else {
		__builtin_memcpy(&saddr, hdr + 12, 4);
		__builtin_memcpy(&daddr, hdr + 16, 4);
	}

	__u32 payload, end_seq = 0;
	if (l4proto == IPPROTO_TCP) {
		__u32 thl = (l4.doff_res >> 4) * 4;
		if (l3len < l4off + thl)
			return 0;
		payload = l3len - l4off - thl;
		if (!payload) /* pure ACK, SYN, FIN: nothing for a reader */
			return 0;
		end_seq = bpf_ntohl(l4.seq) + payload;
		flags |= NETLATD_PKT_TCP;
	} else {
		payload = l3len > l4off + 8 ? l3len - l4off - 8 : 0;
	}

	__u64 key = (__u64)skb;
	struct netlatd_stash_entry *e = stash_take(key);
	if (!e) {
		COUNT(drops, NETLATD_DROP_INFLIGHT_FULL);
		return 0;
	}

	struct netlatd_rx *rx = &e->rx;
	__u64 now = bpf_ktime_get_ns();
	struct cpu_state *cs = this_cpu();
	rx->irq_before = 0;
	rx->raise_before = 0;
	rx->softirq_before = 0;
	if (cs && cs->in_net_rx) {
		rx->irq_before = before(now, cs->run_irq_ts);
		rx->raise_before = before(now, cs->run_raise_ts);
		rx->softirq_before = before(now, cs->softirq_ts);
		flags |= NETLATD_PKT_IN_SOFTIRQ;
		if (cs->in_ksoftirqd)
			flags |= NETLATD_PKT_KSOFTIRQD;
	}
	rx->receive_ns = now;
	__u32 cpu = bpf_get_smp_processor_id();
	rx->rx_cpu = cpu;
	struct port_producers *pp = &port_prod[pidx & (NETLATD_MAX_PORTS - 1)];
	if (pp->last_cpu != cpu + 1) {
		pp->last_cpu = cpu + 1;
		pp->mixed_until = now + MULTI_PRODUCER_HOLD_NS;
	}
	rx->len = payload;
	rx->ifindex = cfg_ifindex;
	rx->end_seq = end_seq;
	rx->dport = dport;
	rx->flags = flags;
	rx->l4proto = l4proto;
	/* Publish: from here on the enqueue can claim it. */
	__sync_lock_test_and_set(&e->skb, key);

	COUNT(counters, NETLATD_CNT_MATCHED);
	if (l4proto == IPPROTO_TCP) {
		struct tcp_seg_key k = {.flow = tcp_flow(saddr, daddr, l4.sport, l4.dport),
					.seq = bpf_ntohl(l4.seq)};
		struct tcp_seg v = {.skb = key, .end_seq = end_seq};
		bpf_map_update_elem(&tcp_segs, &k, &v, BPF_ANY);
	}
	return 0;
}

/* ---- enqueue on the socket ---------------------------------------------------- */

/* The aligned FIFO in a `sockets` value: computed from the value's address,
 * which does not move while the entry lives. */
static __always_inline struct fifo *fifo_at(struct sock_fifo *v, __u32 *off_out)
{
	/* Values are 8-byte aligned: masking with 0x38 rather than 63 changes
	 * nothing but tells the verifier the offset is a multiple of 8, which
	 * atomic operations need. */
	__u32 lo = ptr_low32((__u64)v);
	__u32 off = NETLATD_FIFO_OFF_MIN + ((64 - ((lo + NETLATD_FIFO_OFF_MIN) & 0x38)) & 0x38);
	if (off_out)
		*off_out = off;
	return (struct fifo *)((void *)v + off);
}

static __always_inline __u64 *nofifo_hint(__u64 sk_key)
{
	__u32 k = (ptr_low32(sk_key) >> 6) % NOFIFO_HINTS;
	return bpf_map_lookup_elem(&nofifo_reads, &k);
}

static __always_inline struct fifo *fifo_get(__u64 sk_key, __u8 l4proto, bool create)
{
	struct sock_fifo *v = bpf_map_lookup_elem(&sockets, &sk_key);
	if (v || !create)
		return v ? fifo_at(v, 0) : 0;
	__u32 zero = 0;
	struct sock_fifo *z = bpf_map_lookup_elem(&zero_fifo, &zero);
	if (!z)
		return 0;
	if (bpf_map_update_elem(&sockets, &sk_key, z, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&sockets, &sk_key)) {
		COUNT(drops, NETLATD_DROP_SOCKETS_FULL);
		return 0;
	}
	v = bpf_map_lookup_elem(&sockets, &sk_key);
	if (!v)
		return 0;
	__u32 off;
	struct fifo *st = fifo_at(v, &off);
	v->fifo_off = off;
	st->h.l4proto = l4proto;
	/* A read may have taken this socket's first datagram while the FIFO
	 * (128 KiB to clear) was being made, the datagram found on the queue
	 * before: its push finds it unlinked (see fifo_push), and the reader
	 * realigns at the next drain should that miss (realign_at_drain). */
	__u64 *hint = nofifo_hint(sk_key);
	if (hint && *hint == sk_key) {
		/* That read had no record: counted here, once. It found the
		 * FIFO empty at index 0, in effect (see fifo_push). */
		*hint = 0;
		st->h.suspect = 1;
		st->h.empty_at = 1;
		COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
	}
	return st;
}

/* Someone waits on the socket's wait queue (what the kernel checks before a wake-up). */
static __always_inline bool has_sleeper(void *sk)
{
	struct socket_wq *wq = ((struct sock *)sk)->sk_wq;
	if (!wq)
		return false;
	struct list_head *first = wq->wait.head.next;
	return first && first != &wq->wait.head;
}

static __always_inline void emit_view(struct sock_fifo_slot *slot, const struct read_view *v);

/* Makes slot `idx` visible to readers, after everything written into it: a
 * reader takes a slot only once its seq says so. The compiler must not sink
 * the slot's stores below this one (x86 keeps stores in order itself). A
 * plain store, not an exchange: a locked instruction here would wait for the
 * slot's line to come back from the reader's CPU, ~150 ns a packet. What
 * that costs the overtaking read is in PEND_WAIT_LOADS. */
static __always_inline void publish(struct sock_fifo_slot *slot, __u32 idx)
{
	barrier();
	*(volatile __u32 *)&slot->seq = idx + 1;
}

/* A read that overtakes its slot's publication sets its pend mark (an
 * exchange, a full barrier), then looks at the slot's seq; the publisher
 * stores seq, then looks at the mark. Without a barrier between the
 * publisher's store and load, both can miss the other's write (the store
 * still in its CPU's store buffer) and the read gets no record. So the
 * reader keeps looking at seq for a while: the publisher's store becomes
 * visible within a store buffer's drain, and a publisher slower than that
 * has not made its load yet, so it will see the mark. */
#define PEND_WAIT_LOADS 256
static __always_inline bool published_soon(struct sock_fifo_slot *slot, __u32 idx)
{
	for (int i = 0; i < PEND_WAIT_LOADS; i++)
		if (*(volatile __u32 *)&slot->seq == idx + 1)
			return true;
	return false;
}

/* Moves the packet of `skb` (its stash entry `e`) to the FIFO of `sk`;
 * returns its slot index + 1, or 0 when it was not queued (or was emitted at
 * once). `queued`: the skb, where the hook found it on a queue after its
 * queueing (sock:sk_data_ready), to check it is still there; else NULL. */
static __always_inline __u32 fifo_push(__u64 sk_key, __u64 skb_key, struct netlatd_stash_entry *e, __u64 now,
				       struct sk_buff *queued)
{
	struct fifo *st = fifo_get(sk_key, e->rx.l4proto, true);
	if (!st) {
		stash_claim(e, skb_key);
		return 0;
	}
	/* Two producers (CPUs) may race for one socket: reserve with an atomic
	 * and publish the slot last. The margin of 2 covers that race. The
	 * readers' head is read only when the last look at it says full. */
	if (st->h.tail - st->h.head_seen >= NETLATD_SOCK_FIFO_SLOTS - 2) {
		st->h.head_seen = st->h.head;
		if (st->h.tail - st->h.head_seen >= NETLATD_SOCK_FIFO_SLOTS - 2) {
			if (stash_claim(e, skb_key))
				COUNT(drops, NETLATD_DROP_SOCK_FIFO_FULL);
			return 0;
		}
	}
	/* Data-ready calls on two CPUs can both find the packet. Each reserves
	 * a slot first, then the one whose claim succeeds fills it and the
	 * other publishes its slot as dead, which readers skip: so a CPU that
	 * moves X then Y can never put Y ahead of X, whoever wins each. */
	__u32 idx = __sync_fetch_and_add(&st->h.tail, 1);
	struct sock_fifo_slot *slot = &st->slots[idx & (NETLATD_SOCK_FIFO_SLOTS - 1)];
	/* The entry is read before the claim (a newer packet may take it after)
	 * and the slot written after: the slot's line was last read by the
	 * reader's CPU, and a locked instruction waits for earlier stores. */
	struct netlatd_rx rx;
	__builtin_memcpy(&rx, &e->rx, sizeof(rx));
	__u32 *pend = &st->h.pend_seq[idx & (NETLATD_FIFO_PEND - 1)];
	/* Found on a queue, but a reader may have taken it since (dequeued, an
	 * skb is unlinked: next is NULL). If that read's return came before
	 * this reservation, it found the FIFO empty at this index or an earlier
	 * one (empty_at) and was counted; pushed now, the slot would be popped
	 * by a later read, every record after it one read late until the
	 * queues drain (see realign_at_drain): it is published dead instead,
	 * once per such read. Otherwise the read's return is still to come and
	 * takes this slot, with its record. */
	bool taken = false;
	if (queued && !queued->next) {
		__u32 empty = st->h.empty_at;
		taken = empty && (__s32)(idx + 1 - empty) >= 0 &&
			__sync_val_compare_and_swap(&st->h.empty_at, empty, 0) == empty;
	}
	if (taken)
		stash_claim(e, skb_key);
	if (taken || !stash_claim(e, skb_key)) {
		slot->skb = 0;
		slot->dead = 1;
		publish(slot, idx);
		/* A read that took this slot got the datagram of the slot
		 * that won: its record is lost, and counted. */
		if (*pend == idx + 1 && __sync_val_compare_and_swap(pend, idx + 1, 0) == idx + 1)
			COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
		return 0;
	}
	__builtin_memcpy(&slot->rx, &rx, sizeof(rx));
	slot->dead = 0;
	slot->queue_after = before(now, rx.receive_ns);
	slot->wake_after = 0;
	slot->skb = skb_key;
	publish(slot, idx);
	st->h.queued_ns = now;
	COUNT(counters, NETLATD_CNT_QUEUED);
	/* A reader already returned this datagram (and took the slot) while it
	 * was being published: its view waits for the record. */
	if (*pend == idx + 1 && __sync_val_compare_and_swap(pend, idx + 1, 0) == idx + 1) {
		struct read_view v;
		__builtin_memcpy(&v, &st->pend[idx & (NETLATD_FIFO_PEND - 1)], sizeof(v));
		emit_view(slot, &v);
		return 0; /* read already: no wake-up hint for it */
	}
	return idx + 1;
}

/* An older datagram of a batch (see enqueue_from_tail): no wake-up follows
 * for it. A global function, so the verifier checks it once, not per call. */
__noinline int netlatd_push_older(__u32 i, __u64 now)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	__u64 sk_key = cs->batch_sk;
	__u64 skb_key = cs->batch_skb[i & (UDP_TAIL_WALK - 1)];
	struct netlatd_stash_entry *e = stash_find(skb_key);
	if (!e)
		return 0;
	return fifo_push(sk_key, skb_key, e, now, bpf_core_cast((void *)skb_key, struct sk_buff)) != 0;
}

/* A TCP segment coalesced into another skb (see on_tcp_probe); the socket is
 * in this CPU's batch_sk. Global, so the verifier checks it once. */
__noinline int netlatd_push_segment(__u64 skb_key, __u32 end_seq, __u64 now)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	struct netlatd_stash_entry *e = stash_find(skb_key);
	/* The freed skb's address may carry a newer packet by now. */
	if (!e || e->rx.end_seq != end_seq || e->rx.l4proto != IPPROTO_TCP)
		return 0;
	return fifo_push(cs->batch_sk, skb_key, e, now, 0) != 0;
}

/* `wake_follows`: the hook runs before the enqueue call's wake-up (the
 * tracepoints, fentry); after it (fexit) no hint may be left, or an
 * unrelated later waking would be stamped. */
static __always_inline void enqueue_tracked(void *sk, __u64 skb_key, struct netlatd_stash_entry *e,
					    __u64 now, bool wake_follows, struct sk_buff *queued)
{
	__u32 pushed = fifo_push((__u64)sk, skb_key, e, now, queued);
	if (!pushed || !wake_follows)
		return;
	__u32 idx = pushed - 1;

	/* The data-ready call that follows wakes a reader only if one sleeps
	 * on the socket; then that waking is the next one on this CPU. */
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return;
	if (has_sleeper(sk)) {
		cs->wake_hint_ts = now;
		cs->wake_hint_sk = (__u64)sk;
		cs->wake_hint_idx = idx;
	} else {
		cs->wake_hint_ts = 0;
	}
}

static __always_inline bool try_enqueue_skb(void *sk, struct sk_buff *skb, __u64 now, bool wake_follows)
{
	__u64 key = (__u64)skb;
	struct netlatd_stash_entry *e = stash_find(key);
	if (!e)
		return false;
	enqueue_tracked(sk, key, e, now, wake_follows, 0);
	return true;
}


/* Tracked skbs at the tail of one of the socket's queues, oldest first. UDP
 * producers may batch several datagrams before one data-ready call (6.18's
 * per-NUMA producer queues), so walk back from the tail. */
static __always_inline int enqueue_from_tail(struct sock *sk, struct sk_buff_head *q, __u64 now)
{
	struct sk_buff *tail = q->prev;
	if (!tail || (void *)tail == (void *)q)
		return 0;
	__u64 tail_key = (__u64)tail;
	struct netlatd_stash_entry *e = stash_find(tail_key);
	if (!e)
		return 0;
	/* The common case: only the newest datagram is waiting to be moved. */
	struct sk_buff *skb = tail->prev;
	__u64 key = (__u64)skb;
	if (!skb || (void *)skb == (void *)q || !stash_find(key)) {
		enqueue_tracked(sk, tail_key, e, now, true, tail);
		return 1;
	}
	/* A batch: collect it back from the tail, then move it oldest first,
	 * the newest last (the wake-up that follows is for it). */
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->batch_sk = (__u64)sk;
	cs->batch_skb[1] = key;
	int n = 2;
	skb = skb->prev;
	for (int i = 2; i < UDP_TAIL_WALK; i++) {
		key = (__u64)skb;
		if (!skb || (void *)skb == (void *)q || !stash_find(key))
			break;
		cs->batch_skb[i] = key;
		n = i + 1;
		skb = skb->prev;
	}
	for (int i = UDP_TAIL_WALK - 1; i >= 1; i--) {
		if (i < n)
			netlatd_push_older(i, now);
	}
	/* The tail's entry found above: the claim checks it is still its. */
	enqueue_tracked(sk, tail_key, e, now, true, tail);
	return n;
}

/* Whether the newest datagram in the FIFO of `sk` is still on its receive
 * queue (among its last few), or is being published: then a datagram now found
 * on the reader's queue is older than it. */
#define RQ_LOOK_BACK 4
static __always_inline bool newest_still_queued(struct sock *sk)
{
	struct fifo *st = fifo_get((__u64)sk, 0, false);
	if (!st)
		return false;
	__u32 n = st->h.tail - 1;
	struct sock_fifo_slot *slot = &st->slots[n & (NETLATD_SOCK_FIFO_SLOTS - 1)];
	if (slot->seq != n + 1)
		return st->h.tail != 0; /* reserved by another CPU right now */
	__u64 newest = slot->skb;
	struct sk_buff_head *rq = &sk->sk_receive_queue;
	struct sk_buff *skb = rq->prev;
	for (int i = 0; i < RQ_LOOK_BACK; i++) {
		if (!skb || (void *)skb == (void *)rq)
			return false;
		if ((__u64)skb == newest)
			return true;
		skb = skb->prev;
	}
	return false;
}

/* Datagrams at the tail of the reader's queue still to be moved: the reader
 * spliced the receive queue into its own before their data-ready call ran
 * (with 6.18's batched producers, a batch of several). If a newer datagram
 * was moved meanwhile, moving these now would put the FIFO out of the
 * socket's order: they are left out, and counted. */
static __always_inline void enqueue_spliced(struct sock *sk, __u64 now)
{
	struct udp_sock *up = bpf_core_cast(sk, struct udp_sock);
	struct sk_buff_head *q = &up->reader_queue;
	struct sk_buff *t = q->prev;
	if (!t || (void *)t == (void *)q)
		return;
	__u64 key = (__u64)t;
	struct netlatd_stash_entry *e = stash_find(key);
	if (!e)
		return;
	if (newest_still_queued(sk)) {
		if (stash_claim(e, key))
			COUNT(drops, NETLATD_DROP_REORDERED);
		return;
	}
	enqueue_from_tail(sk, q, now);
}

/* Whether this CPU alone has received the port's packets for a while: then
 * every datagram still to move on the socket was received here, before the
 * one this data-ready call is for. */
static __always_inline bool sole_producer(int pidx, __u64 now)
{
	struct port_producers *pp = &port_prod[pidx & (NETLATD_MAX_PORTS - 1)];
	return pp->last_cpu == bpf_get_smp_processor_id() + 1 && (__s64)(now - pp->mixed_until) > 0;
}

/* UDP data-ready (6.5+ tracepoint): the datagram is already on a queue. */
static __always_inline int on_sk_data_ready(struct sock *sk)
{
	ARM(ARMED_SOCK_QUEUE);
	/* tp_btf only (the tracepoint is 6.5+): fields are read directly. */
	if (sk->sk_protocol != IPPROTO_UDP)
		return 0;
	int pidx = port_index(sk->__sk_common.skc_num);
	if (pidx < 0)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct sk_buff_head *rq = &sk->sk_receive_queue;
	/* The common case, one CPU feeding the port: no other CPU's datagram can
	 * be waiting for its data-ready call in the reader's queue, so that
	 * queue (its line is the reader CPU's: one cache miss a packet) is
	 * looked at only if this call's datagram is no longer on the receive
	 * queue, the reader having spliced it into its own already. */
	if (sole_producer(pidx, now)) {
		if (!enqueue_from_tail(sk, rq, now))
			enqueue_spliced(sk, now);
		return 0;
	}
	/* Several CPUs: whatever the reader spliced into its own queue is older
	 * than what is on the receive queue, so it goes first. */
	enqueue_spliced(sk, now);
	enqueue_from_tail(sk, rq, now);
	return 0;
}

/* UDP enqueue on kernels without sock:sk_data_ready, at its entry (fentry):
 * like the tracepoint, before the wake-up the call makes, so the slot is
 * published before the reader can dequeue the datagram and the wake-up is
 * hinted to this datagram's slot (netif_receive_skb cannot name it: GRO hands
 * the stack lists of skbs, so several pass it before the first is queued). */
static __always_inline int on_udp_enqueue_entry(struct sock *sk, struct sk_buff *skb)
{
	ARM(ARMED_SOCK_QUEUE);
	try_enqueue_skb(sk, skb, bpf_ktime_get_ns(), true);
	return 0;
}

/* UDP enqueue on kernels without sock:sk_data_ready (fexit: ret 0 = queued). */
static __always_inline int on_udp_enqueue_return(struct sock *sk, struct sk_buff *skb, int ret)
{
	ARM(ARMED_SOCK_QUEUE);
	/* The wake-up, if any, happened inside the call: no hint is pending. */
	struct cpu_state *cs = this_cpu();
	if (cs)
		cs->wake_hint_ts = 0;
	if (ret != 0)
		return 0;
	try_enqueue_skb(sk, skb, bpf_ktime_get_ns(), false);
	return 0;
}

/* TCP: tcp_rcv_established() is about to queue the segment (tcp:tcp_probe). */
#define TCP_COALESCED_MAX 32
/* Segments one TCP receive return pops at most; any more wait for the next. */
#define TCP_POP_MAX 64

static __always_inline int on_tcp_probe(struct sock *sk, struct sk_buff *skb)
{
	if (!port_watched(sk->__sk_common.skc_num))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 key = (__u64)skb;
	struct tcp_skb_cb *cb = (struct tcp_skb_cb *)&skb->cb[0];
	__u32 seq = cb->seq, end = cb->end_seq;
	struct netlatd_stash_entry *e = stash_find(key);
	if (e) {
		__u32 own_end = e->rx.end_seq;
		enqueue_tracked(sk, key, e, now, true, 0);
		if (own_end == end)
			return 0; /* the common case: nothing coalesced into it */
		seq = own_end;
	}
	/* The skb holds segments coalesced into it in the backlog: queue
	 * theirs too, in sequence order. */
	__u64 flow;
	if (sk->__sk_common.skc_family == 10 /* AF_INET6 */) {
		__u32 r[4], l[4];
		BPF_CORE_READ_INTO(&r, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&l, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		flow = tcp_flow(r[0] ^ r[1] ^ r[2] ^ r[3], l[0] ^ l[1] ^ l[2] ^ l[3],
				sk->__sk_common.skc_dport, bpf_htons(sk->__sk_common.skc_num));
	} else {
		flow = tcp_flow(sk->__sk_common.skc_daddr, sk->__sk_common.skc_rcv_saddr,
				sk->__sk_common.skc_dport, bpf_htons(sk->__sk_common.skc_num));
	}
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->batch_sk = (__u64)sk;
	for (int i = 0; i < TCP_COALESCED_MAX; i++) {
		if ((__s32)(end - seq) <= 0)
			break;
		struct tcp_seg_key k = {.flow = flow, .seq = seq};
		struct tcp_seg *sg = bpf_map_lookup_elem(&tcp_segs, &k);
		if (!sg)
			break;
		__u64 skey = sg->skb;
		__u32 send = sg->end_seq;
		bpf_map_delete_elem(&tcp_segs, &k);
		netlatd_push_segment(skey, send, now);
		seq = send;
	}
	return 0;
}

/* The kernel dropped a packet we were following. */
static __always_inline int on_kfree_skb(struct sk_buff *skb)
{
	__u64 key = (__u64)skb;
	struct netlatd_stash_entry *e = stash_find(key);
	if (e && stash_claim(e, key))
		COUNT(drops, NETLATD_DROP_STACK_DROPPED);
	return 0;
}

/* ---- the reading task --------------------------------------------------------- */

static __always_inline int on_sched_waking(struct task_struct *p)
{
	struct cpu_state *cs = this_cpu();
	if (!cs || !cs->wake_hint_ts)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 hint = cs->wake_hint_ts;
	cs->wake_hint_ts = 0;
	if (now - hint > 10000000)
		return 0;
	struct fifo *st = fifo_get(cs->wake_hint_sk, 0, false);
	if (!st)
		return 0;
	__u32 idx = cs->wake_hint_idx;
	struct sock_fifo_slot *slot = &st->slots[idx & (NETLATD_SOCK_FIFO_SLOTS - 1)];
	if (slot->seq != idx + 1 || slot->wake_after)
		return 0;
	slot->wake_after = before(now, slot->rx.receive_ns);
	return 0;
}

/* Every context switch: two stores to this CPU's state, nothing else. */
static __always_inline int on_sched_switch(struct task_struct *next)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->oncpu_tid = next->pid;
	cs->oncpu_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_skb_copy_datagram(void)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->copy_tid = (__u32)bpf_get_current_pid_tgid();
	cs->copy_ts = bpf_ktime_get_ns();
	return 0;
}

/* ---- the receive call returns ----------------------------------------------- */

static __always_inline void read_view_here(struct read_view *v, __u64 now, __u64 pid_tgid)
{
	__u32 tid = (__u32)pid_tgid;
	struct cpu_state *cs = this_cpu();
	v->now = now;
	v->pid_tgid = pid_tgid;
	v->cpu = bpf_get_smp_processor_id();
	v->oncpu_ts = cs && cs->oncpu_tid == tid ? cs->oncpu_ts : 0;
	v->copy_ts = cs && cs->copy_tid == tid ? cs->copy_ts : 0;
	/* The name with two loads instead of a helper call. */
	struct task_struct *task = bpf_get_current_task_btf();
	v->name[0] = *(__u64 *)&task->comm[0];
	v->name[1] = *(__u64 *)&task->comm[8];
}

static __always_inline void emit_view(struct sock_fifo_slot *slot, const struct read_view *v)
{
	struct netlatd_packet *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		COUNT(drops, NETLATD_DROP_RINGBUF_FULL);
		return;
	}
	const struct netlatd_rx *rx = &slot->rx;
	__u64 rcv = rx->receive_ns;
	__u64 now = v->now;
	__u64 queued = rcv + slot->queue_after;
	rec->stamp_ns[NETLATD_STAMP_IRQ] = rx->irq_before ? rcv - rx->irq_before : 0;
	rec->stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = rx->raise_before ? rcv - rx->raise_before : 0;
	rec->stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = rx->softirq_before ? rcv - rx->softirq_before : 0;
	rec->stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = rcv;
	rec->stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = queued;
	__u16 pflags = rx->flags;
	__u64 oncpu = 0, copy = 0;
	if (v->oncpu_ts) {
		/* On CPU: the reader's switch-in on its CPU, or the enqueue
		 * itself when it was already running then. */
		oncpu = min_u64(max_u64(queued, v->oncpu_ts), now);
		if (v->copy_ts >= oncpu && v->copy_ts <= now)
			copy = v->copy_ts;
	}
	rec->stamp_ns[NETLATD_STAMP_ONCPU] = oncpu;
	rec->stamp_ns[NETLATD_STAMP_COPY] = copy;
	/* A wake-up stamp only holds if the switch-in it caused is known
	 * (the enqueue made sure it is not older than the packet's queueing). */
	__u64 woke = slot->wake_after ? rcv + slot->wake_after : 0;
	if (woke && (!oncpu || woke > oncpu))
		woke = 0;
	rec->stamp_ns[NETLATD_STAMP_WAKEUP] = woke;
	if (woke)
		pflags |= NETLATD_PKT_WOKEN;
	rec->rx_cpu = rx->rx_cpu;
	rec->len = rx->len;
	rec->ifindex = rx->ifindex;
	rec->dport = rx->dport;
	rec->flags = pflags;
	rec->l4proto = rx->l4proto;
	__builtin_memset(rec->_pad, 0, sizeof(rec->_pad));
	rec->stamp_ns[NETLATD_STAMP_RECV_RETURN] = now;
	rec->reader_cpu = v->cpu;
	rec->reader_tgid = v->pid_tgid >> 32;
	rec->reader_tid = (__u32)v->pid_tgid;
	__u64 *name = (__u64 *)rec->reader_comm;
	name[0] = v->name[0];
	name[1] = v->name[1];

	/* No wake-up per record: the daemon drains on a timer, and is woken
	 * when the ring is filling up, which is checked every 32nd record a
	 * CPU writes (a query is a helper call). */
	__u64 flags = BPF_RB_NO_WAKEUP;
	struct cpu_state *cs = this_cpu();
	if (cs && (++cs->emitted & 31) == 0 && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= targ_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
	COUNT(counters, NETLATD_CNT_EMITTED);
}

static __always_inline void emit(struct sock_fifo_slot *slot, __u64 now, __u64 pid_tgid)
{
	struct read_view v;
	read_view_here(&v, now, pid_tgid);
	emit_view(slot, &v);
}

#define UDP_POP_MAX 8

/* The skb a UDP receive call will dequeue next: the reader queue's head, or the
 * receive queue's when the reader queue is empty; 0 when both are. */
static __always_inline __u64 udp_next_skb(struct sock *sk)
{
	struct udp_sock *up = (struct udp_sock *)sk;
	struct sk_buff *head = BPF_CORE_READ(up, reader_queue.next);
	if (head && (void *)head != (void *)&up->reader_queue)
		return (__u64)head;
	head = sk->sk_receive_queue.next;
	if (head && (void *)head != (void *)&sk->sk_receive_queue)
		return (__u64)head;
	return 0;
}

/* Whether skb address `skb`, held by the oldest slot h, is also in one of the
 * newest slots: the datagram of slot h was read, its skb freed and reused
 * for a datagram queued since. Reuse is quick (per-CPU caches), so looking at
 * the last few slots is enough. */
#define REUSE_LOOK_BACK 4
static __always_inline bool queued_again(struct fifo *st, __u32 h, __u64 skb)
{
	__u32 tail = st->h.tail;
	for (__u32 i = 1; i <= REUSE_LOOK_BACK; i++) {
		__u32 n = tail - i;
		if ((__s32)(n - h) <= 0)
			return false;
		struct sock_fifo_slot *slot = &st->slots[n & (NETLATD_SOCK_FIFO_SLOTS - 1)];
		if (slot->seq == n + 1 && slot->skb == skb)
			return true;
	}
	return false;
}

/* Drops the dead slots (see fifo_push) at the head of a FIFO. */
static __always_inline void skip_dead(struct fifo *st)
{
	for (int i = 0; i < 4; i++) {
		__u32 h = st->h.head;
		struct sock_fifo_slot *slot = &st->slots[h & (NETLATD_SOCK_FIFO_SLOTS - 1)];
		/* Not published (or empty): not known dead. */
		if (slot->seq != h + 1 || !slot->dead)
			return;
		__sync_val_compare_and_swap(&st->h.head, h, h + 1);
	}
}

/* A read found the FIFO empty or missing (see on_recv_return, fifo_get) and
 * the socket's queues are empty now: every published slot's datagram has been
 * read (a slot is published once its datagram is queued). Pops them all; this
 * read's record is the newest live one, and the older ones are the datagrams
 * of those reads, counted then (untracked_dequeue), not again. Rare: only
 * after such a read, and only when the reader has caught up. */
static __always_inline void realign_at_drain(struct fifo *st, __u32 h, __u64 now, __u64 pid_tgid)
{
	st->h.suspect = 0;
	__u32 n = 0, last_live = 0;
	for (__u32 i = 0; i < UDP_POP_MAX; i++) {
		struct sock_fifo_slot *s = &st->slots[(h + i) & (NETLATD_SOCK_FIFO_SLOTS - 1)];
		if (s->seq != h + i + 1)
			break;
		n = i + 1;
		if (!s->dead)
			last_live = i + 1;
	}
	if (!n || __sync_val_compare_and_swap(&st->h.head, h, h + n) != h)
		return;
	if (last_live)
		emit(&st->slots[(h + last_live - 1) & (NETLATD_SOCK_FIFO_SLOTS - 1)], now, pid_tgid);
}

static __always_inline int on_recv_return(struct sock *sk, int ret, int flags)
{
	ARM(ARMED_RECV_RETURN);
	if (ret < 0 || (flags & MSG_PEEK_FLAG) || !sk)
		return 0;
	/* Every receive call on the host passes here: sockets on other ports
	 * leave before any map lookup. */
	if (!port_watched(sk->__sk_common.skc_num))
		return 0;
	__u64 sk_key = (__u64)sk;
	struct fifo *st = fifo_get(sk_key, 0, false);
	if (!st) {
		/* Its FIFO may be being made right now (see fifo_get). */
		__u64 *hint = nofifo_hint(sk_key);
		if (hint)
			*hint = sk_key;
		return 0;
	}

	__u64 now = bpf_ktime_get_ns();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	st->h.read_ns = now;
	skip_dead(st);

	/* The FIFO's creator writes its protocol just after inserting it: a
	 * read that instant (the first datagram's, from another CPU) finds 0
	 * there, and would take the TCP path, lose its record and leave every
	 * later one a datagram behind. Then the socket says. */
	__u8 proto = st->h.l4proto;
	if (!proto)
		proto = sk->sk_protocol;
	if (proto == IPPROTO_UDP) {
		/* Where the receive return is an fexit, skb_consume_udp (fentry)
		 * named the datagram this call read: pop up to its slot. Slots
		 * before it were read by calls the fexit did not see (one in
		 * progress when it was attached, one that returned before the
		 * enqueue's slot was published); counting calls instead would
		 * shift every later record by one datagram. */
		struct cpu_state *cs = this_cpu();
		if (cs && cs->consumed_tid == (__u32)pid_tgid && cs->consumed_skb) {
			__u64 consumed = cs->consumed_skb;
			cs->consumed_skb = 0;
			__u32 h0 = st->h.head;
			__u32 found = 0;
			for (__u32 i = 0; i < UDP_POP_MAX; i++) {
				__u32 h = h0 + i;
				struct sock_fifo_slot *slot = &st->slots[h & (NETLATD_SOCK_FIFO_SLOTS - 1)];
				if (slot->seq != h + 1)
					break; /* not published yet, or past the tail */
				if (slot->skb == consumed) {
					found = i + 1;
					break;
				}
			}
			if (!found) {
				COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
				return 0;
			}
			if (__sync_val_compare_and_swap(&st->h.head, h0, h0 + found) != h0)
				return 0; /* another thread of the reader popped */
			for (__u32 i = 0; i + 1 < found && i < UDP_POP_MAX; i++)
				COUNT(drops, NETLATD_DROP_UNSEEN_READ);
			emit(&st->slots[(h0 + found - 1) & (NETLATD_SOCK_FIFO_SLOTS - 1)], now, pid_tgid);
			return 0;
		}
		/* An empty FIFO, or its oldest slot still being published: this
		 * call read a datagram netlatd has not moved into the FIFO (the
		 * reader was quicker than the data-ready call). */
		__u32 h = st->h.head;
		struct sock_fifo_slot *slot = &st->slots[h & (NETLATD_SOCK_FIFO_SLOTS - 1)];
		if (slot->seq != h + 1) {
			/* The producers' line is read only here. */
			if (h == st->h.tail) {
				COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
				st->h.empty_at = h + 1; /* see fifo_push */
				/* Its datagram may still be pushed (the data-ready
				 * call found it queued before this read took it):
				 * that slot would then be popped by the next read,
				 * every record after it one read late. */
				if (!st->h.suspect)
					st->h.suspect = 1;
				return 0;
			}
			/* Reserved, not yet published: this read takes the slot
			 * now (so the next read looks at the one after) and hands
			 * its view to the publisher, or emits the record itself if
			 * the slot has just been published. */
			if (__sync_val_compare_and_swap(&st->h.head, h, h + 1) != h)
				return 0; /* another thread of the reader took it */
			__u32 k = h & (NETLATD_FIFO_PEND - 1);
			__u32 *pend = &st->h.pend_seq[k];
			if (*pend) {
				/* More reads ahead of publication than views kept. */
				COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
				return 0;
			}
			read_view_here(&st->pend[k], now, pid_tgid);
			__sync_lock_test_and_set(pend, h + 1);
			if (published_soon(slot, h) && __sync_val_compare_and_swap(pend, h + 1, 0) == h + 1) {
				if (slot->dead)
					COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
				else
					emit(slot, now, pid_tgid);
			}
			return 0;
		}
		if (slot->dead)
			return 0; /* more dead slots in a row than skip_dead takes */
		__u64 next = udp_next_skb(sk);
		/* Our oldest datagram is still queued: this call read one we did
		 * not track. Unless its address now holds a newer datagram: the
		 * read freed it and it was reused, and the newcomer is still in
		 * `stash` (its data-ready call has not run yet) or already in one
		 * of the newest slots. */
		if (slot->skb && slot->skb == next && !stash_find(next) && !queued_again(st, h, next)) {
			COUNT(drops, NETLATD_DROP_UNTRACKED_DEQUEUE);
			return 0;
		}
		if (st->h.suspect && !next && targ_push_after_queue) {
			realign_at_drain(st, h, now, pid_tgid);
			return 0;
		}
		if (__sync_val_compare_and_swap(&st->h.head, h, h + 1) != h)
			return 0; /* another thread of the reader popped it */
		emit(slot, now, pid_tgid);
		return 0;
	}

	/* TCP: every queued segment that ends at or below copied_seq has been read. */
	__u32 copied = BPF_CORE_READ((struct tcp_sock *)sk, copied_seq);
	for (int i = 0; i < TCP_POP_MAX; i++) {
		__u32 h = st->h.head;
		struct sock_fifo_slot *slot = &st->slots[h & (NETLATD_SOCK_FIFO_SLOTS - 1)];
		if (slot->seq != h + 1)
			break; /* empty, or not published yet */
		if (slot->dead) {
			__sync_val_compare_and_swap(&st->h.head, h, h + 1);
			continue;
		}
		if ((__s32)(slot->rx.end_seq - copied) > 0)
			break;
		if (__sync_val_compare_and_swap(&st->h.head, h, h + 1) != h)
			break;
		emit(slot, now, pid_tgid);
	}
	return 0;
}

/* ---- program variants ----------------------------------------------------------
 * Names are <point>_<kind>; src/hooks.cpp lists them per point in order of
 * preference. */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_entry_btf, int irq) { return on_irq_handler_entry(irq); }

SEC("tp_btf/softirq_raise")
int BPF_PROG(sirq_raise_btf, unsigned int vec) { return on_softirq_raise(vec); }

SEC("tp_btf/softirq_entry")
int BPF_PROG(sirq_entry_btf, unsigned int vec) { return on_softirq_entry(vec); }

SEC("tp_btf/softirq_exit")
int BPF_PROG(sirq_exit_btf, unsigned int vec) { return on_softirq_exit(vec); }

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(rcv_skb_btf, struct sk_buff *skb) { return on_netif_receive_skb(skb); }

SEC("tp_btf/sk_data_ready")
int BPF_PROG(udp_queue_btf, struct sock *sk) { return on_sk_data_ready(sk); }
/* A UDP receive call dequeued this datagram (kernels whose receive return
 * is an fexit). */
SEC("fentry/skb_consume_udp")
int BPF_PROG(udp_consume_fentry, struct sock *sk, struct sk_buff *skb)
{
	struct cpu_state *cs = this_cpu();
	if (cs) {
		cs->consumed_skb = (__u64)skb;
		cs->consumed_tid = (__u32)bpf_get_current_pid_tgid();
	}
	return 0;
}
SEC("fentry/__udp_enqueue_schedule_skb")
int BPF_PROG(udp_queue_fentry, struct sock *sk, struct sk_buff *skb) { return on_udp_enqueue_entry(sk, skb); }
SEC("fexit/__udp_enqueue_schedule_skb")
int BPF_PROG(udp_queue_fexit, struct sock *sk, struct sk_buff *skb, int ret)
{
	return on_udp_enqueue_return(sk, skb, ret);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_queue_btf, struct sock *sk, struct sk_buff *skb) { return on_tcp_probe(sk, skb); }

SEC("tp_btf/kfree_skb")
int BPF_PROG(drop_skb_btf, struct sk_buff *skb) { return on_kfree_skb(skb); }

SEC("tp_btf/sched_waking")
int BPF_PROG(waking_btf, struct task_struct *p) { return on_sched_waking(p); }

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_sched_switch(next);
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(copy_btf) { return on_skb_copy_datagram(); }

SEC("tp_btf/sock_recv_length")
int BPF_PROG(recv_ret_btf, struct sock *sk, int ret, int flags) { return on_recv_return(sk, ret, flags); }
SEC("fexit/sock_recvmsg")
int BPF_PROG(recv_ret_fexit, struct socket *sock, struct msghdr *msg, int flags, int ret)
{
	return on_recv_return(sock->sk, ret, flags);
}
