"""The tracers a Bench compares: netlatd and its variants, the floor, bpftrace
and perf record, each started until it says it is ready, then stopped with its
figures."""
import os
import signal
import threading
import time

from bench_common import FLOOR_VARIANTS, SAMPLE_VARIANT, BenchError
from bench_proc import Proc, not_ready
from opcounts import VARIANT as OPS_VARIANT
from opcounts import ops_window

# The events `perf script record netdev-times` records.
PERF_EVENTS = [
    "irq:irq_handler_entry", "irq:irq_handler_exit",
    "irq:softirq_entry", "irq:softirq_exit", "irq:softirq_raise",
    "napi:napi_poll", "net:netif_receive_skb", "net:netif_rx",
    "net:net_dev_queue", "net:net_dev_xmit",
    "skb:skb_copy_datagram_iovec", "skb:consume_skb", "skb:kfree_skb",
]


class Tracers:
    """Starts and stops the tracer variants: a base of Bench (bench_setup), whose
    options, temporary directory, plan and errors it uses."""

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
            return self._start_floor(variant)
        elif variant == "bpftrace-floor":
            cmd = ["bpftrace", os.path.join(os.path.dirname(self.a.bt), "hook-floor.bt")]
            pr = Proc(self, variant, cmd, ready=("stdout", lambda l: "tracing ready" in l))
            timeout = 60
        elif variant == "perf":
            return self._start_perf(variant)
        else:
            raise ValueError(variant)
        if not pr.wait_ready(timeout):
            raise BenchError(not_ready(pr, timeout))
        info["t_ready"] = pr.ready_at
        return pr, info

    def _start_floor(self, variant):
        """nlbench-floor at netlatd's hooks (the floor variants), or at the receive
        return's hook (floor-primitives), once it is ready: (proc, info)."""
        info = {}
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

    def _start_perf(self, variant):
        """perf record of PERF_EVENTS, once it has enabled them: (proc, info)."""
        info = {}
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
        out["reader_named"] = reader_named(lines)
        out["ambiguous_reads"] = sum(int(j.get("ambiguous_reads", 0)) for j in lines
                                     if j.get("type") == "interval")
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


def reader_named(lines):
    """Packets whose records reach the read (in_socket, which ends at the
    receive call's return: only a record that names its read has it), summed
    over interval lines; None when no line has the coverage."""
    counts = [j["coverage"].get("stages", {}).get("in_socket", {}).get("recorded")
              for j in lines if j.get("type") == "interval" and j.get("coverage")]
    counts = [int(n) for n in counts if n is not None]
    return sum(counts) if counts else None


def netlatd_drops(lines):
    """Drops summed over interval lines. netlatd reports each interval's own counts."""
    total = {}
    for j in lines:
        if j.get("type") != "interval":
            continue
        for k, n in (j.get("drops") or {}).items():
            total[k] = total.get(k, 0) + int(n)
    return total
