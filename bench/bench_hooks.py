"""Part 3, per-hook cost: BPF run time per program during a max-rate flood and
per loopback round trip, against the floor; what single operations cost at a
hook on this host; and netlatd's op counts (opcounts.py)."""
from bench_bpf import BpfStats, bpf_prog_ids_of, bpf_prog_stats
from bench_common import FLOOR_REF, FLOOR_VARIANTS, BenchError, NoFigure, log, median
from opcounts import count_runs


def hook_costs(b):
    """Run time per BPF program during a max-rate flood (netlatd, bpftrace and the
    floor script), then per loopback round trip (netlatd, bpftrace): what each
    hook costs, and how many runs one round trip pays for."""
    a = b.a
    tracers = hook_tracers(b)
    if not tracers:
        # Nothing to take the programs' run time of (and no round to divide among).
        raise NoFigure("no tracer to measure: needs netlatd (and its floor) or bpftrace")
    out = b.results["hooks"] = {}
    rt_out = b.results["hooks_roundtrip"] = {}
    floods = flood_rounds(b, tracers)
    for v, rs in floods.items():
        if rs:
            out[v] = flood_costs(v, rs)
    ratios_to_floor(out, floods, key="bpf_ns_per_packet")

    p_srv, p_cli = b.ports[0], b.ports[1]
    srv = b.pingpong_server("hooks", f"127.0.0.1:{p_srv}")

    def pingpong():
        """One loopback ping-pong against srv: the client's result line."""
        return b.pingpong_client("hooks", f"127.0.0.1:{p_srv}", f"127.0.0.1:{p_cli}")

    try:
        rounds = round_trip_rounds(b, [t for t in tracers if t != "bpftrace-floor"], pingpong,
                                   [p_srv, p_cli])
        untraced = untraced_rounds(b, tracers, pingpong)
        if b.recv_return_hook():
            host_primitives(b, pingpong, p_srv, p_cli)
        # Apart from the timed runs: the counting's atomic adds cost time.
        if a.netlatd:
            count_runs(b, pingpong, p_srv, p_cli)
    finally:
        srv.kill()
    for v, rs in rounds.items():
        if rs:
            rt_out[v] = round_trip_costs(v, rs, a.count + a.warmup)
    ratios_to_floor(rt_out, rounds)
    if untraced:
        out_u = b.results["hooks_untraced"] = {}
        for v, rs in untraced.items():
            if rs:
                out_u[v] = round_trip_costs(v, rs, a.count + a.warmup)
        ratios_to_floor(out_u, untraced, UNTRACED_REF)


# What netlatd costs for traffic it does not trace, against the hooks' own cost.
UNTRACED_REF = "floor-empty"


def untraced_rounds(b, tracers, pingpong):
    """The same ping-pong, with netlatd (and netlatd-b) and floor-empty watching two
    other ports (the sockperf part's, idle here): every packet still passes netlatd's
    filter at netif_receive_skb and its other hooks, and none is traced. On a host of
    a fleet, most of the traffic is this. {tracer: [round]}, or None without
    floor-empty and netlatd."""
    if UNTRACED_REF not in tracers or "netlatd" not in tracers:
        return None
    vs = [v for v in (UNTRACED_REF, "netlatd", "netlatd-b") if v in tracers]
    return round_trip_rounds(b, vs, pingpong, [b.ports[3], b.ports[4]],
                             "loopback round trip on ports not traced")


def hook_tracers(b):
    """The tracers whose programs the hooks part measures."""
    a = b.a
    tracers = [v for v in b.variants() if v in FLOOR_VARIANTS]
    if a.netlatd:
        tracers.append("netlatd")
    if "netlatd-aggregate" in b.variants():
        tracers.append("netlatd-aggregate")
    if a.netlatd_b:
        tracers.append("netlatd-b")
    if "bpftrace" in b.variants():
        tracers += ["bpftrace", "bpftrace-floor"]
    return tracers


def turned(tracers, rnd):
    """The tracers in round rnd's order: each round starts one further along."""
    k = rnd % len(tracers)
    return tracers[k:] + tracers[:k]


def flood_rounds(b, tracers):
    """Each tracer's programs during a max-rate flood, in interleaved rounds as the
    round trip's are (round_trip_rounds): {tracer: [round]}. One flood each, in a
    fixed order, put whichever came later at a disadvantage: on 2026-12-07 the
    same build took 1901-2026 ns a packet as the first netlatd and 2157-2529 as
    the second, with its programs the A/B did not change slower too."""
    rounds = {v: [] for v in tracers}
    for rnd in range(b.a.hook_rounds):
        for v in turned(tracers, rnd):
            h = flood_hook_costs(b, v)
            if h is not None:
                rounds[v].append({**h, "round": rnd})
    return rounds


def flood_costs(v, rs):
    """Tracer v's programs during its floods rs as one: each program summed over
    the rounds, and the median round's BPF time per packet."""
    progs = summed_progs(rs)
    received, wall = sum(r["received"] for r in rs), sum(r["wall_s"] for r in rs)
    for p in progs:
        p["runs_per_s"] = p["run_cnt"] / wall if wall else 0
        p["runs_per_packet"] = p["run_cnt"] / received if received else None
    # A hook is "hot" if it runs at least once per ten received packets.
    hot = [p for p in progs if p["runs_per_packet"] and p["runs_per_packet"] >= 0.1
           and p["ns_per_run"] is not None]
    per_round = [r["bpf_ns_per_packet"] for r in rs if r["bpf_ns_per_packet"] is not None]
    traced = [r["traced_packets"] for r in rs]
    h = {"received": received, "recv_pps": median([r["recv_pps"] for r in rs]), "progs": progs,
         "rounds": len(rs), "bpf_ns_per_packet": median(per_round) if per_round else None,
         "bpf_ns_rounds": [round(x) for x in per_round],
         "max_hot_ns_per_run": max((p["ns_per_run"] for p in hot), default=None),
         "traced_packets": None if None in traced else sum(traced)}
    log(f"hook cost {v} per flooded packet: {len(progs)} programs, median "
        f"{h['bpf_ns_per_packet'] or 0:.0f} ns of BPF over {len(rs)} round(s)")
    return h


def flood_hook_costs(b, v):
    """Tracer v's programs during one max-rate flood, or None if it did not start."""
    r = bpf_stats_during(b, v, b.veth, b.veth_ifindex, [b.ports[2]],
                         lambda: b.flood(0, b.a.flood_seconds))
    if r is None:
        return None
    progs, f, extra = r
    total_ns = sum(p["run_time_ns"] for p in progs)
    h = {"received": f["received"], "recv_pps": f["recv_pps"], "wall_s": f["wall_s"], "progs": progs,
         "bpf_ns_per_packet": total_ns / f["received"] if f["received"] else None,
         "traced_packets": extra.get("traced_packets")}
    log(f"hook cost {v}: {len(progs)} programs, "
        f"{h['bpf_ns_per_packet'] or 0:.0f} ns of BPF per received packet")
    return h


def round_trip_rounds(b, rt_tracers, pingpong, ports, what="loopback round trip"):
    """Each tracer's programs over pingpong(), in interleaved rounds: {tracer: [round]}.
    Interleaved: this host's speed drifts by tens of per cent within minutes, so
    each round measures every tracer back to back, and a tracer's figure against
    the floor is the median of its per-round ratios."""
    a = b.a
    trips = a.count + a.warmup
    rounds = {v: [] for v in rt_tracers}
    for rnd in range(a.hook_rounds):
        for v in turned(rt_tracers, rnd):
            r = bpf_stats_during(b, v, "lo", 1, ports, pingpong)
            if r is None:
                continue
            progs, res, _ = r
            ns = sum(p["run_time_ns"] for p in progs) / trips
            rounds[v].append({"round": rnd, "progs": progs, "p50_ns": res["p50_ns"],
                              "bpf_ns_per_round_trip": ns})
            log(f"hook cost round {rnd + 1}/{a.hook_rounds} {v} per {what}: "
                f"{sum(p['run_cnt'] for p in progs) / trips:.1f} program runs, "
                f"{ns:.0f} ns of BPF")
    return rounds


def round_trip_costs(v, rs, trips):
    """Tracer v's programs per loopback round trip over its rounds rs."""
    progs = summed_progs(rs)
    n = trips * len(rs)
    for p in progs:
        p["runs_per_round_trip"] = p["run_cnt"] / n
        p["ns_per_round_trip"] = p["run_time_ns"] / n
    per_round = [r["bpf_ns_per_round_trip"] for r in rs]
    h = {"round_trips": trips, "rounds": len(rs), "progs": progs,
         "p50_ns": median([r["p50_ns"] for r in rs]),
         "runs_per_round_trip": sum(p["run_cnt"] for p in progs) / n,
         "bpf_ns_per_round_trip": median(per_round),
         "bpf_ns_rounds": [round(x) for x in per_round]}
    log(f"hook cost {v} per loopback round trip: "
        f"{h['runs_per_round_trip']:.1f} program runs, median "
        f"{h['bpf_ns_per_round_trip']:.0f} ns of BPF over {len(rs)} round(s)")
    return h


def summed_progs(rs):
    """Each program's runs and run time summed over the rounds rs, by name, with its
    time per run."""
    by_name = {}
    for r in rs:
        for p in r["progs"]:
            q = by_name.setdefault(p["name"], {"name": p["name"], "run_cnt": 0, "run_time_ns": 0})
            q["run_cnt"] += p["run_cnt"]
            q["run_time_ns"] += p["run_time_ns"]
    progs = sorted(by_name.values(), key=lambda p: p["name"])
    for p in progs:
        p["ns_per_run"] = p["run_time_ns"] / p["run_cnt"] if p["run_cnt"] else None
    return progs


def ratios_to_floor(rt_out, rounds, floor=FLOOR_REF, key="bpf_ns_per_round_trip"):
    """Each tracer against the floor (the clock floor unless told) of the same round."""
    ref = {r["round"]: r[key] for r in rounds.get(floor, [])}
    for v, h in rt_out.items():
        ratios = [r[key] / ref[r["round"]] for r in rounds[v]
                  if ref.get(r["round"]) and r[key] is not None]
        if ratios:
            h["ratio_to_floor_rounds"] = [round(x, 3) for x in ratios]
            h["ratio_to_floor"] = median(ratios)


def host_primitives(b, pingpong, p_srv, p_cli):
    """What single operations cost in a program on this host, at the receive
    return's hook over one loopback ping-pong (nlbench-floor --flavour primitives):
    what the floor's flavours leave out of a design like netlatd's, a socket's lock
    taken at each datagram's enqueue and at its read."""
    v = "floor-primitives"
    try:
        tr, info = b.start_tracer(v, "lo", 1, [p_srv, p_cli])
    except BenchError as e:
        b.bench_error(v, f"host primitives: {e}")
        return
    try:
        ids = bpf_prog_ids_of(tr.p.pid)
        with BpfStats(b):
            before = bpf_prog_stats(ids)
            pingpong()
            after = bpf_prog_stats(ids)
    finally:
        b.stop_tracer(v, tr, info)
    ns = {}
    for pid_, name in info["prog_names"].items():
        if pid_ in after:
            cnt = after[pid_][1] - before.get(pid_, ("", 0, 0))[1]
            t = after[pid_][2] - before.get(pid_, ("", 0, 0))[2]
            ns[name] = t / cnt if cnt else None
    b.results["host_primitives"] = {"hook": b.recv_return_hook(), "ns_per_run": ns,
                                    "missing": info.get("missing", []),
                                    "round_trips": b.a.count + b.a.warmup}
    log("host primitives at " + b.recv_return_hook() + ": "
        + ", ".join(f"{k} {x:.0f} ns" for k, x in ns.items() if x is not None))


def bpf_stats_during(b, v, iface, ifindex, ports, work):
    """Starts tracer v, runs work() with BPF run-time statistics on; returns (per-program
    deltas, work's result, stop_tracer's figures), or None if the tracer did not start."""
    try:
        tr, info = b.start_tracer(v, iface, ifindex, ports)
    except BenchError as e:
        b.tracer_error(v, f"hook cost: {e}")
        return None
    try:
        ids = bpf_prog_ids_of(tr.p.pid)
        if not ids:
            raise BenchError(f"{v} holds no BPF program fds")
        with BpfStats(b):
            before = bpf_prog_stats(ids)
            result = work()
            after = bpf_prog_stats(ids)
    finally:
        extra = b.stop_tracer(v, tr, info)
    progs = []
    names = info.get("prog_names", {})
    for pid_, (name, cnt, ns) in sorted(after.items(),
                                        key=lambda kv: names.get(kv[0], kv[1][0])):
        name = names.get(pid_, name)
        _, cnt0, ns0 = before.get(pid_, (name, 0, 0))
        d_cnt, d_ns = cnt - cnt0, ns - ns0
        progs.append({"id": pid_, "name": name, "run_cnt": d_cnt, "run_time_ns": d_ns,
                      "ns_per_run": d_ns / d_cnt if d_cnt else None})
    return progs, result, extra
