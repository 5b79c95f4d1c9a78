"""Part 1, round trips: nlbench-pingpong over loopback and over veth, and
sockperf over loopback, with each tracer in interleaved rounds."""
from bench_common import FLOOR_REF, BenchError, NoFigure, log
from bench_proc import Proc, wait_udp_bound
from bench_sockperf import sockperf_figures

SMOKE_SOCKPERF_VARIANTS = ("baseline", FLOOR_REF, "netlatd")


def roundtrip(b):
    a = b.a
    paths = roundtrip_paths(b)
    variants = b.variants()
    runs = []
    # Registered now so that the runs done survive a stop half-way.
    b.results["roundtrip"] = {"count": a.count, "warmup": a.warmup, "rounds": a.rounds,
                              "sockperf_seconds": a.sockperf_seconds if b.sockperf
                              else None, "summary": {}, "runs": runs, "no_figure": []}
    failed = set()
    start_servers(b, paths)
    for rnd in range(a.rounds):
        for name, pth in paths.items():
            for v in variants:
                if (name, v) in failed:
                    continue
                # The smoke run keeps every variant alive on the other paths; on
                # sockperf's it keeps what the ratio needs, to stay short.
                if a.smoke and pth.get("sockperf") and v not in SMOKE_SOCKPERF_VARIANTS:
                    continue
                rec = roundtrip_run(b, rnd, name, pth, v, failed)
                if rec is None:
                    continue
                runs.append(rec)
                log(f"roundtrip round {rnd + 1}/{a.rounds} {name:17s} {v:17s} "
                    f"p50 {rec['p50_ns'] / 1000:7.2f} us  p99 {rec['p99_ns'] / 1000:7.2f} us")
    for pth in paths.values():
        pth["server"].kill()


def roundtrip_paths(b):
    """The paths a round trip takes, by name: the interface and ports traced, where
    the server listens (sockperf's: its command) and what the client needs."""
    a = b.a
    p_srv, p_cli = b.ports[0], b.ports[1]
    paths = {
        "loopback": dict(iface="lo", ifindex=1, ports=[p_srv, p_cli],
                         srv_bind=f"127.0.0.1:{p_srv}",
                         to=f"127.0.0.1:{p_srv}", bind=f"127.0.0.1:{p_cli}",
                         traced_ends=2),
        "veth": dict(iface=b.veth, ifindex=b.veth_ifindex, ports=[p_srv, p_cli],
                     srv_bind=f"{b.ip_ns}:{p_srv}", srv_in_ns=True,
                     to=f"{b.ip_ns}:{p_srv}", bind=f"{b.ip_root}:{p_cli}",
                     traced_ends=1),  # the server's end is in the namespace
    }
    if b.sockperf:
        # A third-party client and server on the same loopback path, so the
        # headline figure does not rest on our own ping-pong tool alone.
        sp_srv, sp_cli = b.ports[3], b.ports[4]
        paths["loopback-sockperf"] = dict(
            iface="lo", ifindex=1, ports=[sp_srv, sp_cli], sockperf=True,
            srv_cmd=b.pinned([b.sockperf, "server", "-i", "127.0.0.1",
                              "-p", str(sp_srv)]),
            cli_cmd=b.pinned([b.sockperf, "ping-pong", "-i", "127.0.0.1",
                              "-p", str(sp_srv), "-m", "64",
                              "-t", str(a.sockperf_seconds), "--full-rtt",
                              "--no-rdtsc", "--client_ip", "127.0.0.1",
                              "--client_port", str(sp_cli)]))
    return paths


def start_servers(b, paths):
    """Each path's server, ready: pth["server"]."""
    for name, pth in paths.items():
        if pth.get("sockperf"):
            # sockperf says nothing when it is ready: it is when its port is bound.
            srv = Proc(b, f"sockperf-server-{name}", pth["srv_cmd"])
            if not wait_udp_bound(pth["ports"][0], srv, 10):
                raise BenchError(f"sockperf server did not start: {srv.text('stdout')}")
        else:
            srv = b.pingpong_server(name, pth["srv_bind"], pth.get("srv_in_ns", False))
        pth["server"] = srv


def roundtrip_run(b, rnd, name, pth, v, failed):
    """One client run on a path with tracer v: its record, or None when the tracer
    did not start (then (name, v) is in failed) or the run gave no figure."""
    a = b.a
    rec = {"round": rnd, "path": name, "variant": v}
    try:
        tr, info = b.start_tracer(v, pth["iface"], pth["ifindex"],
                                  pth["ports"])
    except BenchError as e:
        b.tracer_error(v, f"roundtrip {name}: {e}")
        failed.add((name, v))
        return None
    try:
        rec.update(roundtrip_client(b, name, pth, v))
    except NoFigure as e:
        rec["no_figure"] = str(e)
    finally:
        try:
            rec.update(b.stop_tracer(v, tr, info))
        except BenchError as e:
            b.tracer_error(v, f"roundtrip {name}: {e}")
    if "no_figure" in rec:
        log(f"roundtrip {name} {v}: no figure: {rec['no_figure']}")
        b.results["roundtrip"]["no_figure"].append(rec)
        return None
    # A tracer that attaches but follows no packet costs nothing and
    # measures nothing: that is a failure, not a good figure.
    want = rec.pop("packets_total", None) or \
        (a.count + a.warmup) * pth.get("traced_ends", 2)
    if v.startswith("netlatd") and rec.get("traced_packets", 0) < 0.9 * want:
        b.tracer_error(v, f"roundtrip {name}: traced "
                       f"{rec.get('traced_packets')} of {want} packets")
    return rec


def roundtrip_client(b, name, pth, v):
    """One client run on a path: its figures (p50_ns, p99_ns, mean_ns, lost...)."""
    a = b.a
    if pth.get("sockperf"):
        def once():
            cli = Proc(b, "sockperf-client", pth["cli_cmd"])
            rc = cli.wait(a.sockperf_seconds + 30)
            return rc, "\n".join(l for _, l in cli.lines["stdout"] + cli.lines["stderr"])
        return sockperf_figures(once, v, a.sockperf_seconds)
    return b.pingpong_client(name, pth["to"], pth["bind"], tracer=v)
