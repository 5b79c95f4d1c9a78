/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: one ring-buffer record per packet read, built from the
 * packet's stamps and its reader's view; or, for a packet whose reader cannot
 * be named, from the packet's own stamps alone. */
#ifndef NETLATD_EMIT_EMIT_BPF_H
#define NETLATD_EMIT_EMIT_BPF_H

/* --cgroup: the cgroups whose subtrees are kept, filled by the daemon after
 * load from their directories' file descriptors. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, NETLATD_MAX_CGROUP_FILTERS);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

/* No wake-up per record: the daemon drains on a timer, and is woken when the
 * ring is filling up, which is checked every 32nd record a CPU writes (a
 * query is a helper call). The CPU's count of records written, `emitted`,
 * says which: one lookup for both. */
static __always_inline void submit(struct netlatd_wire_packet *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	struct netlatd_counter_block *b = BLOCK(counters);
	if (b && (++b->v[NETLATD_CNT_EMITTED] & 31) == 0 &&
	    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= targ_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
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

/* `v` NULL: a packet-only record, for the reason `unknown`. `queue_after`:
 * when it was queued, after rx->receive_ns; 0 if not seen.
 *
 * A function the verifier walks once on its own (global: it knows only its
 * arguments' types), not once per state of the receive return that reaches
 * a record: inlined, the records were ~20 % of what it walked for
 * recv_ret_btf (up to UDP_OUT_MAX of them a read). The call costs a few ns a
 * record. */
__noinline int emit_rec(const struct netlatd_rx *rx, __u32 queue_after, __u32 rx_known, const struct read_view *v,
			__u32 unknown)
{
	if (!rx)
		return 0;
	if (targ_ncgroup_filters && !reader_kept(v))
		return 0;
	__u32 checked = 0;
	if (targ_aggregate && rx_known && agg_build(rx, queue_after, v) && agg_stages() && agg_add()) {
		if (!targ_aggregate_check)
			return 1;
		checked = NETLATD_WIRE_AGG_CHECKED << NETLATD_WIRE_TID_BITS;
	}
	struct netlatd_wire_packet *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		COUNT(drops, NETLATD_DROP_RINGBUF_FULL);
		return 0;
	}
	fill_packet(rec, rx, queue_after, rx_known);
	if (v)
		fill_reader(rec, v, queue_after ? rx->receive_ns + queue_after : 0);
	else
		rec->tid_flags |= (__u32)eq_bit(unknown, NETLATD_READER_AMBIGUOUS) * NETLATD_WIRE_AMBIGUOUS
				  << NETLATD_WIRE_TID_BITS;
	rec->tid_flags |= checked;
	submit(rec);
	return 1;
}

static __always_inline void emit_record(const struct netlatd_rx *rx, __u32 queue_after, bool rx_known,
					const struct read_view *v, __u8 unknown)
{
	emit_rec(rx, queue_after, rx_known, v, unknown);
}

static __always_inline void emit_udp(const struct udp_slot *s, const struct read_view *v, __u8 unknown)
{
	emit_record(&s->rx, s->queue_after, true, v, unknown);
}

/* Straight from the entry, which this read owns now (state READ): a copy
 * on the stack would not fit 6.1's 512 bytes for a program and its bpf_loop
 * callback together (read_step runs under recv_ret). */
static __always_inline void emit_tcp(const struct netlatd_tcp_seg *sg, const struct read_view *v)
{
	emit_record(&sg->rx, sg->queue_after, sg->dup == NETLATD_TCP_COPY_ONE, v, NETLATD_READER_KNOWN);
}

#endif /* NETLATD_EMIT_EMIT_BPF_H */
