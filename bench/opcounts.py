"""Operations per packet: what netlatd's BPF programs do, in figures a host's speed
does not change (issue 32): lock pairs, ring reservations, map lookups, map updates,
clock reads. A PVM guest makes an IRQ save/restore a hypercall, so the ns figures
alone do not say whether a change did more work or the host was slower.

netlatd --count-ops counts them (bpf/lib/ops.bpf.h) in runs of their own, apart
from the timed ones: its atomic adds would disturb the timing. floor-clock's are
derived: one clock read a program run, nothing else.
"""
from bench_common import log

OPS = ("lock_pairs", "ring_reserves", "map_lookups", "map_updates", "clock_reads")
OPS_HEAD = ("lock pairs", "ring reservations", "map lookups", "map updates", "clock reads")
VARIANT = "netlatd-ops"


def ops_window(lines):
    """The ops and matching packets of the interval lines from the first to the last
    with matching packets: the daemon's start and stop (and the idle time around the
    work, a fraction of an interval at each end) left out. None without "ops"."""
    iv = [j for j in lines if j.get("type") == "interval"]
    if not any("ops" in j for j in iv):
        return None
    busy = [i for i, j in enumerate(iv) if (j.get("coverage") or {}).get("matching")]
    if not busy:
        return {"matching": 0, "ops": {k: 0 for k in OPS}, "intervals": 0}
    window = iv[busy[0]:busy[-1] + 1]
    return {"matching": sum(int(j["coverage"]["matching"]) for j in window),
            "ops": {k: sum(int((j.get("ops") or {}).get(k, 0)) for j in window) for k in OPS},
            "intervals": len(window)}


def per_packet(w):
    """Ops per matching packet of a window (ops_window), or None."""
    if not w or not w["matching"]:
        return None
    return {k: w["ops"][k] / w["matching"] for k in OPS}


def count_runs(b, pingpong, p_srv, p_cli):
    """netlatd --count-ops over one loopback ping-pong and one max-rate flood: the
    counts per matching packet, into results["ops"]. b is the Bench."""
    out = b.results["ops"] = {}
    for work, iface, ifindex, ports, run in (
            ("loopback round trip", "lo", 1, [p_srv, p_cli], pingpong),
            ("max-rate flood", b.veth, b.veth_ifindex, [b.ports[2]],
             lambda: b.flood(0, b.a.flood_seconds))):
        try:
            tr, info = b.start_tracer(VARIANT, iface, ifindex, ports)
        except Exception as e:  # BenchError: reported as netlatd's failure
            b.tracer_error(VARIANT, f"op counts: {e}")
            return
        try:
            run()
        finally:
            extra = b.stop_tracer(VARIANT, tr, info)
        w = extra.get("ops_window")
        pp = per_packet(w)
        out[work] = {"window": w, "per_packet": pp}
        if pp is None:
            b.tracer_error(VARIANT, f"op counts: no counts over the {work} ({w})")
            continue
        log(f"ops per packet, {work}: " + ", ".join(f"{k} {pp[k]:.2f}" for k in OPS)
                   + f" ({w['matching']} matching packets)")


def floor_clock_per_packet(res, floor_ref):
    """floor-clock's ops per packet from its timed runs: a clock read per program run."""
    out = {}
    hr = (res.get("hooks_roundtrip") or {}).get(floor_ref)
    if hr:
        # Two datagrams a round trip.
        out["loopback round trip"] = hr["runs_per_round_trip"] / 2
    hk = (res.get("hooks") or {}).get(floor_ref)
    if hk and hk.get("received"):
        out["max-rate flood"] = sum(p["run_cnt"] for p in hk["progs"]) / hk["received"]
    return {w: {**{k: 0.0 for k in OPS}, "clock_reads": runs} for w, runs in out.items()}


def bpf_ns_per_packet(res, variant, work):
    """The timed runs' BPF ns per packet, beside the counts."""
    if work == "loopback round trip":
        h = (res.get("hooks_roundtrip") or {}).get(variant)
        return h["bpf_ns_per_round_trip"] / 2 if h else None
    h = (res.get("hooks") or {}).get(variant)
    return h.get("bpf_ns_per_packet") if h else None


def ops_rows(res, floor_ref):
    """Rows of the "per packet" table: work, tracer, the five counts, BPF ns."""
    rows = []
    floor = floor_clock_per_packet(res, floor_ref)
    for work, r in (res.get("ops") or {}).items():
        for tracer, pp in (("netlatd", r.get("per_packet")), (floor_ref, floor.get(work))):
            if pp is None:
                continue
            ns = bpf_ns_per_packet(res, tracer, work)
            rows.append([work, tracer] + [f"{pp[k]:.2f}" for k in OPS]
                        + [f"{ns:.0f}" if ns is not None else "n/a"])
    return rows


def ops_title(res):
    n = {w: (r.get("window") or {}).get("matching") for w, r in (res.get("ops") or {}).items()}
    return ("Operations per packet (netlatd --count-ops in runs apart from the timed ones, over "
            + ", ".join(f"{m} matching packets of the {w}" for w, m in n.items())
            + "; every program run in the window, divided by the matching packets, as the ns are;"
            " floor-clock: a clock read a run; BPF ns: the timed runs')")
