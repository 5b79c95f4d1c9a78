"""Part 2, the packet rate: the highest UDP receive rate over veth with each
tracer (the flood itself is the Bench's: see bench_setup)."""
from bench_common import SAMPLE_VARIANT, BenchError, log


def packet_rate(b):
    """Max receive rate with each tracer (not the outlier variant: at 1 us every
    packet of a flood is an outlier, which measures the rate limiter)."""
    a = b.a
    variants = [v for v in b.variants() if v != "netlatd-outliers"]
    # --sample 16 (one in 16 packets traced): here only, where a rate is
    # what sampling is for.
    if a.netlatd:
        variants.append(SAMPLE_VARIANT)
    runs, failed = [], set()
    # Registered now so that the runs done survive a stop half-way.
    b.results["packet_rate"] = {"seconds": a.flood_seconds, "summary": {}, "runs": runs}
    for rnd in range(a.rounds):
        for v in variants:
            if v in failed:
                continue
            try:
                tr, info = b.start_tracer(v, b.veth, b.veth_ifindex,
                                             [b.ports[2]])
            except BenchError as e:
                b.tracer_error(v, f"packet rate: {e}")
                failed.add(v)
                continue
            try:
                f = b.flood(0, a.flood_seconds)
            finally:
                try:
                    extra = b.stop_tracer(v, tr, info)
                except BenchError as e:
                    b.tracer_error(v, f"packet rate: {e}")
                    extra = {}
            f.pop("ctx")
            f.update({"round": rnd, "variant": v}, **extra)
            runs.append(f)
            log(f"packet rate round {rnd + 1}/{a.rounds} {v:9s} "
                f"{f['recv_pps'] / 1e3:8.1f} kpps received ({f['send_pps'] / 1e3:.1f} sent)")
