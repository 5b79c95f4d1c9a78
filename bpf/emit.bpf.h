/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: one ring-buffer record per packet read, built from the
 * packet's stamps and its reader's view; or, for a packet whose reader cannot
 * be named, from the packet's own stamps alone. */
#ifndef NETLATD_EMIT_BPF_H
#define NETLATD_EMIT_BPF_H

/* The packet's half of a record (struct netlatd_wire_packet, abi.h): its
 * stamps stay the distances from netif_receive_skb that its entry keeps.
 * `queue_after`: 0 if its queueing was not seen; `rx_known`: its
 * netif_receive_skb and earlier stamps are its own (not a retransmitted
 * copy's). Every field is written: the ring's memory is not zeroed. */
static __always_inline void fill_packet(struct netlatd_wire_packet *rec, const struct netlatd_rx *rx,
					__u32 queue_after, bool rx_known)
{
	rec->recv_return_ns = 0;
	rec->receive_ns = rx->receive_ns;
	rec->irq_before = rx->irq_before;
	rec->raise_before = rx->raise_before;
	rec->softirq_before = rx->softirq_before;
	rec->queue_after = queue_after;
	rec->reader_before[NETLATD_WIRE_SWITCH_IN] = 0;
	rec->reader_before[NETLATD_WIRE_CALL_START] = 0;
	rec->reader_before[NETLATD_WIRE_WAKEUP] = 0;
	rec->reader_before[NETLATD_WIRE_COPY] = 0;
	rec->tid_flags = (rx->flags | ((__u32)rx_known ^ 1) * NETLATD_WIRE_RX_UNKNOWN) << NETLATD_WIRE_TID_BITS;
	rec->len = rx->len;
	rec->cpus_iface = (rx->rx_cpu & NETLATD_WIRE_CPU_MASK) |
			  (rx->iface_id & NETLATD_WIRE_IFACE_MASK) << (2 * NETLATD_WIRE_CPU_BITS);
	rec->dport = rx->dport;
	rec->sport = rx->sport;
}

/* A reader stamp (at most `now`) as its distance before the return, plus
 * one; 0 when not seen, or when too far before the return to fit: then
 * left out and the record marked NETLATD_WIRE_FAR, which the daemon counts.
 * Arithmetic and stores into the record only: this is inlined at every
 * record of every loop of the receive return, where a branch, or a value
 * that differs between paths, multiplies the verifier's walk past its limit. */
static __always_inline void put_before(struct netlatd_wire_packet *rec, __u32 i, __u64 now, __u64 t)
{
	__u64 d = now - t + 1;
	__u64 seen = ne_bit(t, 0), fits = gt_bit(NETLATD_WIRE_BEFORE_MAX, d);
	rec->reader_before[i & (NETLATD_WIRE_READER_STAMPS - 1)] = (__u32)(d & -(seen & fits));
	rec->tid_flags |= (__u32)(seen & (fits ^ 1)) * NETLATD_WIRE_FAR << NETLATD_WIRE_TID_BITS;
}

/* The reader's half. Stamps that cannot belong to this packet's read are
 * left out: a wake-up before the packet was queued (it woke the reader for
 * an earlier one), a copy before the call or the reader's switch-in. Its
 * name, thread group and cgroup went ahead in the ring (tell_reader). */
static __always_inline void fill_reader(struct netlatd_wire_packet *rec, const struct read_view *v, __u64 queued)
{
	__u64 now = v->now;
	__u64 sw = v->switch_in <= now ? v->switch_in : 0;
	__u64 call = v->call_start <= now ? v->call_start : 0;
	rec->recv_return_ns = now;
	put_before(rec, NETLATD_WIRE_SWITCH_IN, now, sw);
	put_before(rec, NETLATD_WIRE_CALL_START, now, call);
	__u64 woke = v->woken_ns;
	if (woke && queued && woke >= queued && woke <= now && (!sw || woke <= sw)) {
		put_before(rec, NETLATD_WIRE_WAKEUP, now, woke);
		rec->tid_flags |= NETLATD_PKT_WOKEN << NETLATD_WIRE_TID_BITS;
		if (v->woken_in_call)
			rec->tid_flags |= NETLATD_PKT_SLEPT_IN_CALL << NETLATD_WIRE_TID_BITS;
	}
	__u64 from = call ? call : max_u64(queued, sw);
	if (v->copy_ts && v->copy_ts >= from && v->copy_ts <= now)
		put_before(rec, NETLATD_WIRE_COPY, now, v->copy_ts);
	/* A reader the daemon could not be told of (the ring was full, the
	 * task has no storage) is written as tid 0: a record naming its tid
	 * would be decoded with whoever had the tid before. The daemon leaves
	 * such records out and counts them as ringbuf_full. */
	rec->tid_flags |= (__u32)v->pid_tgid & NETLATD_WIRE_TID_MASK & -(__u32)v->named;
	rec->cpus_iface |= (v->cpu & NETLATD_WIRE_CPU_MASK) << NETLATD_WIRE_CPU_BITS;
}

#include "aggregate.bpf.h"

/* No wake-up per record: the daemon drains on a timer, and is woken when the
 * ring is filling up, which is checked every 32nd record a CPU writes (a
 * query is a helper call). */
static __always_inline void submit(struct netlatd_wire_packet *rec)
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

#endif /* NETLATD_EMIT_BPF_H */
