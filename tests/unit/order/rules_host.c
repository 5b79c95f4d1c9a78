/* bpf/udp/order/'s plain-C rules, compiled for the host (rules_host.h). */
#include "rules_host.h"

#include <stdlib.h>
#include <string.h>

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define __noinline __attribute__((noinline))

/* The part of the BPF object's per-CPU state the rules use: a read's records. */
struct cpu_state {
	__u32 n_out;
	__u32 n_resync;
	__u32 n_spill;
	__u32 given_up;
	struct udp_slot out[UDP_OUT_MAX];
	__u8 out_ambiguous[UDP_OUT_MAX];
};

bool (*order_stash_has)(__u64 skb);

static __always_inline bool stash_has(__u64 skb) { return order_stash_has(skb); }

#include "lib/arith.h"
#include "lib/verifier.bpf.h"
#include "udp/order/slots.h"
#include "udp/order/decide.h"
#include "udp/order/retire.h"
#include "udp/order/locked.h"

static void append_resync(struct order_out *out, const struct udp_resync_rec *recs, __u32 n)
{
	if (out->n + n > ORDER_OUT_MAX)
		abort();
	for (__u32 i = 0; i < n; i++) {
		struct udp_slot *s = &out->out[out->n];
		memset(s, 0, sizeof(*s));
		s->rx = recs[i].rx;
		s->queue_after = recs[i].queue_after;
		out->ambiguous[out->n++] = 1;
	}
}

int order_read(struct udp_sock_state *st, struct udp_big_state *big, struct udp_spill_state *spill,
	       const struct udp_read_in *in, struct order_out *out)
{
	/* The BPF object's is a map value per CPU: one here, as large. */
	static _Thread_local struct udp_resync_out ro;
	struct cpu_state cs = {0};
	struct head_pos hp = {.kind = HEAD_EMPTY};
	int r = udp_decide(st, big, in, &cs, &hp, &ro);
	out->n = cs.n_out;
	out->given_up = cs.given_up;
	memcpy(out->out, cs.out, cs.n_out * sizeof(cs.out[0]));
	memcpy(out->ambiguous, cs.out_ambiguous, cs.n_out);
	append_resync(out, ro.recs, cs.n_resync);
	/* What the read does after the unlock (read.bpf.h write_spill), at once
	 * here: the checker's turns are whole. */
	if (cs.n_spill) {
		if (!spill)
			abort();
		append_resync(out, spill->recs, cs.n_spill);
		st->spill_busy = 0;
	}
	return r;
}

int order_first_read(struct udp_sock_state *st, bool quiet) { return udp_first_decide(st, quiet); }

void order_push(struct udp_sock_state *st, struct udp_big_state *big, struct udp_spill_state *spill, __u64 skb,
		const struct netlatd_rx *rx, __u32 len, struct push_counts *pushes)
{
	if (spill && !big && st->tail - st->head >= UDP_SMALL_SLOTS) {
		push_full(st, spill, rx, rx ? rx->receive_ns + 1 : 0, pushes);
		return;
	}
	if (!rx) {
		push_placeholder(st, big, skb, len, 0, pushes);
		return;
	}
	push_stamps(st, big, skb, rx, rx->receive_ns + 1, false, pushes);
}

void order_push_gone(struct udp_sock_state *st, struct udp_big_state *big, __u64 skb, const struct netlatd_rx *rx,
		     struct push_counts *pushes)
{
	push_stamps(st, big, skb, rx, rx->receive_ns + 1, true, pushes);
}
