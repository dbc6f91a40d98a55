"""SIGTERM (a job scheduler, `kill`) and SIGHUP (the terminal was closed)
end an `awnn` command the way Ctrl-C does: a KeyboardInterrupt in the main
thread, so the driver closes its MLflow runs as interrupted, flushes its
writes and exits 130.  A SIGHUP that was ignored when the command started
(`nohup awnn ...`) stays ignored.

Ray's core worker installs its own SIGTERM handler in `ray.init` (it dumps
a C++ stack trace and aborts: exit 134, runs left RUNNING), so `init_ray`
installs ours again after it: `restore()` does, once the CLI `enable()`d it
(a program that uses the package as a library keeps its own handlers).

While `ray.init` runs, its own handler is in place: `sys.exit(15)`.  A
SIGTERM in that window (sent to the whole process group, it also ends the
node's GCS as it starts) surfaces as SystemExit(15), and not necessarily
inside `ray.init`: Python runs a signal's handler at the next bytecode, and
where the signal arrived during a C call (Ray waiting for the GCS's port
file), that is wherever the call's exception is first handled.
`ray_sigterm` tells the CLI's `main` such an exit is our SIGTERM, which it
ends as an interrupt (exit 130).  (An `except SystemExit` around
`ray.init` does not catch it.)"""
from __future__ import annotations

import signal
import threading

__all__ = ["enable", "restore", "ray_sigterm"]

_enabled = False
_signals: list[int] = []


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def enable() -> None:
    global _enabled
    if threading.current_thread() is not threading.main_thread():
        return
    _enabled = True
    _signals[:] = [signal.SIGTERM]
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        _signals.append(signal.SIGHUP)
    restore()


def restore() -> None:
    if _enabled and threading.current_thread() is threading.main_thread():
        for sig in _signals:
            signal.signal(sig, _raise_interrupt)


def ray_sigterm(exit: SystemExit) -> bool:
    """`exit` is what Ray's SIGTERM handler raises (`sys.exit(signum)`) while
    the CLI handles SIGTERM: the command was told to stop."""
    return _enabled and exit.code == signal.SIGTERM
