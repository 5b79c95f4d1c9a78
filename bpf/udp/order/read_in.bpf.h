/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what a UDP read by queue order learns before it takes
 * its socket's lock (where no kfunc, not even a type cast, may be called):
 * whether a producer is mid-batch, its buffer's size, the queues' head. */
#ifndef NETLATD_UDP_ORDER_READ_IN_BPF_H
#define NETLATD_UDP_ORDER_READ_IN_BPF_H

/* Looks at the producer queues' charge a read makes before it gives up
 * waiting for a producer to finish its batch (up to some 5 microseconds,
 * only while one is mid-batch with the socket's queues drained). */
#define QUIET_SPINS 512

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
 * The answer leaves as a number the verifier does not know (opaque_on): a
 * known true from the first look and an unknown one from the loop would be
 * two states through all of the read's decision, which the verifier's
 * instruction budget cannot afford. */
static __always_inline bool producers_quiet(struct cpu_state *cs, struct sock *sk, bool typed)
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
	return opaque_on(cs, l.quiet, SCRATCH_RECV);
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

/* The datagram at the head of the socket's queues (the reader queue, else the
 * receive queue), 0 when both are empty. Read before the lock, as a snapshot:
 * this read's datagram was dequeued before it, so it lies before the head's
 * slot (docs/JOIN.md). Two loads of lists the kernel changes without our
 * lock: a splice between them reads as empty, which only widens what the
 * read may have taken, never narrows it. */
static __always_inline __u64 queue_head(struct cpu_state *cs, struct sock *sk, bool typed)
{
	if (typed) {
		/* bpf_core_cast: plain loads past struct sock (see producers_quiet). */
		struct udp_sock *tu = bpf_core_cast(sk, struct udp_sock);
		struct sk_buff *first = tu->reader_queue.next;
		if ((void *)first == (void *)&tu->reader_queue)
			first = sk->sk_receive_queue.next;
		if ((void *)first == (void *)&sk->sk_receive_queue)
			first = NULL;
		return ptr_value_on(cs, first, SCRATCH_RECV); /* one unknown number, whichever way it went */
	}
	struct udp_sock *up = (struct udp_sock *)sk;
	/* BPF_CORE_READ: reader_queue lies past struct sock, where a typed
	 * load cannot reach without bpf_core_cast (6.2+); this runs on 6.1. */
	__u64 readq = ptr_value_on(cs, &up->reader_queue, SCRATCH_RECV),
	      rq = ptr_value_on(cs, &sk->sk_receive_queue, SCRATCH_RECV);
	__u64 skb = (__u64)BPF_CORE_READ(up, reader_queue.next);
	if (skb == readq)
		skb = (__u64)BPF_CORE_READ(sk, sk_receive_queue.next);
	return !skb || skb == rq ? 0 : skb;
}


#endif /* NETLATD_UDP_ORDER_READ_IN_BPF_H */
