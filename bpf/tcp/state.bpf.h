/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: TCP segments, keyed by flow and first sequence number
 * from netif_receive_skb until read (docs/JOIN.md), and each socket's cursor
 * into them (socket-local storage). */
#ifndef NETLATD_TCP_STATE_BPF_H
#define NETLATD_TCP_STATE_BPF_H

/* TCP: where the next unread segment starts (read.bpf.h). */
#define TCP_STARTS 8
#define TCP_BRIDGES 4
struct tcp_sock_state {
	__u32 cursor;       /* first sequence number of the oldest segment not yet read */
	__u32 cursor_valid;
	__u32 reader_tid;   /* the only thread that has read it, 0 once there were two */
	__u32 n_starts;
	/* The first segment of each of the last TCP_STARTS skbs tcp_probe saw
	 * queued: where a read walk resumes when the segment at the cursor was
	 * never tracked and no bridge names it (read.bpf.h). */
	__u32 starts[TCP_STARTS];
	/* Where the chain of tracked segments breaks (bytes no entry holds,
	 * found by tcp_probe) and the segment after the break. */
	__u32 bridge_from[TCP_BRIDGES];
	__u32 bridge_to[TCP_BRIDGES];
	__u32 n_bridges;
	__u32 probe_end;    /* the end of the last skb tcp_probe saw queued */
	__u32 probe_end_valid;
	/* A read found no entry at the cursor and nowhere to resume: counted
	 * once for that cursor, which stays put until a later probe names where
	 * the chain goes on. */
	__u32 stuck_at;
	__u32 stuck_valid;
	/* A read completed more segments than its walk reports (TCP_READ_WALK):
	 * those left, up to the end of its range, are counted when a later
	 * read's walk reaches them (tcp_read_too_many), not as read unseen. */
	__u32 cut_end;
	__u32 cut_valid;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcp_sock_state);
} tcp_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct netlatd_tcp_key);
	__type(value, struct netlatd_tcp_seg);
} tcp_segs SEC(".maps");

#define TCP_SEG_QUEUED 1
#define TCP_SEG_READ 2
/* Segments one tcp_probe stamps (the skb and those the backlog coalesced into it). */
#define TCP_COALESCED_MAX 32
/* Segments one read looks at (a bpf_loop's bound: a walk stops at the first
 * segment past the read, so only a read that completes that many pays for
 * them). It was 48: a reader a few ms behind a stream of small writes read
 * more than 48 segments at once (100-byte writes into a 64 KiB buffer: up to
 * 655), and those past the 48th, left QUEUED behind the next read, were
 * counted unseen_read, their bytes read but never reported (the 6.1 guest's
 * "IPv6 UDP and a TCP stream", once). 4,096 covers a 64 KiB read of
 * 16-byte segments; a walk that stops moving ends at once (read_step). The
 * segments of a read past its walk's bound get no record, and are counted
 * tcp_read_too_many (cut_end above): a bound any higher lets one program run
 * take milliseconds. */
#define TCP_READ_WALK 4096
/* A segment left unread this long after it was queued, behind the range of a
 * read that returned, was read by a call netlatd did not see return. */
#define TCP_ORPHAN_NS 1000000000ULL

static __always_inline bool v4mapped(const __u32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

/* The key of the segment at `seq` of `sk`'s incoming flow, as filter/filter.bpf.h
 * built it from the packet. `v6`: the packets are IPv6 (a dual-stack socket
 * receiving IPv4 has IPv4-mapped addresses and gets IPv4 packets). */
static __always_inline void tcp_key_of(struct sock *sk, __u32 seq, struct netlatd_tcp_key *k)
{
	k->seq = seq;
	k->sport = sk->__sk_common.skc_dport;
	k->dport = bpf_htons(sk->__sk_common.skc_num);
	if (sk->__sk_common.skc_family == AF_INET6_NR) {
		__u32 r[4], l[4];
		BPF_CORE_READ_INTO(&r, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&l, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		if (!v4mapped(r)) {
			k->addrs = tcp_key_addrs(fold6(r), fold6(l));
			return;
		}
	}
	k->addrs = tcp_key_addrs(sk->__sk_common.skc_daddr, sk->__sk_common.skc_rcv_saddr);
}

static __always_inline struct tcp_sock_state *tcp_state(struct sock *sk, bool create)
{
	struct tcp_sock_state *ts = bpf_sk_storage_get(&tcp_socks, sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	/* Two CPUs creating it at once: the one that loses gets NULL. */
	return ts || !create ? ts : bpf_sk_storage_get(&tcp_socks, sk, 0, 0);
}

#endif /* NETLATD_TCP_STATE_BPF_H */
