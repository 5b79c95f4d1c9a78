/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the wake-up. A data-ready call (UDP) or tcp_probe (TCP)
 * that moved a tracked packet onto a socket with sleepers leaves a hint on its
 * CPU; the wakings that follow credit the tasks found waiting on it. */
#ifndef NETLATD_READER_WAKE_BPF_H
#define NETLATD_READER_WAKE_BPF_H

/* Someone waits on the socket's wait queue (what the kernel checks before a wake-up). */
static __always_inline bool has_sleeper(struct sock *sk)
{
	struct socket_wq *wq = sk->sk_wq;
	if (!wq)
		return false;
	struct list_head *first = wq->wait.head.next;
	return first && first != &wq->wait.head;
}

/* The wakings that follow on this CPU are this socket's data-ready call's.
 * `cs`: this CPU's state, which the caller has at hand. */
static __always_inline void leave_wake_hint(struct cpu_state *cs, struct sock *sk, __u64 now)
{
	if (!cs)
		return;
	if (has_sleeper(sk)) {
		cs->hint_sk = (__u64)sk;
		cs->hint_ts = now;
	} else {
		cs->hint_sk = 0;
	}
}

/* How long after a data-ready call its wakings may come: generous (an
 * emulated guest is slow), since each woken task is checked to wait on the
 * socket, which is what makes a waking the socket's. */
#define WAKE_HINT_NS 10000000

/* Whether `task` is one of the first four waiters on `sk`'s wait queue; if
 * so, `*fn` is its entry's wake function. `typed`: plain loads through
 * bpf_core_cast (bpf_rdonly_cast, 6.2+), one load each where the other way
 * makes a bpf_probe_read_kernel call each. A compile-time constant: the
 * variant for 6.1 must not hold the kfunc call. Each load below is written
 * both ways; the walk is one. */
static __always_inline bool find_waiter(struct cpu_state *cs, struct sock *sk, __u64 task, bool typed, __u64 *fn)
{
	__u32 off = bpf_core_field_offset(struct wait_queue_entry, entry);
	struct socket_wq *wq = typed ? bpf_core_cast(sk, struct sock)->sk_wq : BPF_CORE_READ(sk, sk_wq);
	if (!wq)
		return false;
	struct list_head *head = &wq->wait.head;
	struct list_head *node = typed ? wq->wait.head.next : BPF_CORE_READ(wq, wait.head.next);
	for (int i = 0; i < 4; i++) {
		if (!node || node == head)
			return false;
		if (typed) {
			/* The entry around the node, from a number: 6.12's verifier
			 * refuses to subtract from an untrusted pointer. */
			struct wait_queue_entry *we =
				bpf_core_cast((void *)(ptr_value_on(cs, node, SCRATCH_WAKE) - off), struct wait_queue_entry);
			if ((__u64)we->private == task) {
				*fn = (__u64)we->func;
				return true;
			}
			node = node->next;
		} else {
			struct wait_queue_entry *we = (void *)node - off;
			if ((__u64)BPF_CORE_READ(we, private) == task) {
				*fn = (__u64)BPF_CORE_READ(we, func);
				return true;
			}
			node = BPF_CORE_READ(node, next);
		}
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
	if (!find_waiter(cs, (struct sock *)cs->hint_sk, ptr_value_on(cs, p, SCRATCH_WAKE), typed, &fn))
		return 0;
	struct reader_state *rs = reader_of(p, true);
	if (!rs)
		return 0;
	rs->woken_ns = now;
	rs->woken_sk = cs->hint_sk;
	rs->woken_in_call = fn && (fn == targ_receiver_wake_fn || fn == targ_woken_wake_fn);
	return 0;
}

#endif /* NETLATD_READER_WAKE_BPF_H */
