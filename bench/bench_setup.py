"""The Bench: its options, results, network namespace and the processes it
started; the set-up and clean-up around the parts, the variants they compare,
the flood most of them share and the errors they report."""
import os
import shutil
import socket
import tempfile
import time

from bench_bpf import netlatd_plan
from bench_common import FLOOR_VARIANTS, BenchError, log
from bench_proc import Proc, run
from bench_tracers import Tracers


class Bench(Tracers):
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


    # ---- what the parts share -------------------------------------------------------

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

    def pingpong_server(self, part, bind, in_ns=False):
        """A ping-pong server on bind ("A.B.C.D:PORT"), pinned like its clients, ready;
        in_ns: inside the bench's namespace. The one place its command is built."""
        cmd = self.pinned([self.tool("pingpong"), "server", "--bind", bind, "--seconds", "3600"])
        srv = Proc(self, f"pingpong-server-{part}", self.ns_cmd(cmd) if in_ns else cmd,
                   ready=("stdout", lambda l: '"ready"' in l))
        if not srv.wait_ready(10):
            raise BenchError(f"pingpong server ({part}) did not start: {srv.text()}")
        return srv

    def pingpong_client(self, part, to, bind, tracer=None):
        """One ping-pong from bind to the server at to, pinned like it: the client's
        result line (p50_ns, p99_ns, mean_ns, lost...). The one place its command is
        built; tracer, if given, names the run in the error beside the part."""
        a = self.a
        cli = Proc(self, f"pingpong-client-{part}",
                   self.pinned([self.tool("pingpong"), "client", "--to", to, "--bind", bind,
                                "--count", str(a.count), "--warmup", str(a.warmup)]))
        rc = cli.wait(max(60, a.count * 0.01))
        res = cli.json_lines()
        if rc != 0 or not res:
            what = f"{part}, {tracer}" if tracer else part
            raise BenchError(f"pingpong client ({what}) failed: {cli.text()}")
        return res[-1]

    def recv_return_hook(self):
        """The receive return's hook in netlatd's plan (tp_btf/sock_recv_length or
        fexit/sock_recvmsg), where the host's primitives are measured; None without one."""
        return next((h for h in self.plan or []
                     if h in ("tp_btf/sock_recv_length", "fexit/sock_recvmsg")), None)

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
