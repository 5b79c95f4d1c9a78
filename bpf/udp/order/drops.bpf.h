/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: datagrams a UDP read took off its socket's queue and
 * the kernel dropped (a bad checksum): noted at kfree_skb, settled at the
 * call's return so that their slots are not taken for a read's. */
#ifndef NETLATD_UDP_ORDER_DROPS_BPF_H
#define NETLATD_UDP_ORDER_DROPS_BPF_H

#define SYSCALL_IOCTL 16 /* x86-64 */
#define SYSCALL_POLL 7   /* and every call that polls, for a noted drop */

#ifdef __TARGET_ARCH_x86
/* Whether `skb`, freed now, is a datagram a UDP socket queued and a task
 * dropped in its own context; if so its UDP header and payload length
 * (note_read_drop says how this is told). x86-64 only. */
static __always_inline bool udp_queued_drop(struct sk_buff *skb, const struct cpu_state *cs, int pc,
					    struct udphdr *uh, __u32 *len_out)
{
	if (!bpf_core_field_exists(skb->dev_scratch))
		return false;
	/* A datagram the socket refused on arrival (its buffer full) carries
	 * the scratch too, and so do those left queued on a closed socket, freed
	 * by an RCU callback; softirqs of either kind run on a reader's system
	 * call (at a bottom half's enable, at an IRQ's exit). A read drops in
	 * its own task's context. */
	if (!cs || !task_context(cs, pc))
		return false;
	/* Read as a number: a typed load at skb->dev's offset is its pointer. */
	__u64 scratch = BPF_CORE_READ(skb, dev_scratch);
	__u32 len = skb->len;
	if ((__u16)(scratch >> 32) != (__u16)len || ((scratch >> 48) & 0xfefe))
		return false;
	/* Queued with its header pulled (udp_csum_pull_header): skb->len is
	 * the payload's, the header is still at the transport offset. */
	if (bpf_probe_read_kernel(uh, sizeof(*uh), skb->head + skb->transport_header) || bpf_ntohs(uh->len) != len + 8)
		return false;
	*len_out = len;
	return true;
}

#endif

/* A datagram freed by kfree_skb: one a UDP socket queued and a read then
 * dropped is kept in the reading task's state until that call returns
 * (settle_read_drop). udp_recvmsg takes the head datagram off the queue,
 * finds its checksum bad (checked only at copy time when the device left it
 * unchecked) or cannot copy it, frees it, and goes on to the next one in the
 * same call: without this, its slot stayed LIVE, every later read of the
 * socket had one candidate too many, and the slot was written out once as a
 * packet-only record of a datagram no read returned. `pushed`: its stash
 * entry is gone or another CPU's push has just claimed it, so its slot holds
 * it (or, untracked, a placeholder);
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
	struct udphdr uh;
	__u32 len;
	if (!udp_queued_drop(skb, cs, pc, &uh, &len))
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
	/* A gone placeholder without stamps: kept while there is room (the
	 * entries past the last take the stores that keep nothing). One with
	 * stamps stands for its own datagram only, found by its address below. */
	__u64 g = live & s->gone & s->no_record & gt_bit(READ_DROPS, cs->ds_ngone);
	cs->ds_gone_at[cs->ds_ngone & (2 * READ_DROPS - 1)] = idx;
	cs->ds_ngone += (__u32)g;
	const struct reader_state *rs = w->rs;
	for (__u32 d = 0; d < READ_DROPS; d++) {
		__u64 skb = rs->drop_skb[d];
		__u64 m = live & gt_bit(rs->drop_n, d) & ne_bit(skb, 0) & eq_bit(s->skb, skb) &
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
 * threads, tests/bpf/test_odd_checksums.cpp). */
static __always_inline void settle_read_drop(struct cpu_state *cs, struct sock *sk, struct reader_state *rs,
					     int pidx)
{
	if (sk->sk_protocol != IPPROTO_UDP || !drop_in_this_call(rs, pidx))
		goto out;
	struct udp_sock_state *st = bpf_sk_storage_get(&udp_socks, sk, 0, 0);
	if (!st)
		goto out; /* no slot was ever made here */
	struct udp_big_state *big = udp_big_of(sk, st, false);
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
	r = (int)opaque_on(cs, (__u64)(__s64)r, SCRATCH_RECV); /* one walk on, whatever it was */
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

/* A task that exits with drops still noted: its last FIONREAD or poll
 * dropped datagrams at the head of a socket of the port, and it never read
 * the port again to settle them (a thread blocked in poll() until its
 * process ends). Those a data-ready call had moved into slots are counted
 * here, as their settlement would have (the others were counted at
 * kfree_skb). Their slots stay LIVE, since a poll names no socket; the
 * port's hold (asks_pending) runs out by time, as for a task that lives on
 * without reading. At the task's last switch-out. */
#define TASK_DEAD_STATE 0x80 /* TASK_DEAD, include/linux/sched.h */
static __always_inline void count_exit_drops(struct task_struct *task)
{
	struct reader_state *rs = reader_of(task, false);
	if (!rs || !rs->drop_n)
		return;
	__u32 pushed = 0;
	for (__u32 d = 0; d < READ_DROPS; d++)
		pushed += (__u32)(gt_bit(rs->drop_n, d) & ne_bit(rs->drop_skb[d], 0));
	ADD(drops, NETLATD_DROP_STACK_DROPPED, pushed);
	rs->drop_n = 0;
}

#endif /* NETLATD_UDP_ORDER_DROPS_BPF_H */
