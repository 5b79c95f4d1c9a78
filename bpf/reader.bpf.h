/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what is known of the reading task, in its task-local
 * storage (created only for tasks that read a watched socket or are woken by
 * one): the start of its receive call, the datagram the call dequeued, the
 * end of the TCP bytes it copied, and the wake-up a watched socket gave it. */
#ifndef NETLATD_READER_BPF_H
#define NETLATD_READER_BPF_H

static __always_inline struct reader_state *reader_of(struct task_struct *task, bool create)
{
	return bpf_task_storage_get(&readers, task, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline struct reader_state *current_reader(bool create)
{
	return reader_of(bpf_get_current_task_btf(), create);
}

/* Where the kernel names reads: a datagram consumed by a call whose return was
 * not seen (a call already blocked when fexit/sock_recvmsg attached) is
 * counted when the task's next call starts or consumes. */
static __always_inline void forget_consumed(struct reader_state *rs)
{
	if (rs->consumed_sk && rs->named)
		COUNT(drops, NETLATD_DROP_UNSEEN_READ);
	rs->consumed_sk = 0;
	rs->named = 0;
}

/* fentry/sock_recvmsg: a receive call starts (every recv, recvfrom, recvmsg,
 * each datagram of recvmmsg, read on a socket, io_uring's recv). */
static __always_inline int on_recv_call(struct socket *sock)
{
	struct sock *sk = sock->sk;
	if (!sk || !port_watched(sk->__sk_common.skc_num))
		return 0;
	struct reader_state *rs = current_reader(true);
	if (!rs)
		return 0;
	rs->call_start_ns = bpf_ktime_get_ns();
	rs->call_sk = (__u64)sk;
	forget_consumed(rs);
	return 0;
}

/* fentry/skb_consume_udp: the datagram this UDP receive call dequeued. Its
 * stash entry is taken now, before the kernel frees the skb: the next skb at
 * its address may be another datagram's, received and queued before this call
 * returns, and the address names this one only until then. */
static __always_inline int on_udp_consume(struct sock *sk, struct sk_buff *skb, int len)
{
	/* A peek: udp_recvmsg passes minus what it copied, and the datagram
	 * stays queued for the read that follows (dnsmasq peeks before each
	 * read). Taken for a read, it cost the read that followed its
	 * datagram: every datagram of such a reader was lost. A peek of an
	 * empty datagram passes 0: the peek's own reference on the skb (the
	 * queue holds one more) tells it from a read, which holds the only
	 * one. (A read while another thread's peek holds a reference is taken
	 * for a peek: its entry stays, and expires unread, counted.) */
	if (len < 0 || !port_watched(sk->__sk_common.skc_num))
		return 0;
	if (len == 0 && skb->users.refs.counter > 1)
		return 0;
	struct reader_state *rs = current_reader(true);
	if (!rs)
		return 0;
	forget_consumed(rs);
	rs->consumed_sk = (__u64)sk;
	__u64 key = (__u64)skb;
	struct netlatd_stash_entry *e = stash_find(key);
	if (!e)
		return 0; /* not tracked: an untracked read at the return */
	/* Read, then claimed: an entry taken for another packet meanwhile (its
	 * set's older one evicted) fails the claim. */
	__builtin_memcpy(&rs->named_rx, &e->rx, sizeof(rs->named_rx));
	__u64 queued = e->queued_ns;
	if (!stash_claim(e, key))
		return 0;
	rs->named_queue_after = queued ? before(queued, rs->named_rx.receive_ns) : 0;
	rs->named = 1;
	return 0;
}

/* tcp:tcp_rcv_space_adjust, after each copy of a TCP receive call, under the
 * socket lock: copied_seq is where this call's bytes end so far. */
static __always_inline int on_tcp_copied(struct sock *sk)
{
	if (!port_watched(sk->__sk_common.skc_num))
		return 0;
	struct reader_state *rs = current_reader(true);
	if (!rs)
		return 0;
	rs->tcp_sk = (__u64)sk;
	rs->tcp_end = BPF_CORE_READ((struct tcp_sock *)sk, copied_seq);
	return 0;
}

/* How long after a data-ready call its wakings may come: generous (an
 * emulated guest is slow), since each woken task is checked to wait on the
 * socket, which is what makes a waking the socket's. */
#define WAKE_HINT_NS 10000000

/* Whether `task` is one of the first four waiters on `sk`'s wait queue; if
 * so, `*fn` is its entry's wake function. `typed`: plain loads through
 * bpf_core_cast (bpf_rdonly_cast, 6.2+), one load each where the other way
 * makes a bpf_probe_read_kernel call each. A compile-time constant: the
 * variant for 6.1 must not hold the kfunc call. */
static __always_inline bool find_waiter(struct sock *sk, __u64 task, bool typed, __u64 *fn)
{
	__u32 off = bpf_core_field_offset(struct wait_queue_entry, entry);
	if (typed) {
		struct sock *ts = bpf_core_cast(sk, struct sock);
		struct socket_wq *wq = ts->sk_wq;
		if (!wq)
			return false;
		struct list_head *head = &wq->wait.head, *node = wq->wait.head.next;
		for (int i = 0; i < 4; i++) {
			if (!node || node == head)
				return false;
			/* The entry around the node, from a number: 6.12's verifier
			 * refuses to subtract from an untrusted pointer. */
			struct wait_queue_entry *we = bpf_core_cast((void *)(ptr_value(node, SCRATCH_WAKE) - off), struct wait_queue_entry);
			if ((__u64)we->private == task) {
				*fn = (__u64)we->func;
				return true;
			}
			node = node->next;
		}
		return false;
	}
	struct socket_wq *wq = BPF_CORE_READ(sk, sk_wq);
	if (!wq)
		return false;
	struct list_head *head = &wq->wait.head, *node = BPF_CORE_READ(wq, wait.head.next);
	for (int i = 0; i < 4; i++) {
		if (!node || node == head)
			return false;
		struct wait_queue_entry *we = (void *)node - off;
		if ((__u64)BPF_CORE_READ(we, private) == task) {
			*fn = (__u64)BPF_CORE_READ(we, func);
			return true;
		}
		node = BPF_CORE_READ(node, next);
	}
	return false;
}

/* sched_waking: if a watched socket's data-ready call just ran on this CPU
 * and `p` waits on that socket's wait queue, the socket woke it. Readers
 * asleep inside a receive call wait with receiver_wake_function (datagram
 * sockets) or woken_wake_function (TCP); an epoll or poll waiter is woken
 * through another queue and is not recognised here. */
static __always_inline int on_sched_waking(struct task_struct *p, bool typed)
{
	struct cpu_state *cs = this_cpu();
	if (!cs || !cs->hint_sk)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now - cs->hint_ts > WAKE_HINT_NS) {
		cs->hint_sk = 0;
		return 0;
	}
	__u64 fn = 0;
	if (!find_waiter((struct sock *)cs->hint_sk, ptr_value(p, SCRATCH_WAKE), typed, &fn))
		return 0;
	struct reader_state *rs = reader_of(p, true);
	if (!rs)
		return 0;
	rs->woken_ns = now;
	rs->woken_sk = cs->hint_sk;
	rs->woken_in_call = fn && (fn == targ_receiver_wake_fn || fn == targ_woken_wake_fn);
	return 0;
}

/* What a receive return knows of its reader, for the records it emits. */
struct read_view {
	__u64 now;          /* the return */
	__u64 pid_tgid;
	__u64 switch_in;    /* its switch-in on this CPU, 0 if not traced */
	__u64 copy_ts;      /* its last skb_copy_datagram_iovec here, 0 if none */
	__u64 call_start;   /* this call's start, 0 if no hook gave it */
	__u64 woken_ns;     /* woken by this socket, 0 if not */
	__u64 name[2];      /* comm */
	__u32 cpu;
	__u8 woken_in_call;
	__u8 named;         /* 1: the daemon knows this reader as it is now (tell_reader) */
	__u8 _pad[2];
};

/* Tells the daemon who this reader is, ahead of its records in the ring,
 * unless it was told already. False: it could not be (no storage for the
 * task, ring full), and no record may name this reader. */
static __always_inline bool tell_reader(struct reader_state *rs, const struct read_view *v)
{
	__u64 cgroup = targ_reader_cgroup ? bpf_get_current_cgroup_id() : 0;
	if (!rs) {
		rs = current_reader(true);
		if (!rs)
			return false;
	}
	__u32 gen = cfg_readers_gen;
	if (rs->told_pid_tgid == v->pid_tgid && rs->told_name[0] == v->name[0] && rs->told_name[1] == v->name[1] &&
	    rs->told_cgroup == cgroup && rs->told_gen == gen)
		return true;
	struct netlatd_wire_reader *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r)
		return false;
	r->tid = (__u32)v->pid_tgid;
	r->tgid = v->pid_tgid >> 32;
	r->_pad = 0;
	__u64 *name = (__u64 *)r->comm;
	name[0] = v->name[0];
	name[1] = v->name[1];
	r->cgroup = cgroup;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	rs->told_pid_tgid = v->pid_tgid;
	rs->told_name[0] = v->name[0];
	rs->told_name[1] = v->name[1];
	rs->told_cgroup = cgroup;
	rs->told_gen = gen;
	return true;
}

static __always_inline void view_here(struct read_view *v, __u64 now, __u64 pid_tgid, struct sock *sk,
				      struct reader_state *rs)
{
	__u32 tid = (__u32)pid_tgid;
	struct cpu_state *cs = this_cpu();
	v->now = now;
	v->pid_tgid = pid_tgid;
	v->cpu = bpf_get_smp_processor_id();
	v->switch_in = cs && cs->oncpu_tid == tid ? cs->oncpu_ts : 0;
	v->copy_ts = cs && cs->copy_tid == tid ? cs->copy_ts : 0;
	v->call_start = rs && rs->call_sk == (__u64)sk ? rs->call_start_ns : 0;
	v->woken_ns = rs && rs->woken_sk == (__u64)sk ? rs->woken_ns : 0;
	v->woken_in_call = rs && rs->woken_sk == (__u64)sk ? rs->woken_in_call : 0;
	/* The name with two loads instead of a helper call. */
	struct task_struct *task = bpf_get_current_task_btf();
	v->name[0] = *(__u64 *)&task->comm[0];
	v->name[1] = *(__u64 *)&task->comm[8];
	v->_pad[0] = v->_pad[1] = 0; /* all of it is read (emit_rec) */
	v->named = tell_reader(rs, v);
}

#endif /* NETLATD_READER_BPF_H */
