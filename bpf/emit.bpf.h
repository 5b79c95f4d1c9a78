/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: one ring-buffer record per packet read, built from the
 * packet's stamps and its reader's view; or, for a packet whose reader cannot
 * be named, from the packet's own stamps alone. */
#ifndef NETLATD_EMIT_BPF_H
#define NETLATD_EMIT_BPF_H

/* The packet's half of a record. `queued`: when it was queued on the socket,
 * 0 if not seen; `rx_known`: its netif_receive_skb and earlier stamps are its
 * own (not a retransmitted copy's). */
static __always_inline void fill_packet(struct netlatd_packet *rec, const struct netlatd_rx *rx, __u64 queued,
					bool rx_known)
{
	__u64 rcv = rx->receive_ns;
	__builtin_memset(rec, 0, sizeof(*rec));
	if (rx_known) {
		rec->stamp_ns[NETLATD_STAMP_IRQ] = rx->irq_before ? rcv - rx->irq_before : 0;
		rec->stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = rx->raise_before ? rcv - rx->raise_before : 0;
		rec->stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = rx->softirq_before ? rcv - rx->softirq_before : 0;
		rec->stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = rcv;
	}
	rec->stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = queued;
	rec->rx_cpu = rx->rx_cpu;
	rec->len = rx->len;
	rec->iface_id = rx->iface_id;
	rec->dport = rx->dport;
	rec->sport = rx->sport;
	rec->flags = rx->flags;
	rec->l4proto = rx->l4proto;
}

/* The reader's half. Stamps that cannot belong to this packet's read are
 * left out: a wake-up before the packet was queued (it woke the reader for
 * an earlier one), a copy before the call or the reader's switch-in. */
static __always_inline void fill_reader(struct netlatd_packet *rec, const struct read_view *v)
{
	__u64 now = v->now, queued = rec->stamp_ns[NETLATD_STAMP_SOCK_QUEUE];
	__u64 sw = v->switch_in <= now ? v->switch_in : 0;
	__u64 call = v->call_start <= now ? v->call_start : 0;
	rec->stamp_ns[NETLATD_STAMP_SWITCH_IN] = sw;
	rec->stamp_ns[NETLATD_STAMP_CALL_START] = call;
	__u64 woke = v->woken_ns;
	if (woke && queued && woke >= queued && woke <= now && (!sw || woke <= sw)) {
		rec->stamp_ns[NETLATD_STAMP_WAKEUP] = woke;
		rec->flags |= NETLATD_PKT_WOKEN;
		if (v->woken_in_call)
			rec->flags |= NETLATD_PKT_SLEPT_IN_CALL;
	}
	__u64 from = call ? call : max_u64(queued, sw);
	if (v->copy_ts && v->copy_ts >= from && v->copy_ts <= now)
		rec->stamp_ns[NETLATD_STAMP_COPY] = v->copy_ts;
	rec->stamp_ns[NETLATD_STAMP_RECV_RETURN] = now;
	rec->reader_cpu = v->cpu;
	rec->reader_tgid = v->pid_tgid >> 32;
	rec->reader_tid = (__u32)v->pid_tgid;
	__u64 *name = (__u64 *)rec->reader_comm;
	name[0] = v->name[0];
	name[1] = v->name[1];
	/* Records with a reader are written in the reader's own context (its
	 * receive return), so the current cgroup is the reader's. */
	if (targ_reader_cgroup)
		rec->reader_cgroup = bpf_get_current_cgroup_id();
}

/* No wake-up per record: the daemon drains on a timer, and is woken when the
 * ring is filling up, which is checked every 32nd record a CPU writes (a
 * query is a helper call). */
static __always_inline void submit(struct netlatd_packet *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	struct cpu_state *cs = this_cpu();
	if (cs && (++cs->emitted & 31) == 0 && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= targ_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
	COUNT(counters, NETLATD_CNT_EMITTED);
}

/* --cgroup: is this record's reader under one of the kept cgroups? Checked
 * before the ring space is taken. Every record is written in a receive
 * return's context, so a reader the record names is the current task; a
 * packet-only record's reader is not known (the current task is only one of
 * the candidates), so it is left out too, under its own count. */
static __always_inline bool reader_kept(const struct read_view *v)
{
	if (!v) {
		COUNT(counters, NETLATD_CNT_CGROUP_NO_READER);
		return false;
	}
	for (__u32 i = 0; i < NETLATD_MAX_CGROUP_FILTERS; i++) {
		if (i >= targ_ncgroup_filters)
			break;
		if (bpf_current_task_under_cgroup(&cgroup_filter, i) == 1)
			return true;
	}
	COUNT(counters, NETLATD_CNT_CGROUP_OUTSIDE);
	return false;
}

/* `v` NULL: a packet-only record, for the reason `unknown`. */
static __always_inline void emit_record(const struct netlatd_rx *rx, __u64 queued, bool rx_known,
					const struct read_view *v, __u8 unknown)
{
	if (targ_ncgroup_filters && !reader_kept(v))
		return;
	struct netlatd_packet *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		COUNT(drops, NETLATD_DROP_RINGBUF_FULL);
		return;
	}
	fill_packet(rec, rx, queued, rx_known);
	if (v)
		fill_reader(rec, v);
	rec->reader_unknown = v ? NETLATD_READER_KNOWN : unknown;
	submit(rec);
}

static __always_inline void emit_udp(const struct udp_slot *s, const struct read_view *v, __u8 unknown)
{
	__u64 queued = s->queue_after ? s->rx.receive_ns + s->queue_after : 0;
	emit_record(&s->rx, queued, true, v, unknown);
}

/* Straight from the entry, which this read owns now (state READ): a copy
 * on the stack would not fit 6.1's 512 bytes for a program and its bpf_loop
 * callback together (read_step runs under recv_ret). */
static __always_inline void emit_tcp(const struct netlatd_tcp_seg *sg, const struct read_view *v)
{
	__u64 queued = sg->queue_after ? sg->rx.receive_ns + sg->queue_after : 0;
	emit_record(&sg->rx, queued, sg->dup == NETLATD_TCP_COPY_ONE, v, NETLATD_READER_KNOWN);
}

#endif /* NETLATD_EMIT_BPF_H */
