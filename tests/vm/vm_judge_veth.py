"""Judging the vm tier's phases over veths in the guest, whose traffic the
guest makes itself (phase_stacked and phase_badcsum in guest-init.sh): a VLAN
and a bond traced by their names, and bad UDP checksums among good datagrams
found by the reads."""
from vm_guest import log
from vm_judge import judge_receiver, marker, section
from vm_judge_netlatd import EXACT_STAGES, json_records, stage_summary, sum_over
from vm_timelines import judge_timelines

# phase_stacked in guest-init.sh: what the peer namespace sends, per target.
STACKED = dict(tagged=(40, 100, "va.100"), untagged=(30, 60, None), bonded=(40, 140, "bond0"))


def judge_stacked(v, lines, netns=False):
    """A VLAN and a bond over veths, traced by their names: each datagram
    once under the upper device's name; the VLAN's lower device's untagged
    datagrams not at all. `netns`: they are in another namespace, traced
    with --netns (the devices below found from its links)."""
    setup = marker(lines, "STACKED-SETUP")
    v.check(setup is not None and setup.startswith("ok"), f"the guest made the VLAN and the bond ({setup})")
    res = next((l for l in lines if l.startswith("nlrx: result ")), None)
    got = dict(kv.split("=", 1) for kv in res.split()[2:]) if res else {}
    sent = sum(n for n, _, _ in STACKED.values())
    v.check(int(got.get("udp_datagrams", -1)) == sent, f"nlrx received {got.get('udp_datagrams')} of {sent} datagrams")
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")
    stderr, _ = section(lines, "NETLATD-STDERR")
    v.check(any("va.100: its packets arrive first on va" in l for l in stderr or []),
            "netlatd said where the VLAN's packets arrive first")
    v.check(any("bond0: its packets arrive first on vb" in l for l in stderr or []),
            "netlatd said where the bond's packets arrive first")
    if netns:
        v.check(any("tracing in network namespace" in l for l in stderr or []),
                "netlatd traced them in the other namespace (--netns)")
    records = json_records(v, lines)
    intervals = [r for r in records if r.get("type") == "interval"]
    timelines = [r for r in records if r.get("type") == "outlier"]
    want = {iface: n for n, _, iface in STACKED.values() if iface}
    packets, udp, by_iface = 0, 0, {}
    for r in intervals:
        packets += r.get("packets", 0)
        udp += r.get("udp", 0)
        by_iface[r.get("iface")] = by_iface.get(r.get("iface"), 0) + r.get("packets", 0)
    log(f"netlatd: packets={packets} udp={udp} per interface {by_iface}")
    v.check(packets == udp == sum(want.values()), f"netlatd counted {packets} packets, {udp} UDP; "
            f"the VLAN's and the bond's {sum(want.values())} only")
    counts, _, _ = stage_summary(intervals)
    for name in EXACT_STAGES:
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")
    records_by_iface, lens_by_iface = {}, {}
    for t in timelines:
        records_by_iface[t.get("iface")] = records_by_iface.get(t.get("iface"), 0) + 1
        lens_by_iface.setdefault(t.get("iface"), set()).add(t.get("len"))
    v.check(records_by_iface == want, f"timelines per interface {records_by_iface} == {want}")
    want_lens = {iface: {size} for _, size, iface in STACKED.values() if iface}
    v.check(lens_by_iface == want_lens, f"their lengths per interface {lens_by_iface} == {want_lens}")


# phase_badcsum in guest-init.sh: datagrams sent, every how many one has a
# bad checksum, and datagram i's length.
BADCSUM_SENT, BADCSUM_EVERY = 89, 3


def badcsum_len(i):
    return 40 + (i * 37) % 101


def udp_snmp(lines, name):
    """The Udp row of /proc/net/snmp a marker holds, as {field: value}."""
    words = (marker(lines, name) or "").split()
    half = len(words) // 2
    if half < 2 or words[0] != "Udp:" or words[half] != "Udp:":
        return {}
    return dict(zip(words[1:half], (int(x) for x in words[half + 1:])))


def judge_badcsum(v, lines, netlatd_args):
    """Bad checksums among good datagrams, found by the reads: nlrx reads
    every good one, the kernel counts every bad one, and netlatd names every
    good read (its record of the datagram read, in order) and counts every
    bad one as stack_dropped, with no record of it."""
    setup = marker(lines, "BADCSUM-SETUP")
    v.check(setup is not None and setup.startswith("ok"), f"the guest made the veth, checksum offload off ({setup})")
    bad = [i for i in range(BADCSUM_SENT) if i % BADCSUM_EVERY == BADCSUM_EVERY - 1]
    good_lens = [badcsum_len(i) for i in range(BADCSUM_SENT) if i not in bad]
    sent = next((l for l in lines if l.startswith("nlrx: sent ") and "bad checksum" in l), None)
    v.check(sent is not None and sent.startswith(f"nlrx: sent {BADCSUM_SENT} of {BADCSUM_SENT} ({len(bad)} with"),
            f"the peer sent {BADCSUM_SENT} datagrams, {len(bad)} with a bad checksum ({sent})")
    before, after = udp_snmp(lines, "BADCSUM-SNMP-BEFORE"), udp_snmp(lines, "BADCSUM-SNMP-AFTER")
    csum = after.get("InCsumErrors", -1) - before.get("InCsumErrors", 0)
    v.check(csum == len(bad), f"the kernel dropped {csum} datagrams for their checksum (Udp InCsumErrors), of {len(bad)}")
    got = judge_receiver(v, lines, (len(good_lens), 0))
    read_lens = [r[0] for r in got["udp_reads"]]
    v.check(read_lens == good_lens, f"nlrx read the good datagrams, in order ({len(read_lens)} of {len(good_lens)})")
    exit_line = marker(lines, "NETLATD-EXIT")
    v.check(exit_line == "rc=0", f"netlatd exited 0 after SIGTERM ({exit_line})")
    records = json_records(v, lines)
    intervals = [r for r in records if r.get("type") == "interval"]
    timelines = [r for r in records if r.get("type") == "outlier"]
    packets, udp = (sum(r.get(k, 0) for r in intervals) for k in ("packets", "udp"))
    drops = sum_over(intervals, "drops")
    log(f"netlatd: packets={packets} udp={udp}; drops: {drops}")
    v.check(packets == udp == len(good_lens), f"netlatd counted {packets} packets, {udp} UDP: the good ones only")
    v.check(drops.get("stack_dropped", 0) == len(bad),
            f"netlatd counted {drops.get('stack_dropped', 0)} stack_dropped, the {len(bad)} bad datagrams")
    counts, _, _ = stage_summary(intervals)
    for name in EXACT_STAGES:
        v.check(counts.get(name) == packets, f"{name} stage count {counts.get(name)} == {packets}")
    judge_timelines(v, netlatd_args, timelines, got, packets, drops, 0)
