/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * The records and constants that cross the kernel/user-space boundary.
 * Included by bpf/netlatd.bpf.c (after vmlinux.h) and by the daemon (after
 * <linux/types.h>). Fixed-width types only, explicit padding, no includes:
 * the C++ side static_asserts the sizes.
 */
#ifndef NETLATD_ABI_H
#define NETLATD_ABI_H

#define NETLATD_ABI_VERSION 3

/* Ports watched in one run (--port may repeat). */
#define NETLATD_MAX_PORTS 16
/* IRQ lines of the interface, as a bitmap over irq numbers [0, 8192). */
#define NETLATD_IRQ_BITMAP_WORDS 128
#define NETLATD_COMM_LEN 16
/* Interfaces one daemon traces at once (--iface repeated, all, irq), and the
 * entries of the `watch` map that stand for them and their lower devices. */
#define NETLATD_MAX_IFACES 64
#define NETLATD_WATCH_ENTRIES 1024
/* netlatd_watch_key.vlan of the entry that says a device's NAPI polls count
 * (napi_poll has no packet, so no tag to look up by). */
#define NETLATD_WATCH_NAPI 0xffff
/* Cgroup subtrees one run may keep (--cgroup may repeat). */
#define NETLATD_MAX_CGROUP_FILTERS 16

/*
 * The instants of one packet's receive path. Each is CLOCK_MONOTONIC
 * nanoseconds (bpf_ktime_get_ns); 0 = not seen. IRQ .. SOCK_QUEUE are the
 * packet's own; the rest are its reader's. CALL_START may come before the
 * packet arrived (a reader already waiting in its receive call), SWITCH_IN
 * before it was queued (a reader that never slept): the daemon derives where
 * the `oncpu` stage starts from them (netlatd_read_start, stage_math.h).
 * SYSCALL_EXIT is reserved: no hook writes it, and it is not on the path
 * the order check walks.
 */
enum netlatd_stamp {
	NETLATD_STAMP_IRQ = 0,        /* irq_handler_entry of the NIC IRQ during which NET_RX was raised */
	NETLATD_STAMP_SOFTIRQ_RAISE,  /* that NET_RX raise */
	NETLATD_STAMP_SOFTIRQ_ENTRY,  /* NET_RX softirq_entry that processed the packet */
	NETLATD_STAMP_RECEIVE_SKB,    /* netif_receive_skb of the packet */
	NETLATD_STAMP_SOCK_QUEUE,     /* queued on the receiving socket */
	NETLATD_STAMP_WAKEUP,         /* the reader woken by the socket after the packet was queued */
	NETLATD_STAMP_SWITCH_IN,      /* the reader's last switch-in on the CPU its read returned on */
	NETLATD_STAMP_CALL_START,     /* the receive call began (where a hook gives it) */
	NETLATD_STAMP_COPY,           /* skb_copy_datagram_iovec (TCP, non-linear UDP only) */
	NETLATD_STAMP_RECV_RETURN,    /* the receive call returned the data, in the socket layer */
	NETLATD_STAMP_SYSCALL_EXIT,   /* reserved: no hook writes it (there is no --syscall-exit) */
	NETLATD_STAMP_COUNT
};

enum netlatd_packet_flags {
	NETLATD_PKT_IPV6 = 1 << 0,
	NETLATD_PKT_TCP = 1 << 1,
	NETLATD_PKT_KSOFTIRQD = 1 << 2,   /* NET_RX ran in ksoftirqd */
	NETLATD_PKT_WOKEN = 1 << 3,       /* the reader slept and the socket woke it after this packet was queued */
	NETLATD_PKT_IN_SOFTIRQ = 1 << 4,  /* netif_receive_skb ran inside a NET_RX softirq */
	NETLATD_PKT_SLEPT_IN_CALL = 1 << 5, /* the reader was asleep inside this receive call, waiting for data */
	/* The reader's switch-in was not timed (the task had no netlatd state
	 * then: on_sched_switch), and so came before this call's start: it was
	 * on CPU from before the call to its return. Not a flag bit of the
	 * wire record: NETLATD_WIRE_BEFORE_CALL in its switch-in slot. */
	NETLATD_PKT_ON_CPU_BEFORE_CALL = 1 << 6,
};

/* Why a record has no reader: its packet-side stamps are its own, but which
 * read returned it cannot be proved (docs/JOIN.md). */
enum netlatd_reader_unknown {
	NETLATD_READER_KNOWN = 0,
	NETLATD_READER_AMBIGUOUS = 1,  /* several reads in flight could have returned it */
	NETLATD_READER_UNKNOWN_COUNT
};

/* One packet returned to user space, as the daemon holds it after decoding
 * the ring's records (src/decode/record.cpp): every stamp absolute, the reader named.
 * Not written by the kernel side. 144 bytes. */
struct netlatd_packet {
	__u64 stamp_ns[NETLATD_STAMP_COUNT]; /* 88 */
	__u32 reader_tgid;
	__u32 reader_tid;
	char reader_comm[NETLATD_COMM_LEN];
	__u32 len;           /* bytes of L4 payload */
	__u32 iface_id;      /* the traced interface it counts for (netlatd_watch.iface_id) */
	__u16 rx_cpu;        /* CPU of netif_receive_skb */
	__u16 reader_cpu;    /* CPU the receive call returned on */
	__u16 dport;         /* host order */
	__u16 sport;         /* host order */
	__u16 flags;         /* enum netlatd_packet_flags */
	__u8 l4proto;        /* IPPROTO_UDP / IPPROTO_TCP */
	__u8 reader_unknown; /* enum netlatd_reader_unknown */
	__u8 agg_checked;    /* --aggregate-check: the kernel side added this record to its histograms too */
	__u8 _pad[3];
	__u64 reader_cgroup; /* the reader's cgroup v2 id; 0 unless asked for (--by cgroup) or no reader */
};

/*
 * The ring buffer carries two kinds of record, told apart by size.
 *
 * struct netlatd_wire_packet (64 bytes, one cache line): one packet. Two
 * bases, each a full stamp: the packet's netif_receive_skb and its read's
 * return; every other stamp is a 32-bit distance from one of them. The
 * packet's own stages before the socket are short (the stash already keeps
 * them as distances); a reader's stamps may lie far before its return (a
 * call blocked for minutes, a task on CPU since long ago): one more than
 * 2^32 - 2 ns (4.29 s) before it is left out, never wrapped, and the
 * record marked NETLATD_WIRE_FAR (the daemon counts those records in
 * NETLATD_CNT_READER_STAMP_FAR).
 *
 * struct netlatd_wire_reader (40 bytes): what a reading task is called. The
 * kernel side writes one before a task's first packet record, and again
 * when its name, thread group or cgroup changed, always into the ring ahead
 * of the records it names (ring order is reservation order): the daemon
 * keeps the latest per thread id, so each packet record names its reader by
 * tid alone and is decoded with the reader as it was when the record was
 * written.
 */
#define NETLATD_WIRE_TID_BITS 22          /* PID_MAX_LIMIT on 64-bit: 2^22 */
#define NETLATD_WIRE_TID_MASK ((1u << NETLATD_WIRE_TID_BITS) - 1)
/* netlatd_wire_packet.tid_flags above the tid: enum netlatd_packet_flags
 * (its first 6 bits), then these. */
#define NETLATD_WIRE_AMBIGUOUS (1u << 6)   /* reader_unknown = NETLATD_READER_AMBIGUOUS */
#define NETLATD_WIRE_RX_UNKNOWN (1u << 7)  /* irq .. netif_receive_skb may be another copy's: left out */
#define NETLATD_WIRE_FAR (1u << 8)         /* a reader stamp was left out: over 4.29 s before the return */
#define NETLATD_WIRE_CPU_BITS 13           /* CONFIG_NR_CPUS is at most 8192 on every architecture */
#define NETLATD_WIRE_CPU_MASK ((1u << NETLATD_WIRE_CPU_BITS) - 1)
#define NETLATD_WIRE_IFACE_MASK 63u        /* iface_id 1..NETLATD_MAX_IFACES, 64 written as 0 */
/* A reader stamp's distance before the return, plus one (0 = not seen). */
#define NETLATD_WIRE_BEFORE_MAX 0xffffffffull
/* reader_before[NETLATD_WIRE_SWITCH_IN] never holds BEFORE_MAX as a
 * distance; there it stands for NETLATD_PKT_ON_CPU_BEFORE_CALL. */
#define NETLATD_WIRE_BEFORE_CALL 0xffffffffu

enum netlatd_wire_reader_stamp {
	NETLATD_WIRE_SWITCH_IN = 0,
	NETLATD_WIRE_CALL_START,
	NETLATD_WIRE_WAKEUP,
	NETLATD_WIRE_COPY,
	NETLATD_WIRE_READER_STAMPS
};

struct netlatd_wire_packet {
	__u64 recv_return_ns; /* NETLATD_STAMP_RECV_RETURN; 0 = no reader (packet-only record) */
	__u64 receive_ns;     /* the packet's netif_receive_skb: the base of the next four */
	__u32 irq_before;     /* receive_ns - NETLATD_STAMP_IRQ; 0 = not seen */
	__u32 raise_before;   /* receive_ns - NETLATD_STAMP_SOFTIRQ_RAISE */
	__u32 softirq_before; /* receive_ns - NETLATD_STAMP_SOFTIRQ_ENTRY */
	__u32 queue_after;    /* NETLATD_STAMP_SOCK_QUEUE - receive_ns; 0 = not seen */
	__u32 reader_before[NETLATD_WIRE_READER_STAMPS]; /* recv_return_ns - stamp + 1; 0 = not seen */
	__u32 tid_flags;      /* reader tid (low 22 bits; 0 = none), then flags (packet flags, NETLATD_WIRE_*) */
	__u32 len;            /* bytes of L4 payload */
	__u32 cpus_iface;     /* rx_cpu (13 bits), reader_cpu (13), iface_id & 63 (6) */
	__u16 dport;          /* host order */
	__u16 sport;          /* host order */
};

struct netlatd_wire_reader {
	__u32 tid;
	__u32 tgid;
	__u64 _pad;
	char comm[NETLATD_COMM_LEN];
	__u64 cgroup;   /* its cgroup v2 id; 0 unless asked for (--by cgroup, --cgroup) */
};

/* What netif_receive_skb learned of a packet. 40 bytes (TCP or not is in
 * `flags`: a UDP socket's slots hold 1,024 of these at 56 bytes). The earlier stamps
 * are kept as distances back from receive_ns (0 = not seen): no stage before
 * it lasts 4 s. */
struct netlatd_rx {
	__u64 receive_ns;     /* NETLATD_STAMP_RECEIVE_SKB */
	__u32 irq_before;     /* receive_ns - NETLATD_STAMP_IRQ */
	__u32 raise_before;   /* receive_ns - NETLATD_STAMP_SOFTIRQ_RAISE */
	__u32 softirq_before; /* receive_ns - NETLATD_STAMP_SOFTIRQ_ENTRY */
	__u32 len;            /* bytes of L4 payload */
	__u32 iface_id;       /* netlatd_watch.iface_id */
	__u32 end_seq;        /* TCP: sequence number after the payload */
	__u16 rx_cpu;
	__u16 dport;          /* host order */
	__u16 sport;          /* host order */
	__u16 flags;          /* enum netlatd_packet_flags */
};

/*
 * The devices whose packets count (map `watch`, written by the daemon): each
 * traced interface, and each device below it that a packet for it reaches
 * netif_receive_skb on first (a bond's slaves, a VLAN's real device, with
 * the VLAN's tag). Keyed by namespace too: ifindex values repeat across
 * network namespaces (lo is 1 in every one).
 */
struct netlatd_watch_key {
	__u32 netns;   /* inode of the device's network namespace */
	__u32 ifindex;
	__u16 vlan;    /* the 802.1Q VLAN id a packet carries on this device; 0 untagged; NETLATD_WATCH_NAPI */
	__u16 _pad;
};

struct netlatd_watch {
	__u32 iface_id; /* the traced interface these packets count for: 1.., the daemon's number for its name */
	__u16 upper;    /* 1: a traced interface with lower devices: a packet here may be one already seen below */
	__u16 irq;      /* 1: the device has IRQ lines netlatd watches (a NIC); 0: a backlog device (lo, veth, tun) */
};

/*
 * UDP datagrams from netif_receive_skb on, by skb address: a set-associative
 * table of 2^NETLATD_STASH_WAY_BITS ways a set (the global `stash` in bpf/,
 * in its own data section .data.stash). By queue order, an entry leaves at
 * its socket's data-ready call; where the kernel names each read's skb, it
 * stays until the read, its queueing stamped in it, so the table holds every
 * datagram queued unread. The daemon sizes it before load (--stash-entries,
 * a power of two from NETLATD_STASH_ENTRIES_MIN to _MAX, counted in ways)
 * and gives the kernel side its set mask (targ_stash_set_mask): its size is
 * said here and nowhere else. If the sets fill at random (as measured in the
 * 6.12 guest with two ways), four ways of 8,192 sets (the default, 2 MiB)
 * lose to a full set about 3 in 100,000 datagrams of a queue 2,000 deep, 4 in
 * 1,000 at 8,000 and 2 in 100 at 13,000; two ways of 4,096 lost 3, 26 and 44
 * in 100. The loss depends on the queue's depth against the table's size: a
 * table four times as large holds four times as deep a queue as well. The
 * daemon maps it to expire entries that never reached a socket, or were
 * never read.
 */
#define NETLATD_STASH_WAY_BITS 2
#define NETLATD_STASH_WAYS (1u << NETLATD_STASH_WAY_BITS)
#define NETLATD_STASH_ENTRIES_MIN 4096u
#define NETLATD_STASH_ENTRIES_DEFAULT 32768u
/* 56 MiB of kernel memory, a bound on what one mistyped flag can ask for:
 * four entries per datagram of a queue 262,144 deep. */
#define NETLATD_STASH_ENTRIES_MAX 1048576u

/* One set of the stash, 224 bytes: 56 a way. Its ways' owners share one
 * cache line (a set starts on a line or halfway into one), so that a lookup
 * reads one line whichever way holds the datagram, or none does (most
 * lookups of the queue-order path are of datagrams no longer there); the
 * queueing stamps (in that line for every other set) and the receive stamps
 * follow, read only once found. */
struct netlatd_stash_set {
	__u64 skb[NETLATD_STASH_WAYS];       /* each way's owner; 0 = free, 1 = being written */
	__u64 queued_ns[NETLATD_STASH_WAYS]; /* where the kernel names reads: queued on its socket then; 0 = not yet */
	struct netlatd_rx rx[NETLATD_STASH_WAYS];
};
#define NETLATD_STASH_FREE 0
#define NETLATD_STASH_BUSY 1

/* A TCP segment in flight, from netif_receive_skb until read (map
 * `tcp_segs`). The key is the flow as the receiver sees it and the segment's
 * first sequence number. */
struct netlatd_tcp_key {
	__u64 addrs;   /* IPv4: saddr << 32 | daddr; IPv6: both folded (see bpf/filter/parse.bpf.h) */
	__u16 sport;   /* network order, as on the wire */
	__u16 dport;
	__u32 seq;
};

struct netlatd_tcp_seg {
	struct netlatd_rx rx;  /* rx.end_seq: the next segment's key */
	__u32 queue_after;     /* queued (tcp_probe) after rx.receive_ns; 0 = not yet */
	__u32 state;           /* TCP_SEG_* in bpf/tcp/state.bpf.h */
	__u32 dup;             /* NETLATD_TCP_COPY_*: how many copies of it TCP saw */
	__u32 _pad;
};

/* netlatd_tcp_seg.dup. */
#define NETLATD_TCP_COPY_ONE 0      /* one copy: its stamps are its own */
#define NETLATD_TCP_COPY_RX 1       /* another copy arrived (or this one was refused): rx may be the other's */
#define NETLATD_TCP_COPY_QUEUE 2    /* two copies reached TCP as new data: which one was queued is not known */

/* Why records were lost; per-CPU counters in the `drops` map. */
enum netlatd_drop {
	NETLATD_DROP_RINGBUF_FULL = 0,  /* bpf_ringbuf_reserve failed */
	NETLATD_DROP_INFLIGHT_FULL,     /* both stash entries of its set were being written by other CPUs */
	NETLATD_DROP_SOCK_FIFO_FULL,    /* more tracked datagrams queued unread on a socket than its slots */
	NETLATD_DROP_SOCK_STATE_FAILED, /* the kernel refused the socket's storage (memory) */
	NETLATD_DROP_STACK_DROPPED,     /* the kernel dropped the packet (kfree_skb) */
	NETLATD_DROP_UNJOINED,          /* its stash entry was taken by a newer packet before it was queued */
	NETLATD_DROP_UNSEEN_READ,       /* read by a call whose return netlatd did not see */
	NETLATD_DROP_TCP_SEGS_FULL,     /* the table of TCP segments in flight was full */
	NETLATD_DROP_TCP_RANGE_UNKNOWN, /* a TCP read whose byte range no hook gave */
	NETLATD_DROP_ORDER_LOST,        /* a UDP socket's slots stopped mirroring its queue: its reads are no longer named */
	NETLATD_DROP_TCP_GAP,           /* a TCP read went past bytes no entry tracked: segments in that gap are not reported */
	NETLATD_DROP_TCP_COPIES,        /* two copies of a TCP segment reached TCP as new data: whose stamps is not known */
	NETLATD_DROP_READER_FORGOTTEN,  /* counted by the daemon: a record whose reader it had forgotten (idle 60 s) */
	NETLATD_DROP_ORDER_GIVEN_UP,    /* UDP datagrams whose slot a resync, or a drained socket of several readers,
					 * gave up without a record: stale after a drop a read could not tell for
					 * sure; taken by reads counted ambiguous */
	NETLATD_DROP_TCP_READ_TOO_MANY, /* TCP segments of a read past the TCP_READ_WALK its walk reports: in no record */
	NETLATD_DROP_COUNT
};

/* Per-CPU event counters in the `counters` map (for --check, bench, Prometheus). */
enum netlatd_counter {
	NETLATD_CNT_MATCHED = 0,       /* packets that passed the interface/port filter */
	NETLATD_CNT_QUEUED,            /* of those, seen queued on a socket */
	NETLATD_CNT_EMITTED,           /* records written to the ring buffer */
	NETLATD_CNT_IRQ,               /* NIC IRQs of the interface */
	NETLATD_CNT_AMBIGUOUS_READS,   /* UDP reads whose datagram could not be named */
	NETLATD_CNT_UNTRACKED_READS,   /* reads of a datagram netlatd never tracked (other interface, queued before start, lost) */
	NETLATD_CNT_NAPI_POLLS,        /* NAPI polls of the interface */
	NETLATD_CNT_NAPI_PACKETS,      /* packets those polls processed */
	NETLATD_CNT_NAPI_BUDGET_FULL,  /* polls that used their whole budget */
	NETLATD_CNT_QUEUE_UNSEEN,      /* records without a socket-queue stamp: the queueing hook did not run for them */
	NETLATD_CNT_TCP_BYTES_READ,    /* bytes TCP receive calls returned on watched sockets that had a tracked segment */
	NETLATD_CNT_TCP_BYTES_SKIPPED, /* of those, bytes in gaps (NETLATD_DROP_TCP_GAP) a read resumed past: in no record */
	NETLATD_CNT_CGROUP_OUTSIDE,    /* records not written (--cgroup): their reader is in none of the cgroups */
	NETLATD_CNT_CGROUP_NO_READER,  /* records not written (--cgroup): packet-only, whose reader is not known */
	NETLATD_CNT_READER_STAMP_FAR,  /* records with a reader stamp left out, over 4.29 s before the return (counted by the daemon: NETLATD_WIRE_FAR) */
	NETLATD_CNT_SAMPLED_OUT,       /* matching packets --sample left out at the filter: no state, no record */
	NETLATD_CNT_EARLY_READS,       /* UDP reads, by queue order, of a tracked datagram taken before its socket's
					* data-ready call looked: its record has no reader */
	NETLATD_CNT_COUNT
};

/* --count-ops (a diagnostic run, the bench's counting run): what the BPF
 * programs did, counted at each helper call by bpf/lib/ops.bpf.h, into the
 * global array `op_counts` (.bss). Off, the verifier drops the counting. */
enum netlatd_op {
	NETLATD_OP_LOCK_PAIRS = 0, /* bpf_spin_lock (each is paired with an unlock) */
	NETLATD_OP_RING_RESERVES,  /* bpf_ringbuf_reserve, bpf_ringbuf_output */
	NETLATD_OP_MAP_LOOKUPS,    /* bpf_map_lookup_elem (inlined array ones too), bpf_{sk,task}_storage_get */
	NETLATD_OP_MAP_UPDATES,    /* bpf_map_update_elem, bpf_map_delete_elem */
	NETLATD_OP_CLOCK_READS,    /* bpf_ktime_get_ns, bpf_ktime_get_boot_ns */
	NETLATD_OP_COUNT
};
/* Their names in the JSON lines' "ops" object, in the enum's order. */
#define NETLATD_OP_NAMES "lock_pairs", "ring_reserves", "map_lookups", "map_updates", "clock_reads"

/* Each CPU's counts, indexed by the enums above: the first member of its
 * state in the per-CPU `cpu_states` map (bpf/lib/cpu.bpf.h), which the
 * daemon sums over the CPUs. There, a program that has its CPU's state
 * already counts with no lookup of its own, and a packet's counts
 * (matched, queued, emitted) share a cache line. */
struct netlatd_drop_block {
	__u64 v[NETLATD_DROP_COUNT];
};
struct netlatd_counter_block {
	__u64 v[NETLATD_CNT_COUNT];
};
struct netlatd_cpu_counts {
	struct netlatd_counter_block counters;
	struct netlatd_drop_block drops;
};

/*
 * --aggregate: the kernel side adds a record it would have written to
 * per-stage histograms of its own (bpf/aggregate/aggregate.bpf.h), with the buckets of
 * src/histogram.cpp, for values below 2^36 ns (68.7 s). A record it cannot
 * add exactly (a stage that long, stamps out of order or left out, no reader
 * named, an outlier) is written to the ring as before.
 *
 * One netlatd_agg_block per side, series of the breakdown and CPU, in one
 * array map: a record takes one lookup. Two sides, by the parity of
 * agg_epoch (.bss): writers add to one while the daemon reads and zeroes the
 * other. Per CPU, netlatd_agg_seq counts the writers that began and those
 * done: the daemon reads a side once every writer that began before the
 * flip is done.
 */
#define NETLATD_AGG_STAGES 7        /* enum class Stage (stages.hpp), in its order */
#define NETLATD_AGG_BUCKETS 1984    /* Histogram::bucket_index of every value below NETLATD_AGG_MAX_NS */
#define NETLATD_AGG_MAX_NS (1ull << 36)
#define NETLATD_AGG_MAX_SERIES 64   /* ports (16) x protocols (2) x families (2) */
/* What the kernel side splits its histograms by. */
#define NETLATD_AGG_BY_DPORT 1u
#define NETLATD_AGG_BY_PROTO 2u
#define NETLATD_AGG_BY_FAMILY 4u
/* netlatd_wire_packet.tid_flags: a record written although the kernel side
 * also added it (--aggregate-check): the daemon checks one against the other. */
#define NETLATD_WIRE_AGG_CHECKED (1u << 9)

struct netlatd_agg_stage {
	__u64 count;
	__u64 sum;
	__u64 min; /* valid when count is not 0 */
	__u64 max;
};

/* 55,808 bytes: within one array map value, so one lookup a record. */
struct netlatd_agg_block {
	struct netlatd_agg_stage stage[NETLATD_AGG_STAGES];
	__u64 packets;
	__u64 tcp;
	__u64 tcp_bytes;
	__u64 _pad;
	/* zeroed by the daemon at each read: a second holds no 2^32 */
	__u32 buckets[NETLATD_AGG_STAGES][NETLATD_AGG_BUCKETS];
};

/* The first member of the kernel side's per-CPU scratch (agg_scratches). */
struct netlatd_agg_seq {
	__u64 begun;
	__u64 done;
};

#endif /* NETLATD_ABI_H */
