/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the watched devices (the `watch` map, written by the
 * daemon): traced interfaces, the devices below them, their VLANs. */
#ifndef NETLATD_FILTER_WATCH_BPF_H
#define NETLATD_FILTER_WATCH_BPF_H

/* The devices whose packets count, and for which traced interface (abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETLATD_WATCH_ENTRIES);
	__type(key, struct netlatd_watch_key);
	__type(value, struct netlatd_watch);
} watch SEC(".maps");

/* What `dev`'s packets carrying VLAN id `vlan` (0 untagged) count for, if
 * anything. */
static __always_inline const struct netlatd_watch *watched(struct net_device *dev, __u16 vlan)
{
	struct netlatd_watch_key k = {};
	k.netns = dev->nd_net.net->ns.inum;
	k.ifindex = (__u32)dev->ifindex;
	k.vlan = vlan;
	return bpf_map_lookup_elem(&watch, &k);
}

#endif /* NETLATD_FILTER_WATCH_BPF_H */
