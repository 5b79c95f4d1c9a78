"""The bench's child processes: commands run to their end, and children whose
output is collected line by line while they run."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

from bench_common import BenchError
from bench_signals import unblock_stop_signals


def run(cmd, check=True, timeout=30, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=unblock_stop_signals, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


class Proc:
    """A child whose stdout/stderr lines are collected, time-stamped, by reader threads."""

    def __init__(self, bench, name, cmd, ready=None, notify_dir=None):
        """ready: (stream, predicate on a line) that says the child is ready; or
        notify_dir: the child is a service that sends READY=1 to $NOTIFY_SOCKET
        (netlatd: that is its contract with systemd, unlike the wording of a log line)."""
        self.name = name
        self.cmd = cmd
        self.lines = {"stdout": [], "stderr": []}
        self.ready_at = None
        self.ready_evt = threading.Event()
        self.ready = ready
        env = None
        if notify_dir:
            env = dict(os.environ, NOTIFY_SOCKET=self._listen_notify(bench, notify_dir))
        self.t_start = time.monotonic()
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1, env=env,
                                  start_new_session=True, preexec_fn=unblock_stop_signals)
        bench.procs.append(self)
        self.threads = [threading.Thread(target=self._read, args=(s,), daemon=True)
                        for s in ("stdout", "stderr")]
        for t in self.threads:
            t.start()

    def _read(self, stream):
        for line in getattr(self.p, stream):
            now = time.monotonic()
            self.lines[stream].append((now, line.rstrip("\n")))
            if self.ready and not self.ready_evt.is_set() and stream == self.ready[0] \
                    and self.ready[1](line):
                self.ready_at = now
                self.ready_evt.set()

    def _listen_notify(self, bench, notify_dir):
        path = os.path.join(notify_dir, f"notify-{len(bench.procs)}.sock")
        if os.path.exists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(0.2)

        def listen():
            # Until the child has exited (and a last look after, for a datagram
            # sent just before): READY=1 stamps the moment it arrived.
            try:
                while not self.ready_evt.is_set():
                    try:
                        msg = sock.recv(4096)
                    except socket.timeout:
                        if getattr(self, "p", None) is not None and self.p.poll() is not None:
                            return
                        continue
                    if "READY=1" in msg.decode(errors="replace").split("\n"):
                        self.ready_at = time.monotonic()
                        self.ready_evt.set()
            finally:
                sock.close()
                os.unlink(path)
        threading.Thread(target=listen, daemon=True).start()
        return path

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_evt.wait(0.02):
                return True
            if self.p.poll() is not None:
                for t in self.threads:
                    t.join(1)
                return self.ready_evt.is_set()
        return False

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signal the child, wait; returns seconds from signal to exit."""
        if self.p.poll() is not None:
            return None
        t0 = time.monotonic()
        try:
            self.p.send_signal(sig)
        except ProcessLookupError:
            pass
        self.wait(timeout, f"{self.name} did not exit within {timeout}s of signal {sig}")
        return self.exited_at - t0

    def wait(self, timeout, overrun=None):
        """Exit code; past the timeout, kill the child's group and raise."""
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError(overrun or f"{self.name} ran over its {timeout}s bound")
        self.exited_at = time.monotonic()
        for t in self.threads:
            t.join(2)
        return self.p.returncode

    def json_lines(self, stream="stdout"):
        out = []
        for _, line in self.lines[stream]:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def text(self, stream="stderr", last=15):
        return " / ".join(l for _, l in self.lines[stream][-last:])

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait(5)


def wait_udp_bound(port, pr, timeout):
    """Whether a UDP/IPv4 socket is bound to port within timeout (for a server
    that prints nothing when ready); False also when pr exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pr.p.poll() is not None:
            return False
        # /proc/net/udp, not a test bind: a bind of ours could take the port
        # from under the server for an instant.
        with open("/proc/net/udp") as f:
            next(f)
            if any(line.split()[1].endswith(f":{port:04X}") for line in f):
                return True
        time.sleep(0.05)
    return False


def not_ready(pr, timeout):
    """Message for a tracer that never said it was ready; kills it if still running."""
    rc = pr.p.poll()
    pr.kill()
    why = f"exited with {rc}" if rc is not None else f"not ready within {timeout}s"
    return f"{pr.name} {why}: {pr.text(last=3)}"
