/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the watched ports, and what is kept per port. */
#ifndef NETLATD_LIB_PORTS_BPF_H
#define NETLATD_LIB_PORTS_BPF_H

/* The index of `port` in targ_ports, or -1. */
static __always_inline int port_index(__u16 port)
{
	for (__u32 i = 0; i < NETLATD_MAX_PORTS; i++) {
		if (i >= targ_nports)
			break;
		if (targ_ports[i] == port)
			return i;
	}
	return -1;
}

static __always_inline bool port_watched(__u16 port) { return port_index(port) >= 0; }

/* Receive calls in flight that dropped a datagram of the port after its
 * socket queued it and have not returned yet (udp/order/drops.bpf.h
 * note_read_drop): until each does, the dropped datagram's slot is LIVE as
 * if a read held it, and a retirement that counts LIVE and marked slots
 * against the reads that owe one could write it out. */
__u32 drops_pending[NETLATD_MAX_PORTS];
/* The same for calls that ask what is readable (FIONREAD, a poll), whose
 * drops wait for the task's next read: one that never reads again would hold
 * the port uncertain for good, so a count stands only within ASK_HOLD_NS of
 * the port's last such drop. */
__u32 asks_pending[NETLATD_MAX_PORTS];
__u64 asks_last_ns[NETLATD_MAX_PORTS];
#define ASK_HOLD_NS 1000000000ULL

/* Which CPUs receive a watched port's packets. While one CPU alone does,
 * datagrams are pushed in the order they were queued (udp/order/decide.h relies
 * on it). Written only when the CPU changes, so a single producer keeps the
 * line in its cache. */
#define MULTI_PRODUCER_HOLD_NS 10000000 /* 10 ms */
struct port_producers {
	__u32 last_cpu;      /* + 1; 0 = none yet */
	__u32 _pad;
	__u64 mixed_until;   /* another CPU received for this port until shortly before */
	__u64 _pad2[6];
};
static struct port_producers port_prod[NETLATD_MAX_PORTS];

#endif /* NETLATD_LIB_PORTS_BPF_H */
