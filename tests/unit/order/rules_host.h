/* The queue-order rules of bpf/udp/order/ (types.h, slots.h, decide.h,
 * retire.h, locked.h), compiled for the host: the very code the BPF object
 * runs under a UDP socket's lock, for the unit tier's checker
 * (tests/unit/order/checker.hpp). */
#ifndef NETLATD_TESTS_ORDER_RULES_HOST_H
#define NETLATD_TESTS_ORDER_RULES_HOST_H

#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>

#include "netlatd/abi.h"
#include "udp/order/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a turn can write in the checker's scenarios: its own and
 * retirements' (UDP_OUT_MAX), then a resync's (at most a window's slots,
 * fewer than this in every scenario: order_read aborts if not). */
#define ORDER_OUT_MAX (2 * UDP_OUT_MAX)

/* What a read's turn under the lock wrote out: slots copied as records, each
 * with its reader (0) or packet-only (1); a resync's last, packet-only. */
struct order_out {
	__u32 n;
	__u32 given_up;  /* stamped slots a resync left without a record */
	struct udp_slot out[ORDER_OUT_MAX];
	__u8 ambiguous[ORDER_OUT_MAX];
};

/* Whether the stash still holds a datagram at this address (not yet moved
 * into a slot): the checker's model answers for resolve_head. */
extern bool (*order_stash_has)(__u64 skb);

/* A read's turn under its socket's lock (locked.h udp_decide): its decision
 * (enum read_result), the records it writes out. `big` NULL: the socket has
 * only its inline slots. */
int order_read(struct udp_sock_state *st, struct udp_big_state *big, struct udp_spill_state *spill,
	       const struct udp_read_in *in, struct order_out *out);

/* The turn under the lock of a read that found its socket without state
 * (locked.h udp_first_decide, read.bpf.h udp_first_read): `quiet`, no
 * producer mid-batch by then. Its decision (enum read_result). */
int order_first_read(struct udp_sock_state *st, bool quiet);

/* A data-ready call's one slot, under the lock: for a tracked datagram still
 * queued (its stamps `rx`, at `skb`), a queued one netlatd does not track
 * (`rx` NULL: a placeholder of `len` bytes), or one a read already took
 * (`skb` 0: a gone placeholder). With `spill`, one that finds the slots
 * full takes the way of a call that finds the big slots full (queue.bpf.h
 * slots_full_counted: slots.h push_full), here at the inline slots' 8. */
void order_push(struct udp_sock_state *st, struct udp_big_state *big, struct udp_spill_state *spill, __u64 skb,
		const struct netlatd_rx *rx, __u32 len, struct push_counts *pushes);

/* The gone placeholder of a datagram a data-ready walk saw queued, which a
 * read took before the call's lock: it keeps the stamps `rx` (slots.h
 * push_stamps with gone). */
void order_push_gone(struct udp_sock_state *st, struct udp_big_state *big, __u64 skb, const struct netlatd_rx *rx,
		     struct push_counts *pushes);

#ifdef __cplusplus
}
#endif

#endif
