/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: configuration, maps and per-CPU state; the other
 * headers of bpf/ come after this one. */
#ifndef NETLATD_MAPS_BPF_H
#define NETLATD_MAPS_BPF_H

/* ---- configuration, set before load ------------------------------------------ */

const volatile __u16 targ_ports[NETLATD_MAX_PORTS] = {};
const volatile __u32 targ_nports = 0;
/* Force a reader wake-up once this much data waits in the ring; below it,
 * records are submitted without a wake-up and the daemon drains on a timer. */
const volatile __u64 targ_wakeup_bytes = 1 << 20;
/* --by cgroup: records carry their reader's cgroup id (a helper call each). */
const volatile bool targ_reader_cgroup = false;
/* --cgroup: records are written only for readers under one of the first
 * targ_ncgroup_filters cgroups of `cgroup_filter` (emit.bpf.h). */
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
/* Where this CPU's preempt count is (enum PreemptCount, include/netlatd/hooks.hpp):
 * 0 = not read, softirq_exit ends each NET_RX run; 1 = __preempt_count;
 * 2 = pcpu_hot.preempt_count; 3 = __preempt_count, at
 * targ_preempt_count_from_rq bytes from this CPU's runqueue. */
const volatile __u32 targ_preempt_count = 0;
const volatile __s64 targ_preempt_count_from_rq = 0;
/* udp_prod_queue entries per socket (nr_node_ids). */
const volatile __u32 targ_numa_nodes = 1;
/* --sample N: a matching packet is kept when a 32-bit draw is below this
 * (2^32 / N); 0 keeps every packet (filter.bpf.h sampled_out). */
const volatile __u32 targ_sample_below = 0;
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

/* The devices whose packets count, and for which traced interface (abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETLATD_WATCH_ENTRIES);
	__type(key, struct netlatd_watch_key);
	__type(value, struct netlatd_watch);
} watch SEC(".maps");

/* What `dev`'s packets carrying VLAN id `vlan` (0 untagged) count for, if
 * anything. */
static __always_inline const struct netlatd_watch *watched(struct net_device *dev, __u16 vlan)
{
	struct netlatd_watch_key k = {};
	k.netns = dev->nd_net.net->ns.inum;
	k.ifindex = (__u32)dev->ifindex;
	k.vlan = vlan;
	return bpf_map_lookup_elem(&watch, &k);
}

/* UDP datagrams between netif_receive_skb and their socket's queue, at a set
 * chosen by their skb address (filter.bpf.h). A global array rather than a
 * map: a socket's lock region may look entries up (no helper calls are
 * allowed there), and the daemon maps .bss to expire stale ones. */
struct netlatd_stash_entry stash[1 << NETLATD_STASH_BITS] __attribute__((aligned(64)));

/* ---- per-CPU state ------------------------------------------------------------- */

/* Datagrams a UDP data-ready call walks back over from a queue's tail
 * (udp_queue.bpf.h) for those without a slot yet (a bpf_loop walk: its
 * length costs nothing unless used). */
#define UDP_MIRROR_WALK 128
/* Records a UDP read builds under its socket's lock and emits after it. */
#define UDP_OUT_MAX 32

/* A UDP queue slot: one datagram, in the order the socket queued it. 64
 * bytes. Where no hook names the datagram a read took, every datagram the
 * socket queues gets a slot (udp_queue.bpf.h): one netlatd tracked, or a
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

/* Who uses a cpu_state scratch word (ptr_value, opaque_on). */
enum scratch_user {
	SCRATCH_RECV = 0,   /* the receive return */
	SCRATCH_QUEUE = 1,  /* the UDP data-ready call */
	SCRATCH_WAKE = 2,   /* sched_waking */
	SCRATCH_USERS = 4,
};

struct cpu_state {
	/* NIC IRQ and NET_RX (cpu_stamps.bpf.h) */
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
	 * (reader.bpf.h checks each woken task really waits on it). */
	__u64 hint_sk;
	__u64 hint_ts;
	__u32 emitted;       /* records this CPU wrote, for the ring fill check */
	__u32 n_out;
	/* TCP: the skb tcp_probe last stamped here, and its range, so that a
	 * drop of it right after (TCP refused it) undoes the stamps. */
	__u64 probed_skb;
	struct netlatd_tcp_key probed_key;
	__u32 probed_end;
	__u32 _pad2;
	/* UDP: what fentry/__udp_enqueue_schedule_skb pushed, and a read's records. */
	__u64 pushed_skb;
	/* This CPU's __preempt_count, found once from its runqueue
	 * (PC_RUNQUEUE, cpu_stamps.bpf.h): a static per-CPU variable does not
	 * move. 0 until then. */
	__u64 preempt_count_at;
	/* ptr_value's and opaque_value's round trip through memory, one word per
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
	/* What the scan for a read's dropped datagrams found (udp_read.bpf.h
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

/* A whole kernel pointer as a plain number, for arithmetic. The verifier lets
 * a program loaded with CAP_PERFMON store a pointer into a map value, and what
 * it loads back from there is a number: a store and a load on this CPU's
 * state, where a read through bpf_probe_read_kernel (the fallback) is a helper
 * call, ~20-30 ns a time on a VM. */
static __always_inline __u64 ptr_value_on(struct cpu_state *cs, const void *p, enum scratch_user who)
{
	*(const void *volatile *)&cs->scratch[who] = p;
	return *(volatile __u64 *)&cs->scratch[who];
}

static __always_inline __u64 ptr_value(const void *p, enum scratch_user who)
{
	struct cpu_state *cs = this_cpu();
	__u64 v = 0;
	if (!cs) {
		bpf_probe_read_kernel(&v, sizeof(v), &p);
		return v;
	}
	return ptr_value_on(cs, p, who);
}

/* opaque_value with this CPU's state at hand: no helper call, so it may run
 * under a socket's lock. */
static __always_inline __u64 opaque_on(struct cpu_state *cs, __u64 v, enum scratch_user who)
{
	*(volatile __u64 *)&cs->scratch[who] = v;
	return *(volatile __u64 *)&cs->scratch[who];
}

/* `v` as a number the verifier knows nothing of (what it loads from a map
 * value): where a value known on one path and unknown on another would fork
 * its walk of everything after. */
static __always_inline __u64 opaque_value(__u64 v, enum scratch_user who)
{
	struct cpu_state *cs = this_cpu();
	return cs ? opaque_on(cs, v, who) : v;
}

/* ---- per-socket state: socket-local storage, freed with its socket -------------- */

#define UDP_SMALL_SLOTS 8
/* Slots a read or a data-ready call looks at past the head: the datagrams
 * taken by reads in flight and the newest ones. */
#define UDP_SCAN 16
/* 16 KiB: within net.core.optmem_max on 6.1 (20 KiB), which socket storage is
 * charged against. */
#define UDP_BIG_SLOTS 256

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
				     * the queue (udp_read.bpf.h resync_slots) */
	__u32 owed_unsure;          /* a read owed a datagram that may never get a slot
				     * (netlatd.bpf.c on_udp_read): owed may be one too many */
	__u32 owed_unseen;          /* an owing read may have left its own datagram unmarked:
				     * its candidates ran past UDP_MARK_REACH (udp_read.bpf.h) */
	__u32 reader_tid;           /* the first thread to read the socket */
	__u32 readers_many;         /* another thread has read it too */
	__u32 resynced;             /* the slots were resynced at least once */
	__u32 drops_unsure;         /* a read dropped a datagram whose slot could not be told
				     * for sure: stale slots are never written out (resync_slots) */
	struct udp_slot small[UDP_SMALL_SLOTS];
};

struct udp_big_state {
	struct udp_slot slots[UDP_BIG_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct udp_sock_state);
} udp_socks SEC(".maps");

/* Only for sockets that once held more than UDP_SMALL_SLOTS tracked
 * datagrams; no lock of its own (udp_socks' guards it). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct udp_big_state);
} udp_bigs SEC(".maps");

/* TCP: where the next unread segment starts (tcp.bpf.h). */
#define TCP_STARTS 8
#define TCP_BRIDGES 4
struct tcp_sock_state {
	__u32 cursor;       /* first sequence number of the oldest segment not yet read */
	__u32 cursor_valid;
	__u32 reader_tid;   /* the only thread that has read it, 0 once there were two */
	__u32 n_starts;
	/* The first segment of each of the last TCP_STARTS skbs tcp_probe saw
	 * queued: where a read walk resumes when the segment at the cursor was
	 * never tracked and no bridge names it (tcp.bpf.h). */
	__u32 starts[TCP_STARTS];
	/* Where the chain of tracked segments breaks (bytes no entry holds,
	 * found by tcp_probe) and the segment after the break. */
	__u32 bridge_from[TCP_BRIDGES];
	__u32 bridge_to[TCP_BRIDGES];
	__u32 n_bridges;
	__u32 probe_end;    /* the end of the last skb tcp_probe saw queued */
	__u32 probe_end_valid;
	/* A read found no entry at the cursor and nowhere to resume: counted
	 * once for that cursor, which stays put until a later probe names where
	 * the chain goes on. */
	__u32 stuck_at;
	__u32 stuck_valid;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcp_sock_state);
} tcp_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct netlatd_tcp_key);
	__type(value, struct netlatd_tcp_seg);
} tcp_segs SEC(".maps");

/* ---- per-task state: task-local storage, for tasks that read watched sockets ---- */

struct reader_state {
	__u64 call_start_ns; /* the current receive call's start (fentry/sock_recvmsg) */
	__u64 call_sk;
	/* skb_consume_udp gave this call a datagram of this socket (0 = none),
	 * one netlatd tracked (`named`) whose stamps, taken from the stash
	 * then, are these: the read's record once the call returns. */
	__u64 consumed_sk;
	struct netlatd_rx named_rx;
	__u32 named_queue_after; /* queued, after named_rx.receive_ns; 0 = not seen */
	__u8 named;
	__u8 _pad4[3];
	__u64 woken_ns;      /* woken by a watched socket's data-ready call */
	__u64 woken_sk;
	__u64 tcp_sk;        /* TCP: tcp_rcv_space_adjust in this call, */
	__u32 tcp_end;       /* and copied_seq then */
	__u8 woken_in_call;  /* it slept inside a receive call (not in epoll/poll) */
	__u8 _pad[3];
	/* What the daemon was last told this task is (a netlatd_wire_reader
	 * in the ring); told_pid_tgid 0 = nothing yet. */
	__u64 told_pid_tgid;
	__u64 told_name[2];
	__u64 told_cgroup;
	__u32 told_gen;      /* cfg_readers_gen when told */
	__u32 _pad2;
	/* Datagrams the current receive call took off a watched UDP socket's
	 * queue and the kernel dropped (checksums the read found bad): their
	 * slots are settled at the call's return (udp_read.bpf.h). */
	__u64 drop_skb[READ_DROPS];
	__u64 drop_ns[READ_DROPS];    /* when each was freed */
	__u32 drop_len[READ_DROPS];   /* bytes of UDP payload */
	/* Host order. The destination port is the read socket's: a call
	 * frees only what it took off its own socket's queue. */
	__u16 drop_sport[READ_DROPS];
	__u32 drop_fd;       /* the call's first argument (x86-64) */
	__u16 drop_nr;       /* the call's syscall number */
	__u8 drop_n;         /* noted; 0 = none */
	__u8 drop_more;      /* more were dropped than can be kept */
	__u8 drop_port;      /* index of the port in drops_pending, plus one */
	__u8 drop_asked;     /* drop_port counts in asks_pending instead */
	__u8 _pad3[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct reader_state);
} readers SEC(".maps");

/* ---- output ----------------------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the daemon before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netlatd_drop_block);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netlatd_counter_block);
} counters SEC(".maps");

/* --cgroup: the cgroups whose subtrees are kept, filled by the daemon after
 * load from their directories' file descriptors. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, NETLATD_MAX_CGROUP_FILTERS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

/* ---- watched ports ------------------------------------------------------------------ */

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

/* Receive calls in flight that dropped a datagram of the port after its
 * socket queued it and have not returned yet (udp_read.bpf.h
 * note_read_drop): until each does, the dropped datagram's slot is LIVE as
 * if a read held it, and a retirement that counts LIVE and marked slots
 * against the reads that owe one could write it out. */
__u32 drops_pending[NETLATD_MAX_PORTS];
/* The same for calls that ask what is readable (FIONREAD, a poll), whose
 * drops wait for the task's next read: one that never reads again would hold
 * the port uncertain for good, so a count stands only within ASK_HOLD_NS of
 * the port's last such drop. */
__u32 asks_pending[NETLATD_MAX_PORTS];
__u64 asks_last_ns[NETLATD_MAX_PORTS];
#define ASK_HOLD_NS 1000000000ULL

/* Which CPUs receive a watched port's packets. While one CPU alone does,
 * datagrams are pushed in the order they were queued (udp_read.bpf.h relies
 * on it). Written only when the CPU changes, so a single producer keeps the
 * line in its cache. */
#define MULTI_PRODUCER_HOLD_NS 10000000 /* 10 ms */
struct port_producers {
	__u32 last_cpu;      /* + 1; 0 = none yet */
	__u32 _pad;
	__u64 mixed_until;   /* another CPU received for this port until shortly before */
	__u64 _pad2[6];
};
static struct port_producers port_prod[NETLATD_MAX_PORTS];

#endif /* NETLATD_MAPS_BPF_H */
