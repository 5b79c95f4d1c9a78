/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the types of the UDP join by queue order, in plain C:
 * the BPF object and the unit tier's checker of its rules
 * (tests/unit/order/) compile the same definitions. */
#ifndef NETLATD_UDP_ORDER_TYPES_H
#define NETLATD_UDP_ORDER_TYPES_H

/* Records a UDP read builds under its socket's lock and emits after it. */
#define UDP_OUT_MAX 32

/* A UDP queue slot: one datagram, in the order the socket queued it. 64
 * bytes. Where no hook names the datagram a read took, every datagram the
 * socket queues gets a slot (queue.bpf.h): one netlatd tracked, or a
 * placeholder with no record to give (another interface's, one queued before
 * netlatd started, or one a read took before its data-ready call could look). */
struct udp_slot {
	struct netlatd_rx rx;  /* a placeholder: only rx.len (of a queued untracked one) */
	__u64 skb;             /* 0: a placeholder for a datagram already dequeued */
	__u32 queue_after;     /* queued, after rx.receive_ns */
	__u8 state;            /* SLOT_LIVE, SLOT_DONE */
	__u8 marked;           /* a candidate of an ambiguous read */
	__u8 no_record;        /* a placeholder, or dropped by the kernel: nothing to emit */
	__u8 gone;             /* dequeued before its slot was made: length unknown, and
				* a candidate of every read wherever it sits */
};
#define SLOT_LIVE 1
#define SLOT_DONE 2

/* Datagrams one receive call may drop that its return settles (a read
 * among others taking bursts can meet several bad ones in a row). */
#define READ_DROPS 8

#define UDP_SMALL_SLOTS 8
/* Slots a read or a data-ready call looks at past the head: the datagrams
 * taken by reads in flight and the newest ones. */
#define UDP_SCAN 16
/* 56 KiB: a socket-storage value must stay under 64 KiB (1,024 slots of 64
 * bytes were refused), and it is charged against net.core.optmem_max, 128 KiB
 * by default since 6.9; below (20 KiB before it) a socket cannot have them,
 * and stays on its inline slots (the daemon says so at start and in
 * --check). Each doubling from 256 cut what a reader far behind loses at
 * 200k pps on 6.18 (docs/BENCHMARKS.md). */
#define UDP_BIG_SLOTS 1024

struct udp_sock_state {
	struct bpf_spin_lock lock;  /* guards everything below and the socket's udp_big */
	__u32 head;                 /* oldest slot not yet DONE */
	__u32 tail;                 /* next slot to fill */
	__u32 big;                  /* the slots live in the socket's udp_big storage */
	__u32 marked;               /* LIVE slots marked by ambiguous reads */
	__u32 owed;                 /* ambiguous reads, each of which took one marked slot */
	__u32 incomplete;           /* a datagram got no slot: reads are no longer named */
	__u32 gone;                 /* LIVE slots of datagrams dequeued before their slot was made */
	__u32 live;                 /* LIVE slots */
	__u32 missing;              /* datagrams that got no slot since the slots last mirrored
				     * the queue (retire.h resync_slots) */
	__u32 owed_unsure;          /* a read owed a datagram that may never get a slot
				     * (netlatd.bpf.c on_udp_read): owed may be one too many */
	__u32 owed_unseen;          /* an owing read may have left its own datagram unmarked:
				     * its candidates ran past UDP_MARK_REACH (decide.h) */
	__u32 reader_tid;           /* the first thread to read the socket */
	__u32 readers_many;         /* another thread has read it too */
	__u32 resynced;             /* the slots were resynced at least once */
	__u32 drops_unsure;         /* a read dropped a datagram whose slot could not be told
				     * for sure: stale slots are never written out (resync_slots) */
	__u32 stamped;              /* LIVE slots with stamps (not placeholders): those a resync
				     * gives up without a record are counted (order_given_up) */
	__u32 spilled;              /* stamps kept in the socket's udp_spill (slots.h spill_stamps) */
	__u32 spill_busy;           /* a read is writing the spill out: nothing joins it meanwhile */
	struct udp_slot small[UDP_SMALL_SLOTS];
};

struct udp_big_state {
	struct udp_slot slots[UDP_BIG_SLOTS];
};

/* What a resync writes out (retire.h resync_slots): the packet's half of a
 * stale slot, copied under the lock into the reading CPU's buffer and written
 * as a packet-only record after the unlock. 48 bytes. */
struct udp_resync_rec {
	struct netlatd_rx rx;
	__u32 queue_after;
	__u32 _pad;
};

/* The stamps of datagrams that found the big slots full, in the order they
 * came (socket-local storage, only for a socket that once did): written out
 * with the stale slots when the socket is next found drained (retire.h
 * write_stale). 61,440 bytes, beside the big slots' 57,344: a socket-storage
 * value must stay under 64 KiB. With it, a reader 2,304 datagrams behind
 * loses none; without it, every datagram past the 1,024 slots lost its
 * stamps (sock_fifo_full, the most lost at the bench's max rate). */
#define UDP_SPILL 1280
struct udp_spill_state {
	struct udp_resync_rec recs[UDP_SPILL];
};

/* One CPU's buffer of them (map udp_resync_outs, one per possible CPU): room
 * for every slot a socket can have, so that a resync gives none up. */
struct udp_resync_out {
	struct udp_resync_rec recs[UDP_BIG_SLOTS];
};

/* Counts a push made under the lock, added after it. */
struct push_counts {
	__u32 pushed;      /* slots filled */
	__u32 full;        /* stamps claimed but no slot left (sock_fifo_full) */
	__u32 lost_order;  /* the socket's slots stopped mirroring its queue */
	__u32 spilled;     /* stamps kept in the spill instead (slots.h push_full) */
};

/* What a read knows before it takes its socket's lock (where no kfunc, not
 * even a type cast, may be called). */
struct udp_read_in {
	__u64 head;      /* queue_head() */
	__u32 tail;      /* the socket's slot tail, read before the head: slots made after
			  * it (index >= tail) are not in the look (decide.h look_fresh) */
	__u32 missing;   /* its datagrams that got no slot, read with the tail */
	__u32 ret;       /* what the read returned */
	__u32 bufsize;   /* 0 = unknown */
	bool trunc;      /* MSG_TRUNC: ret is the datagram's whole length */
	bool quiet;      /* producers_quiet() and no drops_pending, or pushes precede queueing */
	bool sole;       /* one CPU alone feeds the port */
	__u32 tid;       /* the reading thread */
};

/* How a read was decided. READ_EARLY: it took a datagram before the socket's
 * data-ready call looked, and named the gone placeholder that kept that
 * datagram's stamps (slots.h push_stamps): its record has no reader. */
enum read_result { READ_MATCH = 1, READ_AMBIGUOUS, READ_UNTRACKED, READ_EARLY };

/* Where the socket's queues stand. */
enum head_kind { HEAD_EMPTY, HEAD_UNPUSHED, HEAD_SLOT };
struct head_pos {
	enum head_kind kind;
	__u32 idx;  /* HEAD_SLOT: its slot */
};

#endif /* NETLATD_UDP_ORDER_TYPES_H */
