/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the state of the UDP join by queue order: a socket's
 * slots (socket-local storage, freed with its socket), one datagram each in
 * the order the socket queued it. */
#ifndef NETLATD_UDP_ORDER_STATE_BPF_H
#define NETLATD_UDP_ORDER_STATE_BPF_H

#include "types.h"

/* Datagrams a UDP data-ready call walks back over from a queue's tail
 * (walk.bpf.h) for those without a slot yet (a bpf_loop walk: its
 * length costs nothing unless used). */
#define UDP_MIRROR_WALK 128

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct udp_sock_state);
} udp_socks SEC(".maps");

/* Only for sockets that once held more than UDP_SMALL_SLOTS tracked
 * datagrams; no lock of its own (udp_socks' guards it). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct udp_big_state);
} udp_bigs SEC(".maps");

/* Each CPU's buffer for what a resync writes out (retire.h resync_slots),
 * indexed by CPU: 48 KiB each, too large for a per-CPU map's value. Sized to
 * the possible CPUs by the daemon before load, and to one where the kernel
 * names reads (no resync there). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct udp_resync_out);
} udp_resync_outs SEC(".maps");

/* Only for sockets whose big slots were once full (slots.h push_full); no
 * lock of its own (udp_socks' guards it, and spill_busy while a read writes
 * it out). */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct udp_spill_state);
} udp_spills SEC(".maps");

static __always_inline struct udp_spill_state *udp_spill_of(struct sock *sk)
{
	struct udp_spill_state *spill = bpf_sk_storage_get(&udp_spills, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	return spill ? spill : bpf_sk_storage_get(&udp_spills, sk, 0, 0);
}

/* The socket's big slots, when it has (or may need) them. Looked up before
 * the lock; under it, `st->big` set with no `big` means another CPU promoted
 * the socket in between (see lock_with_big). */
static __always_inline struct udp_big_state *udp_big_of(struct sock *sk, struct udp_sock_state *st, bool create)
{
	if (!create && !st->big)
		return NULL;
	struct udp_big_state *big = bpf_sk_storage_get(&udp_bigs, sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	return big || !create ? big : bpf_sk_storage_get(&udp_bigs, sk, 0, 0);
}

/* Takes the socket's lock with its big slots at hand: a promotion between the
 * lookup and the lock is rare, and answered by looking again. Returns with
 * the lock held, or NULL (unlocked) when the big slots cannot be had. */
static __always_inline struct udp_sock_state *lock_with_big(struct sock *sk, struct udp_sock_state *st,
							     struct udp_big_state **big)
{
	for (int i = 0; i < 2; i++) {
		bpf_spin_lock(&st->lock);
		if (!st->big || *big)
			return st;
		bpf_spin_unlock(&st->lock);
		*big = udp_big_of(sk, st, false);
	}
	return NULL;
}

#endif /* NETLATD_UDP_ORDER_STATE_BPF_H */
