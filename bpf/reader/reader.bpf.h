/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what is known of the reading task, in its task-local
 * storage (created only for tasks that read a watched socket or are woken by
 * one): the start of its receive call, the datagram the call dequeued, the
 * end of the TCP bytes it copied, and the wake-up a watched socket gave it. */
#ifndef NETLATD_READER_READER_BPF_H
#define NETLATD_READER_READER_BPF_H

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
	 * slots are settled at the call's return (udp/order/drops.bpf.h). */
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

#endif /* NETLATD_READER_READER_BPF_H */
