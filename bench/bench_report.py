"""The report: medians of the runs done, the figures against the floor, and the
tables (text, or Markdown for docs/BENCHMARKS.md)."""
from bench_common import FLOOR_REF, FLOOR_VARIANTS, median
from bench_memory import memory_tables
from opcounts import OPS_HEAD, ops_rows, ops_title


def summarize(res):
    """Medians of the runs done: called once at the end, also after a stop half-way."""
    rt = res.get("roundtrip")
    if rt:
        runs, summary = rt["runs"], {}
        for name in dict.fromkeys(r["path"] for r in runs):
            base = [r for r in runs if r["path"] == name and r["variant"] == "baseline"]
            b50, b99 = median([r["p50_ns"] for r in base]), median([r["p99_ns"] for r in base])
            # Deltas are paired: each run against the baseline of its own round,
            # so drift in the machine's load over the bench cancels out.
            by_round = {r["round"]: r for r in base}
            for v in dict.fromkeys(r["variant"] for r in runs):
                rs = [r for r in runs if r["path"] == name and r["variant"] == v]
                if not rs:
                    continue
                m50, m99 = median([r["p50_ns"] for r in rs]), median([r["p99_ns"] for r in rs])
                d50 = [r["p50_ns"] - by_round[r["round"]]["p50_ns"] for r in rs
                       if r["round"] in by_round]
                d99 = [r["p99_ns"] - by_round[r["round"]]["p99_ns"] for r in rs
                       if r["round"] in by_round]
                s = {"runs": len(rs), "p50_ns": m50, "p99_ns": m99,
                     "mean_ns": median([r["mean_ns"] for r in rs]),
                     "p50_delta_ns": median(d50), "p50_ratio": m50 / b50 if b50 else None,
                     "p99_delta_ns": median(d99), "p99_ratio": m99 / b99 if b99 else None,
                     "p50_min_ns": min(r["p50_ns"] for r in rs),
                     "p50_max_ns": max(r["p50_ns"] for r in rs),
                     "lost": sum(r["lost"] for r in rs)}
                if v == "perf":
                    s["perf_mb_per_s"] = median([r.get("perf_mb_per_s") for r in rs])
                if any("traced_packets" in r for r in rs):
                    s["traced_packets_per_run"] = median([r.get("traced_packets") for r in rs])
                summary.setdefault(name, {})[v] = s
        rt["summary"] = summary
    pr = res.get("packet_rate")
    if pr:
        runs, summary = pr["runs"], {}
        base = median([r["recv_pps"] for r in runs if r["variant"] == "baseline"])
        for v in dict.fromkeys(r["variant"] for r in runs):
            pps = median([r["recv_pps"] for r in runs if r["variant"] == v])
            summary[v] = {"recv_pps": pps,
                          "loss_pct": (base - pps) / base * 100 if base else None}
        pr["summary"] = summary
    res["floor_ratios"] = floor_ratios(res)


def floor_ratios(res):
    """Each tracer's figures beside the floor's, and as a multiple of the clock-reading
    floor (FLOOR_REF): rows of {"figure", "unit", "values": {variant: value}}. A ratio
    is only taken where the floor's own figure is above zero (a round-trip delta of the
    floor can come out at or below zero on a noisy host)."""
    rows = []

    def add(figure, unit, values):
        values = {v: x for v, x in values.items() if x is not None}
        if any(v in values for v in FLOOR_VARIANTS):
            rows.append({"figure": figure, "unit": unit, "values": values})
    rt = (res.get("roundtrip") or {}).get("summary", {})
    for path, what in (("loopback", "loopback RTT p50 added (nlbench-pingpong)"),
                       ("loopback-sockperf", "loopback RTT p50 added (sockperf)"),
                       ("veth", "veth RTT p50 added (nlbench-pingpong)")):
        add(what, "ns", {v: s["p50_delta_ns"] for v, s in rt.get(path, {}).items()
                         if v != "baseline"})
    add("BPF run time per loopback round trip", "ns",
        {v: h["bpf_ns_per_round_trip"] for v, h in (res.get("hooks_roundtrip") or {}).items()})
    add("BPF run time per received packet, max-rate flood", "ns",
        {v: h["bpf_ns_per_packet"] for v, h in (res.get("hooks") or {}).items()
         if not v.endswith("bpftrace-floor")})
    add("max UDP receive rate lost", "%",
        {v: s["loss_pct"] for v, s in ((res.get("packet_rate") or {}).get("summary")
                                       or {}).items() if v != "baseline"})
    for r in rows:
        ref = r["values"].get(FLOOR_REF)
        r["ratio_to_floor"] = {v: (x / ref if ref and ref > 0 else None)
                               for v, x in r["values"].items()}
        if r["figure"] == "BPF run time per loopback round trip":
            # Measured in interleaved rounds: the median of the per-round ratios.
            for v, h in (res.get("hooks_roundtrip") or {}).items():
                if h.get("ratio_to_floor") is not None:
                    r["ratio_to_floor"][v] = h["ratio_to_floor"]
    return rows


def us(ns):
    return f"{ns / 1000:.2f}" if ns is not None else "n/a"


def num(x, spec, scale=1.0):
    """x / scale formatted, or "n/a" for a figure a stopped run did not get to."""
    return format(x / scale, spec) if x is not None else "n/a"


def render(res, md=False):
    out = []

    def table(head, rows):
        if md:
            out.append("| " + " | ".join(head) + " |")
            out.append("|" + "|".join("---" for _ in head) + "|")
            for r in rows:
                out.append("| " + " | ".join(str(c) for c in r) + " |")
        else:
            w = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
            out.append("  ".join(str(h).ljust(w[i]) for i, h in enumerate(head)))
            for r in rows:
                out.append("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
        out.append("")

    def title(t):
        out.append(f"### {t}" if md else f"== {t}")
        out.append("")

    for section in (roundtrip_tables, hook_tables, untraced_table, program_tables,
                    floor_table, daemon_tables, memory_tables, target_tables):
        section(res, title, table)
    closing_lines(res, out)
    return "\n".join(out)


def roundtrip_tables(res, title, table):
    """The round trips' and the packet rate's tables."""
    rt = res.get("roundtrip")
    if rt:
        title(f"UDP round trip ({rt['count']} per run, {rt['rounds']} interleaved rounds, "
              "medians)")
        rows = []
        for path, vs in rt["summary"].items():
            for v, s in vs.items():
                extra = f"{s['perf_mb_per_s']:.2f} MB/s written" if s.get("perf_mb_per_s") else ""
                if s.get("traced_packets_per_run") is not None:
                    extra = f"{s['traced_packets_per_run']:.0f} packets traced a run"
                rows.append((path, v, us(s["p50_ns"]),
                             f"{us(s['p50_min_ns'])}–{us(s['p50_max_ns'])}",
                             num(s["p50_delta_ns"], "+.2f", 1000), num(s["p50_ratio"], ".3f"),
                             us(s["p99_ns"]), num(s["p99_delta_ns"], "+.2f", 1000), extra))
        table(["path", "tracer", "p50 us", "p50 range of runs", "p50 +us (paired)", "p50 x",
               "p99 us", "p99 +us (paired)", "note"], rows)
    prr = res.get("packet_rate")
    if prr:
        title(f"Max UDP receive rate over veth ({prr['seconds']} s floods, medians)")
        table(["tracer", "received", "loss vs baseline"],
              [(v, f"{s['recv_pps'] / 1e3:.1f} kpps", num(s["loss_pct"], ".1f") + " %")
               for v, s in prr["summary"].items()])


def hook_tables(res, title, table):
    """The BPF programs' tables: during a flood, and per loopback round trip."""
    floor_names = {"softirq_raise": "floor: reads one field",
                   "softirq_entry": "floor: one bpf_ktime_get_ns"}
    for v, h in (res.get("hooks") or {}).items():
        if v == "bpftrace-floor":
            title("bpftrace's floor on this host: classic tracepoint programs doing (almost) "
                  "nothing, same flood, same BPF statistics")
            table(["program", "runs", "ns/run"],
                  [(floor_names.get(p["name"], p["name"]), p["run_cnt"],
                    f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-")
                   for p in h["progs"]])
            continue
        rounds = h.get("rounds", 1)
        title(f"BPF programs of {v} during a max-rate flood "
              + (f"({rounds} interleaved rounds; a median of " if rounds > 1 else "(")
              + f"{h['recv_pps'] / 1e3:.0f} kpps received and "
              + f"{h['bpf_ns_per_packet'] or 0:.0f} ns of BPF per packet"
              + (f"; rounds: {', '.join(str(x) for x in h['bpf_ns_rounds'])} ns" if rounds > 1 else "")
              + (f"; x {FLOOR_REF} per round: " + ", ".join(f"{x:.2f}" for x in h["ratio_to_floor_rounds"])
                 if rounds > 1 and h.get("ratio_to_floor_rounds") and v != FLOOR_REF else "")
              + ")")
        table(["program", "runs", "ns/run", "runs/s", "runs/packet"],
              [(p["name"], p["run_cnt"],
                f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-",
                f"{p['runs_per_s']:.0f}",
                f"{p['runs_per_packet']:.2f}" if p["runs_per_packet"] is not None else "-")
               for p in h["progs"]])
    for v, h in (res.get("hooks_roundtrip") or {}).items():
        rounds = h.get("rounds", 1)
        title(f"BPF programs of {v} per loopback round trip ({h['round_trips']} round trips"
              + (f" x {rounds} interleaved rounds" if rounds > 1 else "")
              + f", {h['runs_per_round_trip']:.1f} runs and "
              + ("a median of " if rounds > 1 else "")
              + f"{h['bpf_ns_per_round_trip']:.0f} ns of BPF per round trip"
              + (f"; rounds: {', '.join(str(x) for x in h['bpf_ns_rounds'])} ns"
                 if rounds > 1 else "")
              + (f"; x {FLOOR_REF} per round: "
                 + ", ".join(f"{x:.2f}" for x in h["ratio_to_floor_rounds"])
                 if rounds > 1 and h.get("ratio_to_floor_rounds") and v != FLOOR_REF else "")
              + ")")
        table(["program", "runs/round trip", "ns/run", "ns/round trip"],
              [(p["name"], f"{p['runs_per_round_trip']:.2f}",
                f"{p['ns_per_run']:.0f}" if p["ns_per_run"] is not None else "-",
                f"{p['ns_per_round_trip']:.0f}")
               for p in h["progs"] if p["run_cnt"]])


def untraced_table(res, title, table):
    """What netlatd costs for the traffic it does not trace (bench_hooks.untraced_rounds)."""
    u = res.get("hooks_untraced") or {}
    if not u:
        return
    some = next(iter(u.values()))
    rounds = some.get("rounds", 1)
    title(f"Traffic netlatd does not trace: the loopback ping-pong with netlatd and "
          f"floor-empty watching two other ports ({some['round_trips']} round trips"
          + (f" x {rounds} interleaved rounds, medians" if rounds > 1 else "")
          + "; x floor-empty: the hooks' own cost)")

    def filter_prog(h):
        return next((p for p in h["progs"] if p["name"].startswith("rcv_skb")
                     or p["name"].endswith("netif_receive_skb")), None)

    rows = []
    for v, h in u.items():
        f = filter_prog(h)
        ratio = h.get("ratio_to_floor") if v != "floor-empty" else None
        rows.append((v, f"{h['runs_per_round_trip']:.1f}", f"{h['bpf_ns_per_round_trip']:.0f}",
                     f"{ratio:.2f}" if ratio else "-",
                     f"{f['ns_per_run']:.0f}" if f and f["ns_per_run"] is not None else "-"))
    table(["tracer", "runs/round trip", "BPF ns/round trip", "x floor-empty",
           "ns/run at netif_receive_skb"], rows)


def program_tables(res, title, table):
    """Where the programs spend their time, and what one operation costs here."""
    ln = res.get("lines")
    if ln and ln.get("top"):
        title(f"Where netlatd's programs spend their time, by line of bpf/ (perf at {ln['hz']} Hz "
              f"on CPU {ln['cpu']} over a loopback ping-pong of {ln['round_trips']} round trips: "
              f"{ln['in_programs']} of {ln['samples']} samples inside the programs; "
              + ", ".join(f"{p} {n}" for p, n in list(ln["programs"].items())[:6]) + ")")
        table(["line", "samples", "of those in the programs", "source"],
              [(t["line"], t["samples"], f"{100 * t['samples'] / ln['in_programs']:.1f} %",
                (t["source"][:70] or "-").replace("|", "\\|"))
               for t in ln["top"]])
    hp = res.get("host_primitives")
    if hp and hp.get("ns_per_run"):
        ns = hp["ns_per_run"]
        labels = {"prim_empty": "nothing (the hook's own cost)",
                  "prim_clock": "one clock read (bpf_ktime_get_ns)",
                  "prim_atomic": "one atomic add to this CPU's cell",
                  "prim_irq": "the add with IRQs saved and restored (bpf_local_irq_save)",
                  "prim_lock": "the add under a bpf_spin_lock (saves and restores IRQs too)"}
        base = ns.get("prim_empty")
        title(f"What one operation costs in a program on this host ({len(ns)} programs side by "
              f"side at {hp['hook']}, one loopback ping-pong of {hp['round_trips']} round trips"
              + (f"; {', '.join(hp['missing'])}: not in this kernel" if hp.get("missing") else "")
              + ")")
        table(["program", "what it does", "ns/run", "ns over prim_empty"],
              [(k, labels.get(k, k), f"{x:.0f}",
                f"{x - base:+.0f}" if base is not None else "-")
               for k, x in ns.items() if x is not None])


def floor_table(res, title, table):
    """Each tracer's figures against the floor's."""
    fr = res.get("floor_ratios")
    if fr:
        tracers = [v for v in dict.fromkeys(v for r in fr for v in r["values"])
                   if v not in FLOOR_VARIANTS]
        title(f"Against the floor: netlatd's hooks ({len(res['host'].get('plan') or [])}) "
              f"with programs that return at once (floor-empty) or read the clock once "
              f"(floor-clock); x = multiple of {FLOOR_REF}")

        def cell(r, v):
            x = r["values"].get(v)
            if x is None:
                return "n/a"
            text = f"{x / 1000:+.2f} us" if r["figure"].startswith(("loopback RTT", "veth RTT")) \
                else f"{x:.1f} %" if r["unit"] == "%" else f"{x:.0f} ns"
            ratio = r["ratio_to_floor"].get(v)
            return text if v in FLOOR_VARIANTS else \
                text + (f" (x{ratio:.2f})" if ratio is not None else " (x n/a)")
        table(["figure"] + list(FLOOR_VARIANTS) + tracers,
              [[r["figure"]] + [cell(r, v) for v in list(FLOOR_VARIANTS) + tracers] for r in fr])


def daemon_tables(res, title, table):
    """The daemon alone: at fixed rates, and its start-up and shut-down."""
    if res.get("daemon"):
        title("netlatd daemon at fixed rates")
        table(["target pps", "ring buffer", "received pps", "CPU %", "VmHWM MiB",
               "RSS at end MiB", "of it BPF maps MiB", "traced/received", "of it naming the read",
               "ambiguous reads", "drops (non-zero)"],
              [(f"{r['rate_target'] or 'max'}" + (" --aggregate" if r.get("aggregate") else "")
                + (f", reader pausing {r['reader_pause_us']} us a read, {r['sent']} sent"
                   if r.get("reader_pause_us") else ""),
                f"{r['ringbuf_mb']} MiB" if r.get("ringbuf_mb") else "default",
                f"{r['recv_pps']:.0f}",
                f"{r['cpu_pct']:.2f}" + (f" (±{r['cpu_resolution_pct']:.2f})"
                                         if r["cpu_resolution_pct"] >= 0.005 else ""),
                f"{r['vmhwm_kib'] / 1024:.1f}" if r["vmhwm_kib"] else "n/a",
                f"{sum(r['rss_kib'].values()) / 1024:.1f}" if r.get("rss_kib") else "n/a",
                f"{r.get('bpf_map_rss_kib', 0) / 1024:.1f}",
                f"{(r['traced_packets'] or 0) / r['received']:.3f}" if r["received"] else "n/a",
                f"{r['reader_named'] / r['received']:.3f}"
                if r.get("reader_named") is not None and r["received"] else "n/a",
                f"{r['ambiguous_reads']}" if r.get("ambiguous_reads") is not None else "n/a",
                ", ".join(f"{k} {n}" for k, n in r["drops"].items() if n) or "none")
               for r in res["daemon"]])
    ss = res.get("startstop")
    if ss:
        title(f"Start-up and shut-down ({len(ss['reps'])} runs, medians)")
        mw = ss.get("most_walked")
        table(["exec to ready", "of it: BPF object to attached", "of that: load (BTF, verifier)",
               "most walked by the verifier", "SIGTERM to exit"],
              [(f"{ss['attach_ms']:.0f} ms",
                f"{ss['programs_ms']:.0f} ms" if "programs_ms" in ss else "n/a",
                f"{ss['load_ms']:.0f} ms" if "load_ms" in ss else "n/a",
                f"{mw['program']}, {mw['instructions']:,} instructions" if mw else "n/a",
                f"{ss['detach_ms']:.0f} ms")])


def target_tables(res, title, table):
    """Operations per packet, and the targets."""
    ops = ops_rows(res, FLOOR_REF)
    if ops:
        title(ops_title(res))
        table(["work", "tracer"] + list(OPS_HEAD) + ["BPF ns"], ops)
    title(f"Targets (issue 32: against {FLOOR_REF} in the same run, and the daemon's share traced)")
    table(["target", "measured", "limit", "status"],
          [(w, v, l, {True: "met", False: "MISSED", None: "not measured", "figure": "-",
                      "inconclusive": "inconclusive (the floor's figure is at or below 0: noise)"}[ok])
           for w, v, l, ok in res.get("targets", [])])


def closing_lines(res, out):
    """Errors, notes, missing figures and a host that was not quiet, a line each."""
    seen = {}
    for e in res.get("errors", []):
        key = f"{e['variant']}: {e['message']}"
        seen[key] = seen.get(key, 0) + 1
    for key, n in seen.items():
        out.append(f"error: {key}" + (f" (x{n})" if n > 1 else ""))
    for n in res.get("notes", []):
        out.append(f"note: {n}")
    for r in res.get("no_figure", []):
        out.append(f"no figure: {r['part']}: {r['no_figure']}")
    for r in (res.get("roundtrip") or {}).get("no_figure", []):
        out.append(f"no figure: roundtrip {r['path']} {r['variant']} (round {r['round'] + 1}): "
                   f"{r['no_figure']}")
    for when in ("start", "end"):
        busy = (res.get("host") or {}).get(f"busy_{when}") or []
        if busy:
            out.append(f"warning: host not quiet at the {when}: " +
                       ", ".join(f"{b['comm']} (pid {b['pid']}, {b['cpu_pct']} % of a CPU)" for b in busy) +
                       "; absolute figures are suspect, A/B within this run less so")
