"""netlatd's kernel memory, as the kernel accounts it: each BPF map the daemon
holds open (its type, key and value sizes, entries, bytes charged), and from
those what grows with the traffic: per socket, per packet in flight, per
reader thread, per CPU. Read from the running daemon, so no size is kept
here by hand."""
import json

from bench_bpf import bpf_ids_of
from bench_proc import run

# What one value of a map stands for, by the map's name (the kernel keeps the
# first 15 characters). Maps not named here are the fixed ones.
UNITS = [
    ("udp_socks", "per UDP socket that queued a watched datagram (socket storage)"),
    ("udp_bigs", "more per UDP socket more than 7 datagrams behind, joined by queue order"),
    ("udp_spills", "more per UDP socket more than 1,024 datagrams behind, joined by queue order"),
    ("tcp_socks", "per TCP socket read with a watched segment (socket storage)"),
    ("tcp_segs", "per TCP segment from netif_receive_skb to its read (key + value)"),
    ("readers", "per thread that read a watched socket (task storage)"),
    ("cpu_states", "per possible CPU"),
    ("udp_resync_outs", "more per possible CPU, joined by queue order (a resync's records)"),
]


def maps_of(pid):
    """The BPF maps process `pid` holds open, as bpftool shows them."""
    ids = set(bpf_ids_of(pid, "map"))
    if not ids:
        return []
    shown = json.loads(run(["bpftool", "--json", "map", "show"], timeout=30).stdout)
    keep = ("id", "name", "type", "bytes_key", "bytes_value", "max_entries", "bytes_memlock")
    return sorted(({k: m.get(k) for k in keep} for m in shown if m.get("id") in ids),
                  key=lambda m: -(m.get("bytes_memlock") or 0))


def memory_of(pid):
    maps = maps_of(pid)
    return {"maps": maps, "charged_bytes": sum(m.get("bytes_memlock") or 0 for m in maps)}


def memory_tables(res, title, table):
    mem = res.get("memory")
    if not mem or not mem.get("maps"):
        return
    title(f"netlatd's BPF maps ({mem['charged_bytes'] / 1048576:.1f} MiB charged in all, "
          "as the kernel accounts it at start)")
    table(["map", "type", "key B", "value B", "entries", "charged KiB"],
          [(m["name"], m["type"], m["bytes_key"], m["bytes_value"], m["max_entries"],
            f"{(m.get('bytes_memlock') or 0) / 1024:.0f}") for m in mem["maps"]])
    by_name = {m["name"]: m for m in mem["maps"]}
    rows = []
    for name, what in UNITS:
        m = by_name.get(name)
        if m:
            size = m["bytes_value"] + (m["bytes_key"] if name == "tcp_segs" else 0)
            rows.append((what, name, f"{size:,} B"))
    if not rows:
        return
    title("What grows with the traffic (a value of each map; the kernel's own "
          "overhead per element comes on top)")
    table(["unit", "map", "bytes"], rows)
