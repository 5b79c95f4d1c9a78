/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: a ring record's two halves, the packet's and its
 * reader's (struct netlatd_wire_packet, abi.h), as the daemon decodes them. */
#ifndef NETLATD_EMIT_RECORD_BPF_H
#define NETLATD_EMIT_RECORD_BPF_H

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
	/* A switch-in not timed came before the storage that holds this
	 * call's start (on_sched_switch): the slot, 0 then, says so. */
	rec->reader_before[NETLATD_WIRE_SWITCH_IN] |= -(__u32)(v->switch_untimed & ne_bit(call, 0));
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

#endif /* NETLATD_EMIT_RECORD_BPF_H */
