/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: which datagram a UDP read returned (docs/JOIN.md).
 * Where skb_consume_udp can be hooked (fentry) the kernel names it; else the
 * socket's queue order, its head and the read's length decide, and a read
 * they cannot decide is counted as ambiguous, never guessed. */
#ifndef NETLATD_UDP_READ_BPF_H
#define NETLATD_UDP_READ_BPF_H

/* Looks at the producer queues' charge a read makes before it gives up
 * waiting for a producer to finish its batch (up to some 5 microseconds,
 * only while one is mid-batch with the socket's queues drained). */
#define QUIET_SPINS 512

/* How far past its head an ambiguous read marks its candidates (decide_by_order). */
#define UDP_MARK_REACH 64

/* 6.18's per-NUMA UDP producer queues (commit "udp: remove busylock and add
 * per NUMA queues"): a producer charges rmem_alloc before it queues a batch
 * and uncharges it after the batch's last data-ready call. */
struct udp_prod_queue___nl {
	atomic_t rmem_alloc;
} __attribute__((preserve_access_index));
struct udp_sock___nl {
	struct udp_prod_queue___nl *udp_prod_queue;
} __attribute__((preserve_access_index));

/* One look at every NUMA node's producer queue (a bpf_loop callback):
 * stops, quiet, at the first look that finds them all uncharged. */
struct quiet_look {
	char *pq;
	__u32 stride;
	bool quiet;
};

static long quiet_step(__u32 i, struct quiet_look *l)
{
	for (__u32 n = 0; n < 4; n++) {
		if (n >= targ_numa_nodes)
			break;
		struct udp_prod_queue___nl *q = (void *)(l->pq + n * l->stride);
		if (BPF_CORE_READ(q, rmem_alloc.counter))
			return 0;
	}
	l->quiet = true;
	return 1;
}

/* No producer is between queueing datagrams on `sk` and pushing them: every
 * datagram a read can have taken has its slot. A producer mid-batch is waited
 * for a moment (its batch takes a few microseconds).
 *
 * `typed`: the caller runs where bpf_core_cast exists (a program only kernels
 * of 6.3 or later load; the kfunc came in 6.2). Its first look, on one NUMA
 * node, is then two plain loads instead of two bpf_probe_read_kernel calls
 * and a bpf_loop; the loop only runs while a producer is mid-batch. A
 * compile-time constant: the 6.1 variant must not contain the kfunc call.
 * The answer leaves as a number the verifier does not know (opaque_value): a
 * known true from the first look and an unknown one from the loop would be
 * two states through all of the read's decision, which the verifier's
 * instruction budget cannot afford. */
static __always_inline bool producers_quiet(struct sock *sk, bool typed)
{
	if (targ_udp_join != UDP_JOIN_ORDER_PRODQ || !bpf_core_field_exists(struct udp_sock___nl, udp_prod_queue))
		return false;
	if (targ_numa_nodes > 4)
		return false; /* more producer queues than a look covers */
	struct quiet_look l = {.stride = bpf_core_type_size(struct udp_prod_queue___nl)};
	if (typed && targ_numa_nodes == 1) {
		struct udp_sock___nl *tu = bpf_core_cast(sk, struct udp_sock___nl);
		struct udp_prod_queue___nl *q = tu->udp_prod_queue;
		l.quiet = q && !q->rmem_alloc.counter;
	}
	if (!l.quiet) {
		struct udp_sock___nl *u = (void *)sk;
		l.pq = (char *)BPF_CORE_READ(u, udp_prod_queue);
		if (l.pq)
			bpf_loop(QUIET_SPINS, quiet_step, &l, 0);
	}
	return opaque_value(l.quiet, SCRATCH_RECV);
}

/* The read's buffer size from its syscall's arguments (x86-64), 0 when
 * unknown (recvmmsg, readv, io_uring, a kernel thread): then only a
 * candidate of exactly the returned length can be named (may_truncate). */
static __always_inline __u32 read_bufsize(struct cpu_state *cs)
{
#ifdef __TARGET_ARCH_x86
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->flags & (0x00200000 /* PF_KTHREAD */ | 0x00000010 /* PF_IO_WORKER */))
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	long nr = regs->orig_ax;
	if (nr == 0 /* read */ || nr == 45 /* recvfrom */)
		return regs->dx > 0xffffffffUL ? 0 : (__u32)regs->dx;
	if (nr != 47 /* recvmsg */)
		return 0;
	struct user_msghdr *m = &cs->rb_msg;
	struct iovec *iov = cs->rb_iov;
	if (bpf_probe_read_user(m, sizeof(*m), (void *)regs->si))
		return 0;
	__u32 bytes = (__u32)m->msg_iovlen * sizeof(iov[0]);
	if (!bytes || bytes > sizeof(cs->rb_iov))
		return 0;
	if (bpf_probe_read_user(iov, bytes, m->msg_iov))
		return 0;
	__u64 sum = 0;
	for (__u32 i = 0; i < 4; i++)
		if (i < m->msg_iovlen)
			sum += iov[i].iov_len;
	return sum > 0xffffffffULL ? 0 : (__u32)sum;
#else
	return 0;
#endif
}

#define SYSCALL_IOCTL 16 /* x86-64 */
#define SYSCALL_POLL 7   /* and every call that polls, for a noted drop */

/* A datagram freed by kfree_skb: one a UDP socket queued and a read then
 * dropped is kept in the reading task's state until that call returns
 * (settle_read_drop). udp_recvmsg takes the head datagram off the queue,
 * finds its checksum bad (checked only at copy time when the device left it
 * unchecked) or cannot copy it, frees it, and goes on to the next one in the
 * same call: without this, its slot stayed LIVE, every later read of the
 * socket had one candidate too many, and the slot was written out once as a
 * packet-only record of a datagram no read returned. `pushed`: its stash
 * entry is gone, so its slot holds it (or, untracked, a placeholder);
 * otherwise it was dequeued before any data-ready call moved it, and a gone
 * placeholder stands for it (the caller counted it, stack_dropped).
 *
 * What says the skb was queued by UDP: __udp_enqueue_schedule_skb wrote its
 * scratch (udp_set_dev_scratch, 64-bit kernels) over skb->dev: the length,
 * then two flags of 0 or 1; a device pointer has all ones there. And the
 * current task must be in a receive system call, a FIONREAD or a poll, in
 * its own context (task_context; `pc`: the program variant that reads the
 * preempt count). x86-64 only, like read_bufsize. */
static __always_inline void note_read_drop(struct sk_buff *skb, bool pushed, const struct cpu_state *cs, int pc)
{
#ifdef __TARGET_ARCH_x86
	if (!bpf_core_field_exists(skb->dev_scratch))
		return;
	/* A datagram the socket refused on arrival (its buffer full) carries
	 * the scratch too, and so do those left queued on a closed socket, freed
	 * by an RCU callback; softirqs of either kind run on a reader's system
	 * call (at a bottom half's enable, at an IRQ's exit). A read drops in
	 * its own task's context. */
	if (!cs || !task_context(cs, pc))
		return;
	/* Read as a number: a typed load at skb->dev's offset is its pointer. */
	__u64 scratch = BPF_CORE_READ(skb, dev_scratch);
	__u32 len = skb->len;
	if ((__u16)(scratch >> 32) != (__u16)len || ((scratch >> 48) & 0xfefe))
		return;
	/* Queued with its header pulled (udp_csum_pull_header): skb->len is
	 * the payload's, the header is still at the transport offset. */
	struct udphdr uh;
	if (bpf_probe_read_kernel(&uh, sizeof(uh), skb->head + skb->transport_header) || bpf_ntohs(uh.len) != len + 8)
		return;
	int pidx = port_index(bpf_ntohs(uh.dest));
	if (pidx < 0)
		return;
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->flags & (0x00200000 /* PF_KTHREAD */ | 0x00000010 /* PF_IO_WORKER */))
		return;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return;
	long nr = regs->orig_ax;
	/* A call that asks what is readable drops bad datagrams at the
	 * queue's head too (first_packet_length): ioctl(FIONREAD) (SIOCINQ) on
	 * any socket, and a poll of a blocking one (udp_poll; select and epoll
	 * ask the same way). Settled at the task's next read, the way an
	 * application asks before it reads: of the same descriptor after a
	 * FIONREAD, of any socket of the port after a poll (which names none);
	 * held until then in asks_pending, not drops_pending. */
	bool fionread = nr == SYSCALL_IOCTL && (__u32)regs->si == 0x541B /* FIONREAD */;
	bool polled = nr == SYSCALL_POLL || nr == 23 /* select */ || nr == 232 /* epoll_wait */ ||
		      nr == 270 /* pselect6 */ || nr == 271 /* ppoll */ || nr == 281 /* epoll_pwait */ ||
		      nr == 441 /* epoll_pwait2 */;
	bool asked = fionread | polled;
	if (nr != 0 /* read */ && nr != 19 /* readv */ && nr != 45 /* recvfrom */ && nr != 47 /* recvmsg */ &&
	    nr != 299 /* recvmmsg */ && !asked)
		return;
	struct reader_state *rs = current_reader(true);
	if (!rs)
		return;
	__u32 p = pidx & (NETLATD_MAX_PORTS - 1);
	if (asked)
		asks_last_ns[p] = bpf_ktime_get_ns(); /* every one: the hold runs from the last */
	if (!rs->drop_port) {
		__sync_fetch_and_add(asked ? &asks_pending[p] : &drops_pending[p], 1);
		rs->drop_port = (__u8)(pidx + 1);
		rs->drop_asked = asked;
	}
	__u32 i = rs->drop_n;
	if (i >= READ_DROPS) {
		rs->drop_more = 1;
		return;
	}
	rs->drop_skb[i] = pushed ? (__u64)skb : 0;
	rs->drop_ns[i] = bpf_ktime_get_ns();
	rs->drop_len[i] = len;
	rs->drop_sport[i] = bpf_ntohs(uh.source);
	rs->drop_fd = (__u32)regs->di;
	rs->drop_nr = polled ? SYSCALL_POLL : (__u16)nr;
	rs->drop_n = i + 1;
#endif
}

/* Whether the current call (a read on a socket of port `pidx`) is the one a
 * noted drop was in: the same system call on the same descriptor; or the
 * first read of the descriptor after a FIONREAD that dropped, of the port
 * after a poll. A drop noted in an earlier call whose return the task did
 * not pass on a watched socket is not this call's. */
static __always_inline bool drop_in_this_call(const struct reader_state *rs, int pidx)
{
#ifdef __TARGET_ARCH_x86
	if (rs->drop_nr == SYSCALL_POLL)
		return rs->drop_port == pidx + 1;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return regs && (regs->orig_ax == rs->drop_nr || rs->drop_nr == SYSCALL_IOCTL) && (__u32)regs->di == rs->drop_fd;
#else
	return false;
#endif
}

/* What a read knows before it takes its socket's lock (where no kfunc, not
 * even a type cast, may be called). */
struct udp_read_in {
	__u64 head;      /* queue_head() */
	__u32 ret;       /* what the read returned */
	__u32 bufsize;   /* 0 = unknown */
	bool trunc;      /* MSG_TRUNC: ret is the datagram's whole length */
	bool quiet;      /* producers_quiet() and no drops_pending, or pushes precede queueing */
	bool sole;       /* one CPU alone feeds the port */
	__u32 tid;       /* the reading thread */
};

/* Whether this read may have truncated a longer datagram to what it returned:
 * no MSG_TRUNC (which returns the whole length) and a buffer it filled, or one
 * of unknown size. */
static __always_inline __u64 may_truncate(const struct udp_read_in *in)
{
	if (in->trunc)
		return 0;
	/* Only a buffer known to be full: with its size unknown (recvmmsg)
	 * every longer candidate would fit, and a read would be named for a
	 * longer datagram another reader had just dequeued. Such a truncated
	 * read is left ambiguous instead. */
	return eq_bit(in->bufsize, in->ret) & (eq_bit(in->bufsize, 0) ^ 1);
}

/* Could a datagram of `len` bytes be what this read returned? */
static __always_inline __u64 compatible_bit(__u32 len, __u32 ret, __u64 trunc_ok)
{
	return eq_bit(len, ret) | (gt_bit(len, ret) & trunc_ok);
}

enum read_result { READ_MATCH = 1, READ_AMBIGUOUS, READ_UNTRACKED, READ_NONE };

/* Slot `s` done when `done` is 1, untouched when 0, with the socket's counts
 * of live, marked and gone slots kept. Branch-free: settle_on runs it per
 * drop, where a branch each would double the verifier's walk. Lock held. */
static __always_inline void slot_done(struct udp_sock_state *st, struct udp_slot *s, __u64 done)
{
	s->state += (__u8)(done * (__u8)(SLOT_DONE - s->state));
	st->live -= done & ne_bit(st->live, 0);
	st->marked -= done & s->marked & ne_bit(st->marked, 0);
	st->gone -= done & s->gone & ne_bit(st->gone, 0);
}

/* Hands slot `idx` to the emitter: `ambiguous` for a packet-only record. */
static __always_inline void take_slot(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask, __u32 idx,
				      struct cpu_state *cs, bool ambiguous)
{
	struct udp_slot *s = &slots[idx & mask];
	__u32 n = cs->n_out;
	if (n < UDP_OUT_MAX && !s->no_record) {
		__builtin_memcpy(&cs->out[n & (UDP_OUT_MAX - 1)], s, sizeof(*s));
		cs->out_ambiguous[n & (UDP_OUT_MAX - 1)] = ambiguous;
		cs->n_out = n + 1;
	}
	slot_done(st, s, 1);
}

/* Where the socket's queues stand. */
enum head_kind { HEAD_EMPTY, HEAD_UNPUSHED, HEAD_SLOT };
struct head_pos {
	enum head_kind kind;
	__u32 idx;  /* HEAD_SLOT: its slot */
};

/* The datagram at the head of the socket's queues (the reader queue, else the
 * receive queue), 0 when both are empty. Read before the lock, as a snapshot:
 * this read's datagram was dequeued before it, so it lies before the head's
 * slot (docs/JOIN.md). Two loads of lists the kernel changes without our
 * lock: a splice between them reads as empty, which only widens what the
 * read may have taken, never narrows it. */
static __always_inline __u64 queue_head(struct sock *sk, bool typed)
{
	if (typed) {
		/* bpf_core_cast: plain loads past struct sock (see producers_quiet). */
		struct udp_sock *tu = bpf_core_cast(sk, struct udp_sock);
		struct sk_buff *first = tu->reader_queue.next;
		if ((void *)first == (void *)&tu->reader_queue)
			first = sk->sk_receive_queue.next;
		if ((void *)first == (void *)&sk->sk_receive_queue)
			first = NULL;
		return ptr_value(first, SCRATCH_RECV); /* one unknown number, whichever way it went */
	}
	struct udp_sock *up = (struct udp_sock *)sk;
	/* BPF_CORE_READ: reader_queue lies past struct sock, where a typed
	 * load cannot reach without bpf_core_cast (6.2+); this runs on 6.1. */
	__u64 readq = ptr_value(&up->reader_queue, SCRATCH_RECV), rq = ptr_value(&sk->sk_receive_queue, SCRATCH_RECV);
	__u64 skb = (__u64)BPF_CORE_READ(up, reader_queue.next);
	if (skb == readq)
		skb = (__u64)BPF_CORE_READ(sk, sk_receive_queue.next);
	return !skb || skb == rq ? 0 : skb;
}

/* The head's slot, if it has one. Lock held. */
static __always_inline struct head_pos resolve_head(__u64 head, struct udp_sock_state *st, struct udp_slot *slots,
						    __u32 mask)
{
	struct head_pos hp = {.kind = HEAD_EMPTY};
	if (!head)
		return hp;
	hp.kind = HEAD_UNPUSHED;
	if (stash_find(head))
		return hp;
	int at = find_slot(st, slots, mask, head);
	if (at >= 0) {
		hp.kind = HEAD_SLOT;
		hp.idx = st->head + at;
	}
	return hp;
}

/* Candidates and the decision, by queue order (docs/JOIN.md). Lock held. */
static __always_inline int decide_by_order(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					   const struct udp_read_in *in, struct cpu_state *cs, struct head_pos *hp)
{
	__u32 h = st->head, t = st->tail;
	*hp = resolve_head(in->head, st, slots, mask);
	__u32 f = hp->kind == HEAD_SLOT ? hp->idx : t;
	/* Every datagram before the head has its slot once the data-ready
	 * calls of everything queued so far have run: with one CPU feeding the
	 * port they run in queue order, each before the next datagram's, so a
	 * head with a slot says so; otherwise only a quiet producer side does. */
	bool certain = !st->incomplete && (in->quiet || (hp->kind == HEAD_SLOT && in->sole));
	/* After a resync, a thread other than the one that resynced may have
	 * been in flight with a datagram whose slot the resync wrote out: its
	 * read cannot be named, and what it owes may be nothing (resync_slots). */
	if (st->resynced && st->reader_tid != in->tid) {
		certain = false;
		st->owed_unsure = 1;
	}
	/* A read looks at UDP_SCAN slots past the head: the candidates must all
	 * be in sight, those before the head and the dequeued ones anywhere. */
	if (f - h > UDP_SCAN)
		certain = false;
	/* The head, and whether the read can be certain so far, as numbers
	 * the verifier does not know: each way resolve_head and the checks
	 * above can go would otherwise be a walk of its own through the loops
	 * below (about ten of them on 6.18). The head's slot index is `f`
	 * when it has one. */
	__u64 o = opaque_on(cs, ((__u64)certain << 40) | ((__u64)hp->kind << 32) | f, SCRATCH_RECV);
	f = (__u32)o;
	hp->kind = (enum head_kind)((o >> 32) & 3);
	hp->idx = f;
	certain = (o >> 40) & 1;
	__u32 n = t - h < UDP_SCAN ? t - h : UDP_SCAN;
	/* Bit i: slot h + i is a candidate (live, before the head, or dequeued
	 * before it had a slot); and one whose length fits what the read
	 * returned (a dequeued one's length is unknown). */
	__u64 trunc_ok = may_truncate(in), live = 0, fit = 0, gone_seen = 0;
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 lv = eq_bit(s->state, SLOT_LIVE);
		__u64 c = lv & (gt_bit(f, h + i) | s->gone);
		gone_seen += lv & s->gone;
		live |= c << i;
		fit |= (c & (compatible_bit(s->rx.len, in->ret, trunc_ok) | s->gone)) << i;
	}
	/* Every candidate in sight: those before the head within the slots a
	 * read looks at, and every gone placeholder. */
	bool in_sight = f - h <= UDP_SCAN && gone_seen == st->gone;
	if (!in_sight)
		certain = false;
	/* Each read that returned ambiguous owes one of the dequeued
	 * datagrams, all of them live candidates of this read too (before the
	 * head, or gone). Fewer candidates than those debts and this read
	 * means a dequeued datagram without a slot in sight, and the one
	 * candidate may be a debtor's. */
	__u64 live_n = live - ((live >> 1) & 0x5555555555555555ULL);
	live_n = (live_n & 0x3333333333333333ULL) + ((live_n >> 2) & 0x3333333333333333ULL);
	live_n = (((live_n + (live_n >> 4)) & 0x0f0f0f0f0f0f0f0fULL) * 0x0101010101010101ULL) >> 56;
	if ((__u64)st->owed + 1 > live_n)
		certain = false;
	/* Where the walk stopped is no matter after it: without this, each
	 * place it can stop is a state of its own through all that follows. */
	n = (__u32)opaque_on(cs, n, SCRATCH_RECV);
	if (certain && fit && !(fit & (fit - 1))) {
		__u32 pick = 0;
		for (__u32 i = 0; i < UDP_SCAN; i++)
			pick += ((fit >> i) & 1) * i;
		bool placeholder = slots[(h + pick) & mask].no_record;
		take_slot(st, slots, mask, h + pick, cs, false);
		return placeholder ? READ_UNTRACKED : READ_MATCH;
	}
	if (certain && !live)
		return READ_UNTRACKED; /* defensive: every datagram has a slot */
	/* Ambiguous: this read took one of the candidates, or one whose slot
	 * is not made yet (it will be, marked). */
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 bit = (live >> i) & 1;
		st->marked += bit & (s->marked ^ 1);
		s->marked |= bit;
	}
	/* And those past the slots a read looks at: its own datagram may be
	 * one of them, and retire_marked rests on every owing read's datagram
	 * being marked. Only when the candidates run out of sight (a read
	 * held up while more than UDP_SCAN slots piled up behind it), up to
	 * the head's slot, or the tail if that is unknown (marking a queued
	 * datagram too only delays a retirement); and up to UDP_MARK_REACH
	 * slots, which the verifier walks once per state that reaches here
	 * (all 256 cost it 260,000 instructions more on 6.18). Candidates
	 * beyond that are left unmarked, and the socket says so
	 * (owed_unseen): marked datagrams are then no longer known to be all
	 * owed. */
	if (!in_sight) {
		for (__u32 i = UDP_SCAN; i < UDP_MARK_REACH; i++) {
			if (h + i >= f)
				break;
			struct udp_slot *s = &slots[(h + i) & mask];
			__u64 lv = eq_bit(s->state, SLOT_LIVE);
			st->marked += lv & (s->marked ^ 1);
			s->marked |= lv;
		}
		st->owed_unseen |= f - h > UDP_MARK_REACH;
	}
	st->owed++;
	return READ_AMBIGUOUS;
}

/* Datagrams read by ambiguous reads that returned, written as packet-only
 * records (no reader) once it is certain that no read in flight holds them.
 * Two ways to be certain, each needing every datagram's slot made (a quiet
 * producer side) and no debt in doubt (owed_unsure):
 *
 * - Marked datagrams all owed: every ambiguous read marked all its
 *   candidates, its own among them, so when the marked ones are as many as
 *   the reads that owe one, each is one of those reads'. Marking only the
 *   candidates in sight broke that: a read whose own datagram lay past them
 *   left it unmarked, a marked datagram of a read still in flight made the
 *   counts match, and it was written out; on its return that read found
 *   another thread's datagram as its only candidate: 1 to 7 wrong records
 *   in 4096 reads with two of eight threads held at their return
 *   (tests/bpf/test_readers_held.cpp).
 * - The socket drained: its queues empty, so every LIVE slot is a dequeued
 *   datagram's, and as many LIVE slots as owed reads leave none for a read
 *   in flight. Every LIVE slot in sight goes, marked or not.
 *
 * Each retired lowers both counts, so the rest stay all owed. Lock held. */
static __always_inline void retire_marked(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					  const struct udp_read_in *in, struct cpu_state *cs,
					  const struct head_pos *hp)
{
	if (!st->owed || !in->quiet || st->incomplete || st->owed_unsure)
		return;
	__u64 drained = !in->head && st->live == st->owed;
	if (!drained && (st->marked != st->owed || st->owed_unseen))
		return;
	__u32 h = st->head, t = st->tail, f = hp->kind == HEAD_SLOT ? hp->idx : t;
	__u32 n = t - h < UDP_SCAN ? t - h : UDP_SCAN;
	/* Each slot is copied out unconditionally, and kept (the count moves
	 * past it) only if it is one to retire with a record. */
	__u32 k = cs->n_out, retired = 0, gone_retired = 0, marked_retired = 0;
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__u64 mk = eq_bit(s->state, SLOT_LIVE) & (s->marked | drained) & (gt_bit(f, h + i) | s->gone);
		__builtin_memcpy(&cs->out[k & (UDP_OUT_MAX - 1)], s, sizeof(*s));
		cs->out_ambiguous[k & (UDP_OUT_MAX - 1)] = 1;
		k += mk & (s->no_record ^ 1);
		s->state += mk * (SLOT_DONE - SLOT_LIVE);
		retired += mk;
		gone_retired += mk & s->gone;
		marked_retired += mk & s->marked;
	}
	cs->n_out = k < UDP_OUT_MAX ? k : UDP_OUT_MAX;
	st->marked -= marked_retired;
	st->owed -= retired;
	st->gone -= gone_retired;
	st->live -= retired;
	if (!st->owed)
		st->owed_unseen = 0;
}

/* Slots that stopped mirroring the queue (`incomplete`: a datagram got no
 * slot) mirror it again when a read returns to find the socket's queues empty
 * and no producer mid-batch, on a socket only this thread has ever read: no
 * other read can be in flight, nothing queued has a slot, and the LIVE slots
 * left are all stale. The window is emptied (head = tail): a slot outside it
 * is never looked at, and slot_append writes each one afresh, so no stale slot
 * can be taken for a later datagram. Those in sight are written as
 * packet-only records (read by the reads that owe them); the rest are left
 * out, as reads of a socket counted in order_lost. A thread that had never
 * read may still have been in flight with one of them: reads by any other
 * thread are never named after a resync (decide_by_order).
 *
 * With several reader threads, one may hold a datagram whose slot is LIVE
 * while another read owes one too many, and nothing in the kernel (without
 * fentry) says which: such a socket stays unnamed after an overflow, its
 * reads counted ambiguous. Where only `owed` is in doubt (owed_unsure), the
 * counts are reset once no slot is LIVE and none is missing: then no read can
 * be in flight with a datagram the slots know. Lock held. */
static __always_inline void resync_slots(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
					 const struct udp_read_in *in, struct cpu_state *cs)
{
	if (!(st->incomplete || st->owed_unsure) || !in->quiet || in->head)
		return;
	if (st->readers_many && (st->incomplete || st->live || st->missing))
		return;
	__u32 h = st->head, n = st->tail - h < UDP_SCAN ? st->tail - h : UDP_SCAN;
	/* n_out is 0 here (an incomplete socket's reads are ambiguous, and
	 * retire_marked leaves it alone), so k stays below UDP_OUT_MAX. */
	__u32 k = cs->n_out;
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (i >= n)
			break;
		struct udp_slot *s = &slots[(h + i) & mask];
		__builtin_memcpy(&cs->out[k & (UDP_OUT_MAX - 1)], s, sizeof(*s));
		cs->out_ambiguous[k & (UDP_OUT_MAX - 1)] = 1;
		k += eq_bit(s->state, SLOT_LIVE) & (s->no_record ^ 1) & (st->drops_unsure ^ 1);
	}
	cs->n_out = k < UDP_OUT_MAX ? k : UDP_OUT_MAX;
	st->head = st->tail;
	st->big = 0;
	st->live = 0;
	st->missing = 0;
	st->marked = 0;
	st->owed = 0;
	st->owed_unseen = 0;
	st->gone = 0;
	/* A reset with nothing live and nothing missing wrote nothing out. */
	st->resynced |= st->incomplete;
	st->incomplete = 0;
	st->owed_unsure = 0;
	st->drops_unsure = 0;
}

/* The head passes slots that are done; an empty socket goes back to its
 * inline slots. Lock held. */
static __always_inline void advance_head(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask)
{
	for (__u32 i = 0; i < UDP_SCAN; i++) {
		if (st->head == st->tail)
			break;
		if ((&slots[st->head & mask])->state != SLOT_DONE)
			break;
		st->head++;
	}
	if (st->head == st->tail)
		st->big = 0;
}

/* The slots the datagrams a call dropped may have, looked for before the
 * lock (a bpf_loop over the whole window, from the newest: the verifier
 * walks one step once, whatever the window's length) and checked again under
 * it. Ambiguous reads may hold the head back far behind the datagram a read
 * took off the queue's head just now. For each pushed one: the newest LIVE
 * slot of its address whose datagram came before the drop; scanned from the
 * newest, an older slot of
 * the address is met later. For the others, LIVE gone placeholders, newest
 * first. */
struct drop_scan {
	struct udp_sock_state *st;
	struct udp_big_state *big;  /* the big slots, while the socket uses them */
	const struct reader_state *rs;
	struct cpu_state *cs;       /* where the findings go (ds_*) */
	__u32 tail, n;              /* the window when the scan began */
};

/* Branch-free but for its end, like the walks of the decision: the
 * verifier walks a callback's steps until their states repeat. */
static long drop_scan_step(__u32 i, struct drop_scan *w)
{
	if (i >= w->n)
		return 1;
	__u32 idx = w->tail - 1 - i;
	struct udp_slot *s = w->big ? &w->big->slots[idx & (UDP_BIG_SLOTS - 1)]
				    : &w->st->small[idx & (UDP_SMALL_SLOTS - 1)];
	struct cpu_state *cs = w->cs;
	__u64 live = eq_bit(s->state, SLOT_LIVE);
	/* A gone placeholder: kept while there is room (the entries past the
	 * last take the stores that keep nothing). */
	__u64 g = live & s->gone & gt_bit(READ_DROPS, cs->ds_ngone);
	cs->ds_gone_at[cs->ds_ngone & (2 * READ_DROPS - 1)] = idx;
	cs->ds_ngone += (__u32)g;
	const struct reader_state *rs = w->rs;
	for (__u32 d = 0; d < READ_DROPS; d++) {
		__u64 skb = rs->drop_skb[d];
		__u64 m = live & (s->gone ^ 1) & gt_bit(rs->drop_n, d) & ne_bit(skb, 0) & eq_bit(s->skb, skb) &
			  gt_bit(rs->drop_ns[d], s->rx.receive_ns) & (((cs->ds_found >> d) & 1) ^ 1);
		cs->ds_at[d] += (__u32)m * (idx - cs->ds_at[d]);
		cs->ds_found |= (__u32)m << d;
	}
	return 0;
}

/* The slots of the datagrams this call dropped (note_read_drop), done with
 * no record, as the scan found them, if each still holds what it did: a
 * pushed one's LIVE slot of its address, received before the drop, of its
 * length and, if tracked, its ports; for one dequeued before it was pushed,
 * a LIVE gone placeholder, any of them: they are interchangeable.
 *
 * A dropped datagram whose data-ready call had not run when a read took it
 * gets a gone placeholder from that call, never a slot of its address; so
 * no slot of its address that the scan missed can appear after it. Should
 * such a datagram leave an older LIVE slot of its address, length and ports
 * to be taken for its own (a datagram of the same flow, freed just before,
 * held by a read in flight), that slot's datagram loses its record, and no
 * read is named wrongly: until the gone placeholder is made, a producer is
 * mid-batch and no read of the socket is certain; once it is, it is a
 * candidate of every read and fits every length.
 *
 * By queue order, slots that no longer mirror the queue are not settled
 * (their reads are not named anyway), and what they hold is never written
 * out (drops_unsure); nor when one is not found or a call dropped more
 * than it keeps: the slots stop mirroring the queue, and say so
 * (order_lost). Returns how many pushed ones were settled, or -1 when the
 * slots were given up. Lock held. */
static __always_inline int settle_on(struct udp_sock_state *st, struct udp_slot *slots, __u32 mask,
				     const struct reader_state *rs, const struct cpu_state *w)
{
	__u64 ok = eq_bit(rs->drop_more, 0) & eq_bit(st->incomplete, 0);
	__u64 settled = 0;
	__u32 gones = 0;
	for (__u32 d = 0; d < READ_DROPS; d++) {
		/* Selections by arithmetic: a branch per drop would double the
		 * verifier's walk at each. */
		__u64 active = gt_bit(rs->drop_n, d), skb = rs->drop_skb[d], pushed = ne_bit(skb, 0);
		__u32 idx = (__u32)(pushed * w->ds_at[d] + (pushed ^ 1) * w->ds_gone_at[gones & (READ_DROPS - 1)]);
		__u64 found = (pushed & (w->ds_found >> d)) | ((pushed ^ 1) & gt_bit(w->ds_ngone, gones));
		gones += (__u32)(active & (pushed ^ 1));
		struct udp_slot *s = &slots[idx & mask];
		__u64 same = eq_bit(s->skb, skb) & gt_bit(rs->drop_ns[d], s->rx.receive_ns) &
			     eq_bit(s->rx.len, rs->drop_len[d]) &
			     (s->no_record | eq_bit(s->rx.sport, rs->drop_sport[d]));
		__u64 fits = found & 1 & gt_bit(st->tail - st->head, idx - st->head) & eq_bit(s->state, SLOT_LIVE) &
			     ((pushed & same) | ((pushed ^ 1) & s->gone));
		__u64 done = ok & active & fits;
		ok &= fits | (active ^ 1);
		slot_done(st, s, done);
		settled += done & ne_bit(skb, 0);
	}
	advance_head(st, slots, mask);
	if (ok)
		return (int)settled;
	int lost = st->incomplete ? 0 : -1;
	st->incomplete = 1;
	st->drops_unsure = 1;
	return lost;
}

/* At the return of a call that dropped datagrams it had dequeued from `sk`
 * (note_read_drop), before the read's own decision. By queue order, with a
 * producer mid-batch the dropped datagram may have no slot yet: the slots
 * are given up then (settle_on). Waiting for a later return instead left the
 * dropped datagram's slot LIVE meanwhile, and a retirement could write it
 * out as a packet-only record of a datagram no read returned (seen with four
 * threads, tests/bpf/test_odd_packets.cpp). */
static __always_inline void settle_read_drop(struct sock *sk, struct reader_state *rs, int pidx)
{
	if (sk->sk_protocol != IPPROTO_UDP || !drop_in_this_call(rs, pidx))
		goto out;
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	if (!st)
		goto out; /* no slot was ever made here */
	struct udp_big_state *big = udp_big_of(sk, st, false);
	struct cpu_state *cs = this_cpu();
	if (!cs)
		goto out;
	struct drop_scan w = {.st = st, .big = st->big ? big : NULL, .rs = rs, .cs = cs, .tail = st->tail};
	w.n = w.tail - st->head;
	cs->ds_found = 0;
	cs->ds_ngone = 0;
	bpf_loop(UDP_BIG_SLOTS, drop_scan_step, &w, 0);
	if (!lock_with_big(sk, st, &big))
		goto out;
	/* A promotion to the big slots since the scan keeps each slot's
	 * number (make_room): what the scan found is checked wherever it is. */
	int r = st->big && big ? settle_on(st, big->slots, UDP_BIG_SLOTS - 1, rs, cs)
			       : settle_on(st, st->small, UDP_SMALL_SLOTS - 1, rs, cs);
	bpf_spin_unlock(&st->lock);
	r = (int)opaque_value((__u64)(__s64)r, SCRATCH_RECV); /* one walk on, whatever it was */
	if (r > 0)
		ADD(drops, NETLATD_DROP_STACK_DROPPED, r);
	else if (r < 0)
		COUNT(drops, NETLATD_DROP_ORDER_LOST);
out:
	if (rs->drop_port) {
		__u32 p = (rs->drop_port - 1) & (NETLATD_MAX_PORTS - 1);
		__sync_fetch_and_sub(rs->drop_asked ? &asks_pending[p] : &drops_pending[p], 1);
	}
	rs->drop_port = 0;
	rs->drop_asked = 0;
	rs->drop_n = 0;
	rs->drop_more = 0;
}

#endif /* NETLATD_UDP_READ_BPF_H */
