/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: UDP where the kernel names each read's datagram
 * (docs/JOIN.md): its queueing, stamped into its stash entry. */
#ifndef NETLATD_UDP_NAMED_QUEUE_BPF_H
#define NETLATD_UDP_NAMED_QUEUE_BPF_H

/* Where the kernel names each read's skb: the datagram keeps its stash entry
 * until its read, and its queueing is stamped there. The entry is held busy
 * while it is written: another packet of its set may take it meanwhile (the
 * older of two), and must not be given this stamp. A datagram the enqueue
 * then drops (its receive buffer full) is freed through kfree_skb, which
 * takes the entry and counts it. */
static __always_inline int stamp_queued(struct sock *sk, __u64 key)
{
	int way = stash_way(key);
	if (way < 0)
		return 0;
	struct netlatd_stash_set *set = stash_set_of(key);
	__u64 *owner = &set->skb[STASH_WAY(way)];
	if (__sync_val_compare_and_swap(owner, key, NETLATD_STASH_BUSY) != key)
		return 0;
	/* An entry already queued, or of another port, is an earlier skb's at
	 * this address, freed where no hook of ours saw it (forwarded, say):
	 * this datagram reached the socket without passing the filter (another
	 * interface's, or a copy made for a second socket), and must not take
	 * its stamps. It is counted, as a newer packet taking an entry is. */
	if (set->queued_ns[STASH_WAY(way)] || set->rx[STASH_WAY(way)].dport != sk->__sk_common.skc_num) {
		__sync_lock_test_and_set(owner, NETLATD_STASH_FREE);
		COUNT(drops, NETLATD_DROP_UNJOINED);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	set->queued_ns[STASH_WAY(way)] = now;
	__sync_lock_test_and_set(owner, key);
	struct cpu_state *cs = this_cpu();
	COUNT_ON(cs, counters, NETLATD_CNT_QUEUED);
	leave_wake_hint(cs, sk, now);
	return 0;
}

#endif /* NETLATD_UDP_NAMED_QUEUE_BPF_H */
