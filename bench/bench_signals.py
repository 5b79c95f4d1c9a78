"""Stop signals: blocked in every thread of the bench, taken by one thread that
names their sender, unblocked again in its children."""
import signal
import threading

from bench_common import Stopped, log

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
stop_reason = []


def watch_signals():
    """Stop on SIGTERM/SIGINT/SIGHUP, saying who sent it: on a shared host a stray
    `pkill` from someone else is otherwise indistinguishable from a real stop.
    The signals are blocked in every thread and taken by one with sigwaitinfo;
    children get them unblocked again (see Proc)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)

    def stop(_signum, _frame):
        raise Stopped(stop_reason[-1] if stop_reason else "stop signal")
    # A handler of our own: SIGINT may be ignored (a background job), and then
    # Python has no handler for interrupt_main() to run.
    signal.signal(signal.SIGUSR1, stop)

    def waiter():
        info = signal.sigwaitinfo(STOP_SIGNALS)
        try:
            with open(f"/proc/{info.si_pid}/cmdline", "rb") as f:
                who = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            who = "?"
        stop_reason.append(f"signal {info.si_signo} from pid {info.si_pid} ({who[:200]})")
        log(f"stopping: {stop_reason[-1]}")
        import _thread
        _thread.interrupt_main(signal.SIGUSR1)

    threading.Thread(target=waiter, daemon=True).start()


def unblock_stop_signals():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
