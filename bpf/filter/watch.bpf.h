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

/* watched() for the filter, which asks it for every packet of a watched
 * port: the answer for the last device asked on this CPU is kept in `cs`
 * until the daemon changes the map (cfg_watch_gen), so that a flow's packets
 * pay a compare instead of a hash lookup. The generation is read before the
 * lookup: an answer looked up across a change is kept under the older one,
 * and looked up again. The filter does not nest in itself on a CPU (the
 * kernel's recursion guard), so nothing else writes the copy meanwhile. */
static __always_inline const struct netlatd_watch *watched_here(struct cpu_state *cs, struct net_device *dev,
								__u16 vlan)
{
	__u32 netns = dev->nd_net.net->ns.inum, ifindex = (__u32)dev->ifindex;
	__u32 gen = cfg_watch_gen + 1;
	if (cs->wc_gen == gen && cs->wc_key.netns == netns && cs->wc_key.ifindex == ifindex && cs->wc_key.vlan == vlan)
		return cs->wc_found ? &cs->wc_val : NULL;
	const struct netlatd_watch *w = watched(dev, vlan);
	cs->wc_key.netns = netns;
	cs->wc_key.ifindex = ifindex;
	cs->wc_key.vlan = vlan;
	cs->wc_found = w != NULL;
	if (w)
		cs->wc_val = *w;
	cs->wc_gen = gen;
	return w;
}

#endif /* NETLATD_FILTER_WATCH_BPF_H */
