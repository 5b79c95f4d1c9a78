/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side, --aggregate: a record added to per-stage histograms
 * here instead of being written to the ring (abi.h says how the daemon reads
 * them). The record is built exactly as it would be written (fill_packet,
 * fill_reader), then read back the way the daemon decodes it
 * (src/decode/record.cpp) and split into stages and buckets by the stage
 * math the daemon uses too (include/netlatd/stage_math.h), so both modes
 * put a packet into the same buckets; --aggregate-check checks that on the
 * running kernel. Whatever the daemon would count rather than
 * add (stamps out of order or left out, no reader named) is written to the
 * ring instead, as are stages of 2^36 ns or more and outliers. */
#ifndef NETLATD_AGGREGATE_AGGREGATE_BPF_H
#define NETLATD_AGGREGATE_AGGREGATE_BPF_H

const volatile bool targ_aggregate = false;
const volatile bool targ_aggregate_check = false;
const volatile __u32 targ_agg_by = 0;      /* NETLATD_AGG_BY_* */
const volatile __u32 targ_agg_nseries = 1; /* series per side */
const volatile __u32 targ_agg_ncpus = 1;   /* possible CPUs */

/* Written by the daemon. */
volatile __u32 agg_epoch = 0; /* its parity is the side written */
/* --outliers-over plus one (a total over it is an outlier, written to the
 * ring); 1: every record is one (--outliers-over 0); 0: no outliers. */
volatile __u64 agg_outlier_over1 = 0;

/* One block per side, series and CPU: ((side * nseries) + series) * ncpus +
 * cpu. A plain array indexed by CPU, not a per-CPU map: a per-CPU value is
 * at most 32 KiB, and a block holds every stage, so a record takes one
 * lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* 2 x targ_agg_nseries x targ_agg_ncpus, set at load */
	__type(key, __u32);
	__type(value, struct netlatd_agg_block);
} agg_blocks SEC(".maps");

/* The record being added, its stamps and its stages, off the stack: on 6.1
 * every frame counts at least 32 bytes, and this function's is the fourth of
 * the receive return's deepest call chain (the program, read_step, emit_rec),
 * which leaves it 32. Kept in map memory, what it works out needs no spills. */
struct agg_scratch {
	struct netlatd_agg_seq seq;      /* first: the daemon reads it */
	struct netlatd_wire_packet rec;
	__u64 t[NETLATD_PATH_STAMPS];    /* enum netlatd_path_stamp; 0: not seen */
	__u64 stage[NETLATD_AGG_STAGES]; /* NETLATD_SPAN_NONE: the stage is not known */
	__u32 series;                    /* of its side */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_scratch);
} agg_scratches SEC(".maps");

/* Which series of its side the record goes to (netlatd_series_index), -1
 * for none. */
static __always_inline int agg_series_index(const struct netlatd_wire_packet *rec, __u32 flags)
{
	int port = -1;
	if (targ_agg_by & NETLATD_AGG_BY_DPORT) {
		for (__u32 i = 0; i < NETLATD_MAX_PORTS; i++) {
			if (i >= targ_nports)
				break;
			if (targ_ports[i] == rec->dport) {
				port = i;
				break;
			}
		}
	}
	return netlatd_series_index(targ_agg_by, port, flags, targ_agg_nseries);
}

/* A reader stamp as the daemon decodes it: `before` is its distance before
 * the return, plus one; 0 is not seen. */
static __always_inline __u64 agg_reader_stamp(__u64 ret, __u32 before)
{
	return before ? ret - (before - 1) : 0;
}

/* The record of `rx` read by `v`, built as it would be written and decoded
 * as the daemon would decode it, into this CPU's scratch: 1, or 0 when it is
 * one the daemon counts rather than adds. agg_build, agg_stages and agg_add
 * are global functions called one after the other (frames side by side, not
 * nested), each walked once by the verifier, each within 32 bytes of stack. */
__noinline int agg_build(const struct netlatd_rx *rx, __u32 queue_after, const struct read_view *v)
{
	__u32 zero = 0;
	if (!rx || !v)
		return 0;
	struct agg_scratch *sc = bpf_map_lookup_elem(&agg_scratches, &zero);
	if (!sc)
		return 0;
	struct netlatd_wire_packet *rec = &sc->rec;
	fill_packet(rec, rx, queue_after, true);
	fill_reader(rec, v, queue_after ? rx->receive_ns + queue_after : 0);
	__u32 flags = rec->tid_flags >> NETLATD_WIRE_TID_BITS;
	/* Left to the daemon to count: a reader stamp left out, or no reader
	 * it could name. */
	if ((flags & NETLATD_WIRE_FAR) || !(rec->tid_flags & NETLATD_WIRE_TID_MASK))
		return 0;

	/* The stamps as RecordDecoder::decode gives them. */
	__u64 rcv = rec->receive_ns, ret = rec->recv_return_ns;
	__u64 *t = sc->t;
	t[NETLATD_PATH_IRQ] = rec->irq_before ? rcv - rec->irq_before : 0;
	t[NETLATD_PATH_RAISE] = rec->raise_before ? rcv - rec->raise_before : 0;
	t[NETLATD_PATH_ENTRY] = rec->softirq_before ? rcv - rec->softirq_before : 0;
	t[NETLATD_PATH_RECEIVE] = rcv;
	t[NETLATD_PATH_QUEUED] = rec->queue_after ? rcv + rec->queue_after : 0;
	t[NETLATD_PATH_WAKEUP] = agg_reader_stamp(ret, rec->reader_before[NETLATD_WIRE_WAKEUP]);
	t[NETLATD_PATH_COPY] = agg_reader_stamp(ret, rec->reader_before[NETLATD_WIRE_COPY]);
	t[NETLATD_PATH_RETURN] = ret;
	__u32 sw = rec->reader_before[NETLATD_WIRE_SWITCH_IN];
	if (sw == NETLATD_WIRE_BEFORE_CALL) {
		flags |= NETLATD_PKT_ON_CPU_BEFORE_CALL;
		sw = 0;
	}
	t[NETLATD_PATH_SWITCH_IN] = agg_reader_stamp(ret, sw);
	t[NETLATD_PATH_CALL_START] = agg_reader_stamp(ret, rec->reader_before[NETLATD_WIRE_CALL_START]);
	t[NETLATD_PATH_READ_START] = netlatd_read_start(t[NETLATD_PATH_QUEUED], t[NETLATD_PATH_WAKEUP],
							 t[NETLATD_PATH_SWITCH_IN], t[NETLATD_PATH_CALL_START], flags);
	return 1;
}

/* The stages of the record agg_build left in the scratch, and its series:
 * 1, or 0 when it is to be written to the ring instead. */
__noinline int agg_stages(void)
{
	__u32 zero = 0;
	struct agg_scratch *sc = bpf_map_lookup_elem(&agg_scratches, &zero);
	if (!sc)
		return 0;

	/* An out-of-order record is counted, not added. */
	if (!netlatd_path_ordered(sc->t))
		return 0;
	asm volatile("" ::: "memory");

	/* Each stage from memory, one at a time (the barrier keeps clang from
	 * holding the stamps in registers across them, which spills). */
#define AGG_STAGE(i, from, to)                               \
	do {                                                 \
		sc->stage[i] = netlatd_span(sc->t[from], sc->t[to]); \
		asm volatile("" ::: "memory");               \
	} while (0);
	NETLATD_STAGE_BOUNDS(AGG_STAGE)
#undef AGG_STAGE
	__u64 first = netlatd_total_start(sc->t);
	sc->stage[NETLATD_STAGE_TOTAL] = netlatd_span(first, sc->t[NETLATD_PATH_RETURN]);
	asm volatile("" ::: "memory");
	for (int i = 0; i < NETLATD_AGG_STAGES; i++)
		if (sc->stage[i] != NETLATD_SPAN_NONE && sc->stage[i] >= NETLATD_AGG_MAX_NS)
			return 0;
	__u64 over1 = agg_outlier_over1;
	if (over1 && (over1 == 1 || (sc->stage[NETLATD_STAGE_TOTAL] != NETLATD_SPAN_NONE && sc->stage[NETLATD_STAGE_TOTAL] >= over1)))
		return 0;
	int series = agg_series_index(&sc->rec, sc->rec.tid_flags >> NETLATD_WIRE_TID_BITS);
	if (series < 0)
		return 0;
	sc->series = series;
	return 1;
}

/* Adds the record agg_stages left in the scratch to this side's histograms. */
__noinline int agg_add(void)
{
	__u32 zero = 0;
	struct agg_scratch *sc = bpf_map_lookup_elem(&agg_scratches, &zero);
	if (!sc)
		return 0;
	/* A full barrier before the epoch is read: a daemon that flipped it and
	 * then saw this writer not begun cannot see it write the old side. */
	__sync_fetch_and_add(&sc->seq.begun, 1);
	__u32 key = ((agg_epoch & 1) * targ_agg_nseries + sc->series) * targ_agg_ncpus + bpf_get_smp_processor_id();
	struct netlatd_agg_block *b = bpf_map_lookup_elem(&agg_blocks, &key);
	if (!b) {
		__sync_fetch_and_add(&sc->seq.done, 1);
		return 0;
	}
	b->packets++;
	if ((sc->rec.tid_flags >> NETLATD_WIRE_TID_BITS) & NETLATD_PKT_TCP) {
		b->tcp++;
		b->tcp_bytes += sc->rec.len;
	}
	for (__u32 i = 0; i < NETLATD_AGG_STAGES; i++) {
		__u64 d = sc->stage[i];
		if (d == NETLATD_SPAN_NONE)
			continue;
		__u32 bucket = netlatd_bucket_index(d);
		if (bucket >= NETLATD_AGG_BUCKETS)
			continue;
		struct netlatd_agg_stage *st = &b->stage[i];
		if (!st->count || d < st->min)
			st->min = d;
		if (d > st->max)
			st->max = d;
		st->count++;
		st->sum += d;
		b->buckets[i][bucket]++;
	}
	__sync_fetch_and_add(&sc->seq.done, 1);
	return 1;
}

#endif /* NETLATD_AGGREGATE_AGGREGATE_BPF_H */
