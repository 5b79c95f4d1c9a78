#!/usr/bin/python3
"""What netlatd costs, next to what users would run instead (bpftrace, perf record).

Started by bench/run.sh, which builds the tools; see docs/BENCHMARKS.md for the method.
Python standard library only. Needs root (namespaces, BPF, sysctl).

Every resource it creates (network namespace, veth pair, child processes, notify
sockets, temporary files; BPF statistics are on only while it holds an fd) is
undone in a finally block and on SIGINT/SIGTERM.
"""
import argparse
import bisect
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from bench_bpf import BpfStats, bpf_prog_ids_of, bpf_prog_stats, netlatd_plan
from bench_common import FLOOR_REF, FLOOR_VARIANTS, SAMPLE_VARIANT, BenchError, NoFigure, Stopped, log, median
from bench_host import host_busy, proc_cpu_ns, proc_status_kib, rss_by_mapping_kib
from bench_proc import Proc, not_ready, run, wait_udp_bound
from bench_signals import stop_reason, watch_signals
from bench_sockperf import sockperf_figures
from opcounts import OPS_HEAD, count_runs, ops_rows, ops_title, ops_window
from opcounts import VARIANT as OPS_VARIANT
from targets import evaluate

# The events `perf script record netdev-times` records.
PERF_EVENTS = [
    "irq:irq_handler_entry", "irq:irq_handler_exit",
    "irq:softirq_entry", "irq:softirq_exit", "irq:softirq_raise",
    "napi:napi_poll", "net:netif_receive_skb", "net:netif_rx",
    "net:net_dev_queue", "net:net_dev_xmit",
    "skb:skb_copy_datagram_iovec", "skb:consume_skb", "skb:kfree_skb",
]



# Parts that measure only the daemon; the others compare every tracer available.
NETLATD_ONLY_PARTS = ("daemon", "startstop", "lines")
# The "lines" part: perf's sampling rate on the ping-pong's CPU, and how many
# of the hottest source lines it shows.
LINES_HZ = 20000
LINES_SHOWN = 25

SMOKE_SOCKPERF_VARIANTS = ("baseline", FLOOR_REF, "netlatd")


START_LINE_RE = re.compile(r"programs attached in ([0-9.]+) ms \(verifier ([0-9.]+) ms; most walked: "
                           r"(\w+), (\d+) instructions")


def start_line_figures(proc):
    """From netlatd's start line ("N programs attached in X ms (verifier Y ms;
    most walked: P, N instructions ..."): the time from opening the BPF object
    to every program attached, the object's load (libbpf's BTF parse and the
    verifier) within it, and the program the verifier walked most."""
    for _, line in proc.lines["stderr"]:
        m = START_LINE_RE.search(line)
        if m:
            return {"programs_ms": float(m.group(1)), "load_ms": float(m.group(2)),
                    "most_walked": {"program": m.group(3), "instructions": int(m.group(4))}}
    return {}


class Bench:
    def __init__(self, a):
        self.a = a
        self.procs = []
        self.cleanups = []
        self.results = {"schema": 1, "smoke": a.smoke, "errors": [], "notes": []}
        self.tracer_failures = []
        self.bench_failures = []
        self.sockperf = None
        self.tmp = tempfile.mkdtemp(prefix="nlbench-")
        self.cleanups.append(lambda: shutil.rmtree(self.tmp, ignore_errors=True)
                             if not a.keep_logs else log(f"logs kept in {self.tmp}"))
        pid = os.getpid()
        self.ns = a.netns or f"nlbench-{pid}"
        self.veth = f"nlb{pid}a"[:15]
        self.veth_peer = f"nlb{pid}b"[:15]
        sub = pid % 250 + 1
        self.ip_root = f"10.201.{sub}.1"
        self.ip_ns = f"10.201.{sub}.2"
        # Ping-pong server and client, flood, sockperf server and client.
        self.ports = self.free_udp_ports(5)
        self.plan = None  # netlatd's hooks here (netlatd_plan), for the floor

    # ---- set-up and tear-down -------------------------------------------------------

    @staticmethod
    def free_udp_ports(n):
        socks, ports = [], []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
        for s in socks:
            s.close()
        return ports

    def setup_netns(self):
        run(["ip", "netns", "add", self.ns])
        self.cleanups.append(lambda: run(["ip", "netns", "del", self.ns], check=False))
        run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", self.veth_peer])
        self.cleanups.append(lambda: run(["ip", "link", "del", self.veth], check=False))
        run(["ip", "link", "set", self.veth_peer, "netns", self.ns])
        run(["ip", "addr", "add", f"{self.ip_root}/30", "dev", self.veth])
        run(["ip", "link", "set", self.veth, "up"])
        nsx = ["ip", "netns", "exec", self.ns]
        run(nsx + ["ip", "addr", "add", f"{self.ip_ns}/30", "dev", self.veth_peer])
        run(nsx + ["ip", "link", "set", self.veth_peer, "up"])
        run(nsx + ["ip", "link", "set", "lo", "up"])
        with open(f"/sys/class/net/{self.veth}/ifindex") as f:
            self.veth_ifindex = int(f.read())
        # The pair needs a moment to leave NO-CARRIER; wait for it, bounded.
        for _ in range(50):
            with open(f"/sys/class/net/{self.veth}/operstate") as f:
                if f.read().strip() == "up":
                    break
            time.sleep(0.05)

    def cleanup(self):
        for p in self.procs:
            try:
                p.kill()
            except Exception as e:  # keep cleaning up
                log(f"cleanup: {p.name}: {e}")
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:
                log(f"cleanup: {e}")
        self.cleanups.clear()

    def tool(self, name):
        return os.path.join(self.a.tools, f"nlbench-{name}")

    def pinned(self, cmd):
        """The ping-pong pair shares one CPU: left to the scheduler, client and server
        land on one CPU or on two from run to run, and the two cases differ by ~8 us
        a round trip here (IPIs in a VM), more than any tracer adds."""
        if self.a.pin_cpu < 0:
            return cmd
        return ["taskset", "-c", str(self.a.pin_cpu)] + cmd

    def ns_cmd(self, cmd):
        return ["ip", "netns", "exec", self.ns] + cmd

    def find_floor_and_sockperf(self):
        """The floor needs netlatd's plan on this kernel and nlbench-floor; sockperf
        needs its binary. Each one missing is said, and the bench goes on without it,
        except a floor that was built and cannot be set up: that is a broken bench."""
        a, host = self.a, self.results["host"]
        self.sockperf = None if a.no_sockperf else shutil.which("sockperf")
        if not self.sockperf and not a.no_sockperf:
            self.results["notes"].append("sockperf not installed (scripts/install-deps.sh "
                                         "--bench): its round-trip rows are skipped")
        if a.no_floor:
            return
        if not a.netlatd:
            self.results["notes"].append("floor: needs netlatd's plan (netlatd --check); skipped")
            return
        if not os.access(self.tool("floor"), os.X_OK):
            self.bench_error("floor", f"{self.tool('floor')} was not built (see run.sh)")
            return
        try:
            self.plan = netlatd_plan(a.netlatd)
        except BenchError as e:
            self.bench_error("floor", str(e))
            return
        host["plan"] = self.plan
        log(f"floor: netlatd's plan here has {len(self.plan)} hooks: {' '.join(self.plan)}")

    # ---- tracers -------------------------------------------------------------------

    def variants(self):
        v = ["baseline"]
        if self.plan:
            v += list(FLOOR_VARIANTS)
        if self.a.netlatd:
            v += ["netlatd", "netlatd-outliers"]
            if not self.a.no_aggregate:
                v.append("netlatd-aggregate")
        if self.a.netlatd_b:
            v.append("netlatd-b")
        if shutil.which("bpftrace") and not self.a.no_bpftrace:
            v.append("bpftrace")
        if shutil.which("perf") and not self.a.no_perf:
            v.append("perf")
        return v

    def pingpong_server(self, part, port):
        """A ping-pong server on 127.0.0.1:port, pinned like its clients, ready."""
        srv = Proc(self, f"pingpong-server-{part}",
                   self.pinned([self.tool("pingpong"), "server", "--bind", f"127.0.0.1:{port}",
                                "--seconds", "3600"]),
                   ready=("stdout", lambda l: '"ready"' in l))
        if not srv.wait_ready(10):
            raise BenchError(f"pingpong server ({part}) did not start: {srv.text()}")
        return srv

    def recv_return_hook(self):
        """The receive return's hook in netlatd's plan (tp_btf/sock_recv_length or
        fexit/sock_recvmsg), where the host's primitives are measured; None without one."""
        return next((h for h in self.plan or []
                     if h in ("tp_btf/sock_recv_length", "fexit/sock_recvmsg")), None)

    def start_netlatd(self, iface, ports, extra=(), name="netlatd", binary=None, interval="1"):
        cmd = [binary or self.a.netlatd, "--iface", iface, "--interval", interval, "--format", "json",
               "--output", "-"]
        for p in ports:
            cmd += ["--port", str(p)]
        cmd += list(extra)
        pr = Proc(self, name, cmd, notify_dir=self.tmp)
        return pr

    def start_tracer(self, variant, iface, ifindex, ports):
        """Returns (proc or None, info dict); raises BenchError if the tracer fails to start."""
        info = {}
        if variant == "baseline":
            return None, info
        if variant in ("netlatd", "netlatd-outliers", "netlatd-aggregate", "netlatd-b", SAMPLE_VARIANT,
                       OPS_VARIANT):
            extra = {"netlatd-outliers": ["--outliers-over", "1us"],
                     "netlatd-aggregate": ["--aggregate"],
                     SAMPLE_VARIANT: ["--sample", "16"],
                     OPS_VARIANT: ["--count-ops"]}.get(variant, [])
            # The op counts' window is cut at interval lines: short ones.
            pr = self.start_netlatd(iface, ports, extra, name=variant,
                                    binary=self.a.netlatd_b if variant == "netlatd-b" else None,
                                    interval="0.1" if variant == OPS_VARIANT else "1")
            timeout = 15
        elif variant == "bpftrace":
            p2 = ports[1] if len(ports) > 1 else ports[0]
            cmd = ["bpftrace", self.a.bt, str(ifindex), str(ports[0]), str(p2)]
            pr = Proc(self, variant, cmd, ready=("stdout", lambda l: "tracing ready" in l))
            timeout = 60
        elif variant in FLOOR_VARIANTS or variant == "floor-primitives":
            cmd = [self.tool("floor"), "--flavour", variant.split("-", 1)[1], "--seconds", "3600"]
            for h in self.plan if variant in FLOOR_VARIANTS else [self.recv_return_hook()]:
                cmd += ["--hook", h]
            pr = Proc(self, variant, cmd, ready=("stdout", lambda l: '"ready"' in l))
            if not pr.wait_ready(30):
                raise BenchError(not_ready(pr, 30))
            info["t_ready"] = pr.ready_at
            ready = pr.json_lines()[-1]
            # The kernel names every copy after its function; the row is the hook's
            # (with primitives, the operation's).
            info["prog_names"] = {p["id"]: p["hook"] for p in ready["programs"]}
            info["missing"] = ready.get("missing", [])
            return pr, info
        elif variant == "bpftrace-floor":
            cmd = ["bpftrace", os.path.join(os.path.dirname(self.a.bt), "hook-floor.bt")]
            pr = Proc(self, variant, cmd, ready=("stdout", lambda l: "tracing ready" in l))
            timeout = 60
        elif variant == "perf":
            path = os.path.join(self.tmp, "perf.data")
            if os.path.exists(path):
                os.unlink(path)
            ctl, ack = os.path.join(self.tmp, "perf.ctl"), os.path.join(self.tmp, "perf.ack")
            for f in (ctl, ack):
                if not os.path.exists(f):
                    os.mkfifo(f)
            cmd = ["perf", "record", "-a", "-q", "-o", path, "-D", "-1", "--max-size", "2G",
                   "--control", f"fifo:{ctl},{ack}"]
            for e in PERF_EVENTS:
                cmd += ["-e", e]
            pr = Proc(self, variant, cmd)
            # perf starts with events disabled (-D -1) and says "ack" once it has
            # enabled them on our request: that is its "ready".
            if not self._perf_enable(pr, ctl, ack):
                pr.kill()
                raise BenchError(f"perf did not start: {pr.text()}")
            info["perf_data"] = path
            info["t_ready"] = time.monotonic()
            return pr, info
        else:
            raise ValueError(variant)
        if not pr.wait_ready(timeout):
            raise BenchError(not_ready(pr, timeout))
        info["t_ready"] = pr.ready_at
        return pr, info

    def _perf_enable(self, pr, ctl, ack):
        result = {}

        def talk():
            try:
                with open(ctl, "w") as c:
                    c.write("enable\n")
                    c.flush()
                    with open(ack) as k:
                        result["ack"] = k.readline()
            except OSError as e:
                result["err"] = str(e)

        t = threading.Thread(target=talk, daemon=True)
        t.start()
        t.join(20)
        if t.is_alive():
            # perf died before opening the fifos: unblock our opens.
            for f in (ctl, ack):
                try:
                    fd = os.open(f, os.O_RDWR | os.O_NONBLOCK)
                    os.close(fd)
                except OSError:
                    pass
            t.join(2)
        return result.get("ack", "").startswith("ack") and pr.p.poll() is None

    def stop_tracer(self, variant, pr, info):
        if pr is None:
            return {}
        out = {}
        if variant != "netlatd" and not variant.startswith("netlatd-"):
            # A comparison tracer that hangs on its way out (bpftrace 0.17 was
            # seen not to exit within 30 s of SIGINT once in a CI smoke run) is
            # killed and reported; it does not end the bench, whose subject is
            # netlatd. Its figures from this run are left out.
            try:
                return self.stop_comparison(variant, pr, info)
            except BenchError as e:
                self.tracer_error(variant, f"{e}; killed, its figures left out")
                path = info.get("perf_data")
                if path and os.path.exists(path):
                    os.unlink(path)
                return {"stop_failed": True}
        pr.stop(signal.SIGTERM, timeout=10)
        lines = pr.json_lines()
        out["traced_packets"] = sum(int(j.get("packets", 0)) for j in lines
                                    if j.get("type") == "interval")
        out["drops"] = netlatd_drops(lines)
        out["ops_window"] = ops_window(lines)
        out["exit"] = pr.p.returncode
        out["final_line"] = any(j.get("final") for j in lines)
        # Keep the figures, but a daemon that does not exit 0 on SIGTERM (or
        # loses its final interval) is a bug worth failing the run for.
        if pr.p.returncode != 0 or not out["final_line"]:
            self.tracer_error(variant, f"exit {pr.p.returncode} on SIGTERM, final "
                              f"interval line {'written' if out['final_line'] else 'missing'}"
                              f": {pr.text(last=2)}")
        return out

    def stop_comparison(self, variant, pr, info):
        out = {}
        if variant in FLOOR_VARIANTS:
            pr.stop(signal.SIGTERM, timeout=10)
            if pr.p.returncode != 0:
                raise BenchError(f"{variant} exited with {pr.p.returncode}: {pr.text(last=3)}")
        elif variant == "perf":
            dt = time.monotonic() - info["t_ready"]
            pr.stop(signal.SIGINT, timeout=30)
            size = os.path.getsize(info["perf_data"]) if os.path.exists(info["perf_data"]) else 0
            out["perf_bytes"] = size
            out["perf_mb_per_s"] = size / 1e6 / dt if dt > 0 else None
            os.unlink(info["perf_data"]) if os.path.exists(info["perf_data"]) else None
        else:
            pr.stop(signal.SIGINT, timeout=30)
            for _, l in pr.lines["stdout"]:
                if l.startswith("@matched:"):
                    out["traced_packets"] = int(l.split()[1])
        return out

    # ---- 1. round trips --------------------------------------------------------------

    def roundtrip(self):
        a = self.a
        p_srv, p_cli = self.ports[0], self.ports[1]
        paths = {
            "loopback": dict(iface="lo", ifindex=1, ports=[p_srv, p_cli], srv_cmd=self.pinned(
                             [self.tool("pingpong"), "server",
                              "--bind", f"127.0.0.1:{p_srv}", "--seconds", "3600"]),
                             to=f"127.0.0.1:{p_srv}", bind=f"127.0.0.1:{p_cli}",
                             traced_ends=2),
            "veth": dict(iface=self.veth, ifindex=self.veth_ifindex, ports=[p_srv, p_cli],
                         srv_cmd=self.ns_cmd(self.pinned(
                             [self.tool("pingpong"), "server", "--bind",
                              f"{self.ip_ns}:{p_srv}", "--seconds", "3600"])),
                         to=f"{self.ip_ns}:{p_srv}", bind=f"{self.ip_root}:{p_cli}",
                         traced_ends=1),  # the server's end is in the namespace
        }
        if self.sockperf:
            # A third-party client and server on the same loopback path, so the
            # headline figure does not rest on our own ping-pong tool alone.
            sp_srv, sp_cli = self.ports[3], self.ports[4]
            paths["loopback-sockperf"] = dict(
                iface="lo", ifindex=1, ports=[sp_srv, sp_cli], sockperf=True,
                srv_cmd=self.pinned([self.sockperf, "server", "-i", "127.0.0.1",
                                     "-p", str(sp_srv)]),
                cli_cmd=self.pinned([self.sockperf, "ping-pong", "-i", "127.0.0.1",
                                     "-p", str(sp_srv), "-m", "64",
                                     "-t", str(a.sockperf_seconds), "--full-rtt",
                                     "--no-rdtsc", "--client_ip", "127.0.0.1",
                                     "--client_port", str(sp_cli)]))
        variants = self.variants()
        runs = []
        # Registered now so that the runs done survive a stop half-way.
        self.results["roundtrip"] = {"count": a.count, "warmup": a.warmup, "rounds": a.rounds,
                                     "sockperf_seconds": a.sockperf_seconds if self.sockperf
                                     else None, "summary": {}, "runs": runs, "no_figure": []}
        failed = set()
        for name, pth in paths.items():
            if pth.get("sockperf"):
                # sockperf says nothing when it is ready: it is when its port is bound.
                srv = Proc(self, f"sockperf-server-{name}", pth["srv_cmd"])
                if not wait_udp_bound(pth["ports"][0], srv, 10):
                    raise BenchError(f"sockperf server did not start: {srv.text('stdout')}")
            else:
                srv = Proc(self, f"pingpong-server-{name}", pth["srv_cmd"],
                           ready=("stdout", lambda l: '"ready"' in l))
                if not srv.wait_ready(10):
                    raise BenchError(f"pingpong server ({name}) did not start: {srv.text()}")
            pth["server"] = srv
        for rnd in range(a.rounds):
            for name, pth in paths.items():
                for v in variants:
                    if (name, v) in failed:
                        continue
                    # The smoke run keeps every variant alive on the other paths; on
                    # sockperf's it keeps what the ratio needs, to stay short.
                    if a.smoke and pth.get("sockperf") and v not in SMOKE_SOCKPERF_VARIANTS:
                        continue
                    rec = {"round": rnd, "path": name, "variant": v}
                    try:
                        tr, info = self.start_tracer(v, pth["iface"], pth["ifindex"],
                                                     pth["ports"])
                    except BenchError as e:
                        self.tracer_error(v, f"roundtrip {name}: {e}")
                        failed.add((name, v))
                        continue
                    try:
                        rec.update(self.roundtrip_client(name, pth, v))
                    except NoFigure as e:
                        rec["no_figure"] = str(e)
                    finally:
                        try:
                            rec.update(self.stop_tracer(v, tr, info))
                        except BenchError as e:
                            self.tracer_error(v, f"roundtrip {name}: {e}")
                    if "no_figure" in rec:
                        log(f"roundtrip {name} {v}: no figure: {rec['no_figure']}")
                        self.results["roundtrip"]["no_figure"].append(rec)
                        continue
                    # A tracer that attaches but follows no packet costs nothing and
                    # measures nothing: that is a failure, not a good figure.
                    want = rec.pop("packets_total", None) or \
                        (a.count + a.warmup) * pth.get("traced_ends", 2)
                    if v.startswith("netlatd") and rec.get("traced_packets", 0) < 0.9 * want:
                        self.tracer_error(v, f"roundtrip {name}: traced "
                                          f"{rec.get('traced_packets')} of {want} packets")
                    runs.append(rec)
                    log(f"roundtrip round {rnd + 1}/{a.rounds} {name:17s} {v:17s} "
                        f"p50 {rec['p50_ns'] / 1000:7.2f} us  p99 {rec['p99_ns'] / 1000:7.2f} us")
        for pth in paths.values():
            pth["server"].kill()

    def roundtrip_client(self, name, pth, v):
        """One client run on a path: its figures (p50_ns, p99_ns, mean_ns, lost...)."""
        a = self.a
        if pth.get("sockperf"):
            def once():
                cli = Proc(self, "sockperf-client", pth["cli_cmd"])
                rc = cli.wait(a.sockperf_seconds + 30)
                return rc, "\n".join(l for _, l in cli.lines["stdout"] + cli.lines["stderr"])
            return sockperf_figures(once, v, a.sockperf_seconds)
        cli = Proc(self, "pingpong-client",
                   self.pinned([self.tool("pingpong"), "client", "--to", pth["to"],
                                "--bind", pth["bind"], "--count", str(a.count),
                                "--warmup", str(a.warmup)]))
        rc = cli.wait(max(60, a.count * 0.01))
        res = cli.json_lines()
        if rc != 0 or not res:
            raise BenchError(f"pingpong client ({name}, {v}) failed: {cli.text()}")
        return res[-1]

    # ---- floods -------------------------------------------------------------------------

    def flood(self, rate, seconds, on_start=None, pause_us=0):
        """One bounded flood from the namespace into the root namespace; returns the result.
        pause_us: the receiver sleeps that long after each read of up to 64 datagrams
        (a slow reader, with datagrams queued unread), and gets time to drain."""
        port = self.ports[2]
        rcv = Proc(self, "flood-recv", [self.tool("flood"), "recv", "--bind",
                                        f"{self.ip_root}:{port}", "--seconds",
                                        str(seconds + (60 if pause_us else 10)), "--idle-ms", "300",
                                        "--pause-us", str(pause_us)],
                   ready=("stdout", lambda l: '"ready"' in l))
        if not rcv.wait_ready(10):
            raise BenchError(f"flood receiver did not start: {rcv.text()}")
        ctx = on_start() if on_start else None
        t0 = time.monotonic()
        snd = Proc(self, "flood-send", self.ns_cmd(
            [self.tool("flood"), "send", "--to", f"{self.ip_root}:{port}", "--seconds",
             str(seconds), "--rate", str(rate), "--max-packets", str(int(self.a.max_packets))]))
        if snd.wait(seconds + 20) != 0:
            raise BenchError(f"flood sender failed: {snd.text()}")
        if rcv.wait(seconds + (70 if pause_us else 20)) != 0:
            raise BenchError(f"flood receiver failed: {rcv.text()}")
        wall = time.monotonic() - t0
        s, r = snd.json_lines()[-1], rcv.json_lines()[-1]
        return {"rate_target": rate, "sent": s["sent"], "send_pps": s["pps"],
                "received": r["received"], "recv_pps": r["pps"], "wall_s": wall,
                "ctx": ctx}

    def packet_rate(self):
        """Max receive rate with each tracer (not the outlier variant: at 1 us every
        packet of a flood is an outlier, which measures the rate limiter)."""
        a = self.a
        variants = [v for v in self.variants() if v != "netlatd-outliers"]
        # --sample 16 (one in 16 packets traced): here only, where a rate is
        # what sampling is for.
        if a.netlatd:
            variants.append(SAMPLE_VARIANT)
        runs, failed = [], set()
        # Registered now so that the runs done survive a stop half-way.
        self.results["packet_rate"] = {"seconds": a.flood_seconds, "summary": {}, "runs": runs}
        for rnd in range(a.rounds):
            for v in variants:
                if v in failed:
                    continue
                try:
                    tr, info = self.start_tracer(v, self.veth, self.veth_ifindex,
                                                 [self.ports[2]])
                except BenchError as e:
                    self.tracer_error(v, f"packet rate: {e}")
                    failed.add(v)
                    continue
                try:
                    f = self.flood(0, a.flood_seconds)
                finally:
                    try:
                        extra = self.stop_tracer(v, tr, info)
                    except BenchError as e:
                        self.tracer_error(v, f"packet rate: {e}")
                        extra = {}
                f.pop("ctx")
                f.update({"round": rnd, "variant": v}, **extra)
                runs.append(f)
                log(f"packet rate round {rnd + 1}/{a.rounds} {v:9s} "
                    f"{f['recv_pps'] / 1e3:8.1f} kpps received ({f['send_pps'] / 1e3:.1f} sent)")

    # ---- 3. per-hook cost -----------------------------------------------------------------

    def hook_costs(self):
        """Run time per BPF program during a max-rate flood (netlatd, bpftrace and the
        floor script), then per loopback round trip (netlatd, bpftrace): what each
        hook costs, and how many runs one round trip pays for."""
        a = self.a
        out = self.results["hooks"] = {}
        rt_out = self.results["hooks_roundtrip"] = {}
        tracers = [v for v in self.variants() if v in FLOOR_VARIANTS]
        if a.netlatd:
            tracers.append("netlatd")
        if "netlatd-aggregate" in self.variants():
            tracers.append("netlatd-aggregate")
        if a.netlatd_b:
            tracers.append("netlatd-b")
        if "bpftrace" in self.variants():
            tracers += ["bpftrace", "bpftrace-floor"]
        for v in tracers:
            r = self._bpf_stats_during(v, self.veth, self.veth_ifindex, [self.ports[2]],
                                       lambda: self.flood(0, a.flood_seconds))
            if r is None:
                continue
            progs, f, extra = r
            for p in progs:
                p["runs_per_s"] = p["run_cnt"] / f["wall_s"]
                p["runs_per_packet"] = p["run_cnt"] / f["received"] if f["received"] else None
            total_ns = sum(p["run_time_ns"] for p in progs)
            # A hook is "hot" if it runs at least once per ten received packets.
            hot = [p for p in progs if p["runs_per_packet"] and p["runs_per_packet"] >= 0.1
                   and p["ns_per_run"] is not None]
            out[v] = {"received": f["received"], "recv_pps": f["recv_pps"], "progs": progs,
                      "bpf_ns_per_packet": total_ns / f["received"] if f["received"] else None,
                      "max_hot_ns_per_run": max((p["ns_per_run"] for p in hot), default=None),
                      "traced_packets": extra.get("traced_packets")}
            log(f"hook cost {v}: {len(progs)} programs, "
                f"{out[v]['bpf_ns_per_packet'] or 0:.0f} ns of BPF per received packet")

        p_srv, p_cli = self.ports[0], self.ports[1]
        srv = self.pingpong_server("hooks", p_srv)
        trips = a.count + a.warmup

        def pingpong():
            cli = Proc(self, "pingpong-client-hooks",
                       self.pinned([self.tool("pingpong"), "client", "--to",
                                    f"127.0.0.1:{p_srv}", "--bind", f"127.0.0.1:{p_cli}",
                                    "--count", str(a.count), "--warmup", str(a.warmup)]))
            if cli.wait(max(60, a.count * 0.01)) != 0 or not cli.json_lines():
                raise BenchError(f"pingpong client (hooks) failed: {cli.text()}")
            return cli.json_lines()[-1]
        # Interleaved rounds: this host's speed drifts by tens of per cent within
        # minutes, so each round measures every tracer back to back, and a
        # tracer's figure against the floor is the median of its per-round ratios.
        rt_tracers = [t for t in tracers if t != "bpftrace-floor"]
        rounds = {v: [] for v in rt_tracers}
        try:
            for rnd in range(a.hook_rounds):
                for v in rt_tracers[rnd % len(rt_tracers):] + rt_tracers[:rnd % len(rt_tracers)]:
                    r = self._bpf_stats_during(v, "lo", 1, [p_srv, p_cli], pingpong)
                    if r is None:
                        continue
                    progs, res, _ = r
                    ns = sum(p["run_time_ns"] for p in progs) / trips
                    rounds[v].append({"round": rnd, "progs": progs, "p50_ns": res["p50_ns"],
                                      "bpf_ns_per_round_trip": ns})
                    log(f"hook cost round {rnd + 1}/{a.hook_rounds} {v} per loopback round "
                        f"trip: {sum(p['run_cnt'] for p in progs) / trips:.1f} program runs, "
                        f"{ns:.0f} ns of BPF")
            if self.recv_return_hook():
                self.host_primitives(pingpong, p_srv, p_cli)
            # Apart from the timed runs: the counting's atomic adds cost time.
            if a.netlatd:
                count_runs(self, pingpong, p_srv, p_cli)
        finally:
            srv.kill()
        for v, rs in rounds.items():
            if not rs:
                continue
            # Programs summed over the rounds, by name.
            by_name = {}
            for r in rs:
                for p in r["progs"]:
                    q = by_name.setdefault(p["name"], {"name": p["name"], "run_cnt": 0,
                                                       "run_time_ns": 0})
                    q["run_cnt"] += p["run_cnt"]
                    q["run_time_ns"] += p["run_time_ns"]
            progs = sorted(by_name.values(), key=lambda p: p["name"])
            n = trips * len(rs)
            for p in progs:
                p["ns_per_run"] = p["run_time_ns"] / p["run_cnt"] if p["run_cnt"] else None
                p["runs_per_round_trip"] = p["run_cnt"] / n
                p["ns_per_round_trip"] = p["run_time_ns"] / n
            per_round = [r["bpf_ns_per_round_trip"] for r in rs]
            rt_out[v] = {"round_trips": trips, "rounds": len(rs), "progs": progs,
                         "p50_ns": median([r["p50_ns"] for r in rs]),
                         "runs_per_round_trip": sum(p["run_cnt"] for p in progs) / n,
                         "bpf_ns_per_round_trip": median(per_round),
                         "bpf_ns_rounds": [round(x) for x in per_round]}
            log(f"hook cost {v} per loopback round trip: "
                f"{rt_out[v]['runs_per_round_trip']:.1f} program runs, median "
                f"{rt_out[v]['bpf_ns_per_round_trip']:.0f} ns of BPF over {len(rs)} round(s)")
        # Each tracer against the clock floor of the same round.
        ref = {r["round"]: r["bpf_ns_per_round_trip"] for r in rounds.get(FLOOR_REF, [])}
        for v, h in rt_out.items():
            ratios = [r["bpf_ns_per_round_trip"] / ref[r["round"]] for r in rounds[v]
                      if ref.get(r["round"])]
            if ratios:
                h["ratio_to_floor_rounds"] = [round(x, 3) for x in ratios]
                h["ratio_to_floor"] = median(ratios)

    def host_primitives(self, pingpong, p_srv, p_cli):
        """What single operations cost in a program on this host, at the receive
        return's hook over one loopback ping-pong (nlbench-floor --flavour primitives):
        what the floor's flavours leave out of a design like netlatd's, a socket's lock
        taken at each datagram's enqueue and at its read."""
        v = "floor-primitives"
        try:
            tr, info = self.start_tracer(v, "lo", 1, [p_srv, p_cli])
        except BenchError as e:
            self.bench_error(v, f"host primitives: {e}")
            return
        try:
            ids = bpf_prog_ids_of(tr.p.pid)
            with BpfStats(self):
                before = bpf_prog_stats(ids)
                pingpong()
                after = bpf_prog_stats(ids)
        finally:
            self.stop_tracer(v, tr, info)
        ns = {}
        for pid_, name in info["prog_names"].items():
            if pid_ in after:
                cnt = after[pid_][1] - before.get(pid_, ("", 0, 0))[1]
                t = after[pid_][2] - before.get(pid_, ("", 0, 0))[2]
                ns[name] = t / cnt if cnt else None
        self.results["host_primitives"] = {"hook": self.recv_return_hook(), "ns_per_run": ns,
                                           "missing": info.get("missing", []),
                                           "round_trips": self.a.count + self.a.warmup}
        log("host primitives at " + self.recv_return_hook() + ": "
            + ", ".join(f"{k} {x:.0f} ns" for k, x in ns.items() if x is not None))

    def _bpf_stats_during(self, v, iface, ifindex, ports, work):
        """Starts tracer v, runs work() with BPF run-time statistics on; returns (per-program
        deltas, work's result, stop_tracer's figures), or None if the tracer did not start."""
        try:
            tr, info = self.start_tracer(v, iface, ifindex, ports)
        except BenchError as e:
            self.tracer_error(v, f"hook cost: {e}")
            return None
        try:
            ids = bpf_prog_ids_of(tr.p.pid)
            if not ids:
                raise BenchError(f"{v} holds no BPF program fds")
            with BpfStats(self):
                before = bpf_prog_stats(ids)
                result = work()
                after = bpf_prog_stats(ids)
        finally:
            extra = self.stop_tracer(v, tr, info)
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

    # ---- 4. daemon cost ---------------------------------------------------------------------

    def daemon_cost(self):
        """At each fixed rate with the default ring buffer, then at 200k pps with each
        --ringbuf-mb asked for (the ring buffer is most of the RSS; see the doc)."""
        a = self.a
        rows = self.results["daemon"] = []
        runs = [(rate, None, False, 0) for rate in a.rates] + [(200000, mb, False, 0) for mb in a.ringbuf_mb]
        # --aggregate at the highest rates: the daemon then reads no record per
        # packet, only the kernel's histograms once a second.
        if not a.no_aggregate:
            runs += [(rate, None, True, 0) for rate in a.rates if rate == 0 or rate >= 200000]
        # A reader slower than its sender: datagrams wait unread on the socket.
        runs += [(rate, None, False, pause) for rate, pause in a.deep_reader]
        for rate, ringbuf_mb, aggregate, pause_us in runs:
            extra_args = ["--ringbuf-mb", str(ringbuf_mb)] if ringbuf_mb else []
            if aggregate:
                extra_args.append("--aggregate")
            tr = self.start_netlatd(self.veth, [self.ports[2]], extra_args)
            if not tr.wait_ready(15):
                self.tracer_error("netlatd", f"daemon cost: {not_ready(tr, 15)}")
                return
            pid = tr.p.pid

            def mark():
                return (time.monotonic(), proc_cpu_ns(pid))
            try:
                f = self.flood(rate, a.flood_seconds, on_start=mark, pause_us=pause_us)
                t0, (c0, res_ns) = f.pop("ctx")
                t1, (c1, _) = time.monotonic(), proc_cpu_ns(pid)
                hwm = proc_status_kib(pid, "VmHWM")
                rss = rss_by_mapping_kib(pid)
            finally:
                extra = self.stop_tracer("netlatd", tr, {})
            row = {"rate_target": rate, "ringbuf_mb": ringbuf_mb, "aggregate": aggregate,
                   "reader_pause_us": pause_us, "sent": f["sent"],
                   "recv_pps": f["recv_pps"], "received": f["received"],
                   "cpu_pct": (c1 - c0) / 1e9 / (t1 - t0) * 100,
                   "cpu_resolution_pct": res_ns / 1e9 / (t1 - t0) * 100,
                   "vmhwm_kib": hwm, "bpf_map_rss_kib": rss["bpf_maps"], "rss_kib": rss,
                   "traced_packets": extra.get("traced_packets"),
                   "drops": extra.get("drops", {})}
            rows.append(row)
            log(f"daemon cost at {rate or 'max'} pps"
                f"{f', ring buffer {ringbuf_mb} MiB' if ringbuf_mb else ''}"
                f"{', --aggregate' if aggregate else ''}"
                f"{f', reader pausing {pause_us} us a read' if pause_us else ''}: "
                f"{row['cpu_pct']:.2f} % CPU, VmHWM {hwm} KiB ({rss}), drops {row['drops']}")

    # ---- 6. where in the programs ------------------------------------------------------------

    def hot_lines(self):
        """Where the time inside netlatd's programs goes, by line of bpf/: `perf record`
        on the ping-pong's CPU during one loopback ping-pong, each sample inside one of
        netlatd's programs mapped to the source line its JIT image was made from
        (nlbench-lines reads the programs' line info). A sample lands where the CPU
        waited: on a load that missed the cache, or on the instruction after a helper
        call; the lines of a locked region show as `__bpf_spin_unlock_irqrestore`,
        outside the programs, since the samples wait there for IRQs to be back on."""
        a = self.a
        if not shutil.which("perf"):
            self.results["notes"].append("lines: perf not installed; skipped")
            return
        if a.pin_cpu < 0:
            self.results["notes"].append("lines: needs the ping-pong pinned (--pin-cpu); skipped")
            return
        if not os.access(self.tool("lines"), os.X_OK):
            self.bench_error("lines", f"{self.tool('lines')} was not built (see run.sh)")
            return
        p_srv, p_cli = self.ports[0], self.ports[1]
        data = os.path.join(self.tmp, "lines.perf.data")
        nl, info = self.start_tracer("netlatd", "lo", 1, [p_srv, p_cli])
        try:
            srv = self.pingpong_server("lines", p_srv)
            perf = Proc(self, "perf-lines", ["perf", "record", "-q", "-C", str(a.pin_cpu), "-F",
                                             str(LINES_HZ), "-o", data])
            time.sleep(0.5)
            cli = Proc(self, "pingpong-client-lines",
                       self.pinned([self.tool("pingpong"), "client", "--to", f"127.0.0.1:{p_srv}",
                                    "--bind", f"127.0.0.1:{p_cli}", "--count", str(a.count),
                                    "--warmup", str(a.warmup)]))
            ok = cli.wait(max(60, a.count * 0.01)) == 0
            perf.stop(signal.SIGINT, timeout=30)
            srv.kill()
            if not ok:
                raise BenchError(f"pingpong client (lines) failed: {cli.text()}")
            ids = bpf_prog_ids_of(nl.p.pid)
            table = run([self.tool("lines")] + [str(i) for i in sorted(ids)], timeout=30).stdout
        finally:
            self.stop_tracer("netlatd", nl, info)
        starts, where = [], []
        for line in table.splitlines():
            f = line.split("\t")
            if len(f) >= 3:
                starts.append(int(f[0], 16))
                where.append((f[1], f[2], f[3].strip() if len(f) > 3 else ""))
        order = sorted(range(len(starts)), key=lambda i: starts[i])
        starts = [starts[i] for i in order]
        where = [where[i] for i in order]
        out = run(["perf", "script", "-i", data, "-F", "ip,sym"], timeout=120).stdout
        os.unlink(data)
        total = inside = 0
        by_line, by_prog = {}, {}
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            total += 1
            if not f[1].startswith("bpf_prog_"):
                continue
            i = bisect.bisect_right(starts, int(f[0], 16)) - 1
            if i < 0:
                continue
            inside += 1
            prog, loc, src = where[i]
            by_prog[prog] = by_prog.get(prog, 0) + 1
            key = (loc, src)
            by_line[key] = by_line.get(key, 0) + 1
        top = sorted(by_line.items(), key=lambda kv: -kv[1])[:LINES_SHOWN]
        self.results["lines"] = {
            "hz": LINES_HZ, "cpu": a.pin_cpu, "samples": total, "in_programs": inside,
            "round_trips": a.count + a.warmup,
            "programs": dict(sorted(by_prog.items(), key=lambda kv: -kv[1])),
            "top": [{"line": loc, "source": src, "samples": n} for (loc, src), n in top]}
        log(f"lines: {inside} of {total} samples on CPU {a.pin_cpu} inside netlatd's programs")

    # ---- 5. start-up / shut-down -------------------------------------------------------------

    def startstop(self):
        a = self.a
        rows = []
        for _ in range(a.startstop_reps):
            tr = self.start_netlatd("lo", [self.ports[0]])
            ok = tr.wait_ready(15)
            if not ok:
                self.tracer_error("netlatd", f"start/stop: {not_ready(tr, 15)}")
                return
            attach = tr.ready_at - tr.t_start
            time.sleep(0.2)
            detach = tr.stop(signal.SIGTERM, timeout=10)
            row = {"attach_s": attach, "detach_s": detach, "exit": tr.p.returncode}
            row.update(start_line_figures(tr))
            rows.append(row)
            if tr.p.returncode != 0:
                self.tracer_error("netlatd", f"start/stop: exit {tr.p.returncode} on SIGTERM")
        self.results["startstop"] = {
            "reps": rows, "attach_ms": median([r["attach_s"] for r in rows]) * 1000,
            "detach_ms": median([r["detach_s"] for r in rows]) * 1000}
        # The daemon's own account of its start (its start line): where a
        # change in the exec-to-ready figure comes from.
        for key in ("programs_ms", "load_ms"):
            known = [r[key] for r in rows if key in r]
            if known:
                self.results["startstop"][key] = median(known)
        walked = [r for r in rows if "most_walked" in r]
        if walked:
            self.results["startstop"]["most_walked"] = walked[-1]["most_walked"]

    def tracer_error(self, v, msg):
        log(f"error: {v}: {msg}")
        self.results["errors"].append({"variant": v, "message": msg})
        if v.startswith("netlatd"):
            self.tracer_failures.append(msg)
        elif v in FLOOR_VARIANTS:
            # The floor is the bench's own yardstick: without it the ratios are
            # missing, and that is the bench broken, not a tracer's figure missing.
            self.bench_failures.append(msg)

    def bench_error(self, what, msg):
        log(f"error: {what}: {msg}")
        self.results["errors"].append({"variant": what, "message": msg})
        self.bench_failures.append(msg)



def netlatd_drops(lines):
    """Drops summed over interval lines. netlatd reports each interval's own counts."""
    total = {}
    for j in lines:
        if j.get("type") != "interval":
            continue
        for k, n in (j.get("drops") or {}).items():
            total[k] = total.get(k, 0) + int(n)
    return total


# ---- report ---------------------------------------------------------------------------

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
        title(f"BPF programs of {v} during a max-rate flood "
              f"({h['recv_pps'] / 1e3:.0f} kpps received; "
              f"{h['bpf_ns_per_packet'] or 0:.0f} ns of BPF per packet)")
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
    if res.get("daemon"):
        title("netlatd daemon at fixed rates")
        table(["target pps", "ring buffer", "received pps", "CPU %", "VmHWM MiB",
               "RSS at end MiB", "of it BPF maps MiB", "traced/received", "drops (non-zero)"],
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
    ops = ops_rows(res, FLOOR_REF)
    if ops:
        title(ops_title(res))
        table(["work", "tracer"] + list(OPS_HEAD) + ["BPF ns"], ops)
    title(f"Targets (issue 32: against {FLOOR_REF} in the same run, and the daemon's share traced)")
    table(["target", "measured", "limit", "status"],
          [(w, v, l, {True: "met", False: "MISSED", None: "not measured", "figure": "-",
                      "inconclusive": "inconclusive (the floor's figure is at or below 0: noise)"}[ok])
           for w, v, l, ok in res.get("targets", [])])
    seen = {}
    for e in res.get("errors", []):
        key = f"{e['variant']}: {e['message']}"
        seen[key] = seen.get(key, 0) + 1
    for key, n in seen.items():
        out.append(f"error: {key}" + (f" (x{n})" if n > 1 else ""))
    for n in res.get("notes", []):
        out.append(f"note: {n}")
    for r in (res.get("roundtrip") or {}).get("no_figure", []):
        out.append(f"no figure: roundtrip {r['path']} {r['variant']} (round {r['round'] + 1}): "
                   f"{r['no_figure']}")
    for when in ("start", "end"):
        busy = (res.get("host") or {}).get(f"busy_{when}") or []
        if busy:
            out.append(f"warning: host not quiet at the {when}: " +
                       ", ".join(f"{b['comm']} (pid {b['pid']}, {b['cpu_pct']} % of a CPU)" for b in busy) +
                       "; absolute figures are suspect, A/B within this run less so")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tools", required=True, help="directory of the nlbench-* tools")
    # run.sh passes the daemon in the environment: a process whose command line
    # says "netlatd" is fair game for someone's `pkill -f netlatd` on a shared host.
    ap.add_argument("--netlatd", default=os.environ.get("NLBENCH_DAEMON") or None,
                    help="netlatd binary (default $NLBENCH_DAEMON; its variants are "
                         "skipped without it)")
    ap.add_argument("--netlatd-b", default=os.environ.get("NLBENCH_DAEMON_B") or None,
                    help="a second netlatd binary, measured as variant netlatd-b beside the "
                         "first in every comparing part (an A/B of two builds, interleaved "
                         "like the rest; default $NLBENCH_DAEMON_B)")
    ap.add_argument("--bt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "netdev-stages.bt"))
    ap.add_argument("--out", default="bench-results.json")
    ap.add_argument("--markdown", help="also write the tables as Markdown here")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the bench works")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--hook-rounds", type=int,
                    help="interleaved rounds of the hooks part's loopback round trips "
                         "(default 1 with --smoke, else 5); figures are per-round medians")
    ap.add_argument("--count", type=int, help="round trips per run")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--flood-seconds", type=float)
    ap.add_argument("--max-packets", type=float, default=50e6)
    ap.add_argument("--startstop-reps", type=int)
    ap.add_argument("--netns", help="namespace name (default nlbench-PID)")
    ap.add_argument("--no-bpftrace", action="store_true")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--no-aggregate", action="store_true",
                    help="skip the netlatd-aggregate variant (netlatd --aggregate: histograms kept in the "
                         "kernel, records only for outliers)")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floor variants (nlbench-floor at netlatd's hooks)")
    ap.add_argument("--no-sockperf", action="store_true",
                    help="skip the sockperf client in the round-trip part")
    ap.add_argument("--sockperf-seconds", type=int,
                    help="length of each sockperf ping-pong run (sockperf's -t)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--pin-cpu", type=int,
                    help="CPU the ping-pong client and server share (default: the last "
                         "one; -1: leave them to the scheduler)")
    ap.add_argument("--ringbuf-mb", default="4,1",
                    help="daemon part: also run at 200k pps with netlatd --ringbuf-mb N, "
                         "for each N of this comma list ('' for none; default 4,1: "
                         "either side of netlatd's default of 2)")
    ap.add_argument("--rates", default="10000,100000,200000,0",
                    help="daemon part: the flood rates in packets/s, comma list (0: unpaced)")
    ap.add_argument("--deep-reader", action="append", default=[], metavar="PPS:PAUSE_US",
                    help="daemon part: one more flood at PPS with a reader that sleeps PAUSE_US "
                         "after each read of up to 64 datagrams (queued unread on its 16 MiB "
                         "buffer); repeatable")
    ap.add_argument("--only", help="comma list of parts: roundtrip,rate,hooks,daemon,startstop,lines")
    a = ap.parse_args()
    dflt = dict(rounds=(1, 7), hook_rounds=(1, 5), count=(300, 20000), warmup=(50, 2000), flood_seconds=(0.5, 3.0),
                startstop_reps=(2, 7),
                # sockperf measures a window of about (seconds - 1): none at 1 s.
                sockperf_seconds=(2, 3))
    for k, (smoke, full) in dflt.items():
        if getattr(a, k) is None:
            setattr(a, k, smoke if a.smoke else full)
    a.rates = [int(x) for x in a.rates.split(",") if x]
    a.deep_reader = [tuple(int(x) for x in d.split(":")) for d in a.deep_reader]
    if a.pin_cpu is None:
        a.pin_cpu = os.cpu_count() - 1
    a.ringbuf_mb = [int(x) for x in a.ringbuf_mb.split(",") if x] if a.ringbuf_mb else []
    all_parts = ["roundtrip", "rate", "hooks", "daemon", "startstop", "lines"]
    parts = a.only.split(",") if a.only else all_parts
    if set(parts) - set(all_parts):
        ap.error(f"--only: unknown part(s) {','.join(sorted(set(parts) - set(all_parts)))}")
    if os.geteuid() != 0:
        log("needs root (network namespaces, BPF, sysctl)")
        return 77
    for path in (a.netlatd, a.netlatd_b):
        if path and not os.access(path, os.X_OK):
            raise SystemExit(f"bench: error: {path} is not executable")

    b = Bench(a)

    watch_signals()
    t0 = time.monotonic()
    rc = 0
    try:
        b.results["host"] = {"kernel": os.uname().release, "cpus": os.cpu_count(),
                             "loadavg_start": os.getloadavg()[0],
                             "netlatd": a.netlatd, "variants": b.variants()}
        me = (os.getpid(), os.getppid())
        b.results["host"]["busy_start"] = host_busy(exclude=me)
        for p in b.results["host"]["busy_start"]:
            log(f"warning: host not quiet: pid {p['pid']} ({p['comm']}) at {p['cpu_pct']} % of a CPU")
        b.find_floor_and_sockperf()
        b.results["host"]["variants"] = b.variants()
        b.setup_netns()
        steps = {"roundtrip": b.roundtrip, "rate": b.packet_rate, "hooks": b.hook_costs,
                 "daemon": b.daemon_cost, "startstop": b.startstop, "lines": b.hot_lines}
        for p in parts:
            if p in NETLATD_ONLY_PARTS and not a.netlatd:
                b.results["notes"].append(f"{p}: netlatd not available, skipped")
                continue
            t_part = time.monotonic()
            try:
                steps[p]()
            finally:
                # Other work on the host shows up here (our own floods count too).
                b.results["host"].setdefault("loadavg_after", {})[p] = os.getloadavg()[0]
                b.results["host"].setdefault("part_seconds", {})[p] = \
                    round(time.monotonic() - t_part, 1)
    except (BenchError, Stopped, subprocess.TimeoutExpired, OSError, KeyboardInterrupt) as e:
        msg = stop_reason[0] if stop_reason else f"{type(e).__name__}: {e}"
        log(f"error: {msg}")
        b.results["errors"].append({"variant": "bench", "message": msg})
        rc = 130 if stop_reason else 1
    finally:
        b.cleanup()
    b.results["host"]["loadavg_end"] = os.getloadavg()[0]
    if "host" in b.results:
        # After the clean-up, so only what outlived this run (or was never ours) shows.
        b.results["host"]["busy_end"] = host_busy(exclude=(os.getpid(), os.getppid()))
    b.results["elapsed_s"] = time.monotonic() - t0
    summarize(b.results)
    b.results["targets"] = evaluate(b.results, FLOOR_REF)
    with open(a.out, "w") as f:
        json.dump(b.results, f, indent=1)
    print(render(b.results))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(render(b.results, md=True) + "\n")
    log(f"results in {a.out} ({b.results['elapsed_s']:.0f} s)")
    if rc == 0 and b.bench_failures:
        log("error: the floor could not be measured (see errors above)")
        rc = 1
    if rc == 0 and b.tracer_failures:
        log("error: netlatd could not be measured (see errors above)")
        rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
