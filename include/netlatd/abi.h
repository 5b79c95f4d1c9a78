/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The records and constants that cross the kernel/user-space boundary.
 * Included by bpf/netlatd.bpf.c (after vmlinux.h) and by the daemon (after
 * <linux/types.h>). Fixed-width types only, explicit padding, no includes:
 * the C++ side static_asserts the sizes.
 */
#ifndef NETLATD_ABI_H
#define NETLATD_ABI_H

#define NETLATD_ABI_VERSION 1

/* Ports watched in one run (--port may repeat). */
#define NETLATD_MAX_PORTS 16
/* IRQ lines of the interface, as a bitmap over irq numbers [0, 8192). */
#define NETLATD_IRQ_BITMAP_WORDS 128
/* Tracked packets queued on one socket and not read yet. */
#define NETLATD_SOCK_FIFO_SLOTS 2048
#define NETLATD_COMM_LEN 16

/*
 * The instants of one packet's receive path, in the order they happen.
 * Each is CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns); 0 = not seen.
 */
enum netlatd_stamp {
	NETLATD_STAMP_IRQ = 0,        /* irq_handler_entry of the NIC IRQ that started the softirq */
	NETLATD_STAMP_SOFTIRQ_RAISE,  /* NET_RX softirq_raise that preceded that softirq run */
	NETLATD_STAMP_SOFTIRQ_ENTRY,  /* NET_RX softirq_entry that processed the packet */
	NETLATD_STAMP_RECEIVE_SKB,    /* netif_receive_skb of the packet */
	NETLATD_STAMP_SOCK_QUEUE,     /* queued on the receiving socket */
	NETLATD_STAMP_WAKEUP,         /* the reading task woken (sched_waking) */
	NETLATD_STAMP_ONCPU,          /* the reading task on CPU (sched_switch in), or already there */
	NETLATD_STAMP_COPY,           /* skb_copy_datagram_iovec (TCP, non-linear UDP only) */
	NETLATD_STAMP_RECV_RETURN,    /* the receive call returned the data */
	NETLATD_STAMP_COUNT
};

enum netlatd_packet_flags {
	NETLATD_PKT_IPV6 = 1 << 0,
	NETLATD_PKT_TCP = 1 << 1,
	NETLATD_PKT_KSOFTIRQD = 1 << 2,   /* NET_RX ran in ksoftirqd */
	NETLATD_PKT_WOKEN = 1 << 3,       /* the reader slept and this packet woke it */
	NETLATD_PKT_IN_SOFTIRQ = 1 << 4,  /* netif_receive_skb ran inside a NET_RX softirq */
};

/* One ring-buffer record: one packet returned to user space. 128 bytes. */
struct netlatd_packet {
	__u64 stamp_ns[NETLATD_STAMP_COUNT]; /* 72 */
	__u32 rx_cpu;        /* CPU of netif_receive_skb */
	__u32 reader_cpu;    /* CPU the receive call returned on */
	__u32 reader_tgid;
	__u32 reader_tid;
	char reader_comm[NETLATD_COMM_LEN];
	__u32 len;           /* bytes of L4 payload */
	__u32 ifindex;
	__u16 dport;         /* host order */
	__u16 flags;         /* enum netlatd_packet_flags */
	__u8 l4proto;        /* IPPROTO_UDP / IPPROTO_TCP */
	__u8 _pad[11];
};

/*
 * Packets between netif_receive_skb and their socket's queue, by skb address:
 * a direct-mapped table of 2^NETLATD_STASH_BITS entries (map `stash`, see
 * bpf/netlatd.bpf.c). The daemon maps it to expire entries that never reached
 * a socket.
 */
#define NETLATD_STASH_BITS 13

/* What netif_receive_skb learned of a packet. 40 bytes. The earlier stamps
 * are kept as distances back from receive_ns (0 = not seen): no stage before
 * it lasts 4 s. */
struct netlatd_rx {
	__u64 receive_ns;     /* NETLATD_STAMP_RECEIVE_SKB */
	__u32 irq_before;     /* receive_ns - NETLATD_STAMP_IRQ */
	__u32 raise_before;   /* receive_ns - NETLATD_STAMP_SOFTIRQ_RAISE */
	__u32 softirq_before; /* receive_ns - NETLATD_STAMP_SOFTIRQ_ENTRY */
	__u32 len;            /* bytes of L4 payload */
	__u32 ifindex;
	__u32 end_seq;        /* TCP: sequence number after the payload */
	__u16 rx_cpu;
	__u16 dport;          /* host order */
	__u16 flags;          /* enum netlatd_packet_flags */
	__u8 l4proto;
	__u8 _pad;
};

/* One entry of the `stash` table. 64 bytes, one cache line. */
struct netlatd_stash_entry {
	__u64 skb; /* the owner's address; 0 = free, 1 = being written */
	struct netlatd_rx rx;
	__u64 _pad[2];
};
#define NETLATD_STASH_FREE 0
#define NETLATD_STASH_BUSY 1

/* Reads that may overtake the publication of their slots at once, per socket. */
#define NETLATD_FIFO_PEND 4

/*
 * The start of a socket's FIFO (a value of the `sockets` map), as the
 * daemon's sweep of closed sockets reads it. Producers (enqueues) and readers
 * (receive returns) run on different CPUs and each write only their own
 * cache line; a producer reads the readers' line only when the FIFO looks
 * full by its last look at the head.
 */
struct netlatd_fifo_hdr {
	/* Written by producers. */
	__u32 tail;       /* next slot to fill */
	__u32 head_seen;  /* the head at a producer's last look */
	__u64 queued_ns;  /* last enqueue */
	/* Reads that returned while their datagram's slot was still being
	 * published, by slot index modulo NETLATD_FIFO_PEND: index + 1 while the
	 * reader's view waits there; whichever of the reader and the publisher
	 * clears it emits the record. Set by readers, rarely; checked by every
	 * push. */
	__u32 pend_seq[NETLATD_FIFO_PEND];
	__u8 _pad1[32];
	/* Written by readers. */
	__u32 head;       /* next slot to pop */
	__u32 suspect;    /* a read found the FIFO empty: realign at the next drain, even
			   * if a dead push answered empty_at (it may have been another's) */
	__u64 read_ns;    /* last receive return */
	__u8 l4proto;     /* set once, at creation; read by every receive return */
	__u8 _pad3[3];
	__u32 empty_at;   /* index + 1 at which a read last found the FIFO empty, 0 = none */
	__u8 _pad4[40];
};

/* A value of the `sockets` map starts with a __u32 giving the offset of the
 * FIFO (which starts with struct netlatd_fifo_hdr): the first 64-byte boundary
 * in memory at or past NETLATD_FIFO_OFF_MIN. */
#define NETLATD_FIFO_OFF_MIN 8

/* Why records were lost; per-CPU counters in the `drops` map. */
enum netlatd_drop {
	NETLATD_DROP_RINGBUF_FULL = 0,  /* bpf_ringbuf_reserve failed */
	NETLATD_DROP_INFLIGHT_FULL,     /* both stash entries of its set were being written by other CPUs */
	NETLATD_DROP_SOCK_FIFO_FULL,    /* more than NETLATD_SOCK_FIFO_SLOTS unread on a socket */
	NETLATD_DROP_SOCKETS_FULL,      /* too many sockets with tracked packets */
	NETLATD_DROP_STACK_DROPPED,     /* the kernel dropped the packet (kfree_skb) */
	NETLATD_DROP_UNTRACKED_DEQUEUE, /* a receive call returned a datagram we did not track */
	NETLATD_DROP_UNJOINED,          /* its stash entry was taken by a newer packet before it was queued */
	NETLATD_DROP_UNSEEN_READ,       /* read by a receive call whose return netlatd did not see */
	NETLATD_DROP_REORDERED,         /* its queueing seen only after a newer datagram's: left out */
	NETLATD_DROP_COUNT
};

/* Per-CPU event counters in the `counters` map (for --check, bench, Prometheus). */
enum netlatd_counter {
	NETLATD_CNT_MATCHED = 0,   /* packets that passed the interface/port filter */
	NETLATD_CNT_QUEUED,        /* of those, seen queued on a socket */
	NETLATD_CNT_EMITTED,       /* records written to the ring buffer */
	NETLATD_CNT_IRQ,           /* NIC IRQs of the interface */
	NETLATD_CNT_COUNT
};

#endif /* NETLATD_ABI_H */
