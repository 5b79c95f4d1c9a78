/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: what a receive return knows of its reader, and the
 * reader told to the daemon ahead of its records. */
#ifndef NETLATD_READER_VIEW_BPF_H
#define NETLATD_READER_VIEW_BPF_H

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
	__u8 switch_untimed; /* its switch-in here was not timed: it had no storage then */
	__u8 _pad;
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

static __always_inline void view_here(struct read_view *v, const struct cpu_state *cs, __u64 now, __u64 pid_tgid,
				      struct sock *sk, struct reader_state *rs)
{
	__u32 tid = (__u32)pid_tgid;
	v->now = now;
	v->pid_tgid = pid_tgid;
	v->cpu = bpf_get_smp_processor_id();
	v->switch_in = cs->oncpu_tid == tid ? cs->oncpu_ts : 0;
	/* As arithmetic: a 0 on one path and a 1 on another would fork the
	 * verifier's walk of every record the return writes after this. */
	v->switch_untimed = (__u8)(eq_bit(cs->oncpu_tid, tid) & eq_bit(cs->oncpu_ts, 0));
	v->copy_ts = cs->copy_tid == tid ? cs->copy_ts : 0;
	v->call_start = rs && rs->call_sk == (__u64)sk ? rs->call_start_ns : 0;
	v->woken_ns = rs && rs->woken_sk == (__u64)sk ? rs->woken_ns : 0;
	v->woken_in_call = rs && rs->woken_sk == (__u64)sk ? rs->woken_in_call : 0;
	/* The name with two loads instead of a helper call. */
	struct task_struct *task = bpf_get_current_task_btf();
	v->name[0] = *(__u64 *)&task->comm[0];
	v->name[1] = *(__u64 *)&task->comm[8];
	v->_pad = 0; /* all of it is read (emit_rec) */
	v->named = tell_reader(rs, v);
}

#endif /* NETLATD_READER_VIEW_BPF_H */
