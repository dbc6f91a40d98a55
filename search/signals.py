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
`ray.init` does not catch it.)

Only the first of these signals (Ctrl-C included) interrupts: the ones
that follow while the command stops (Ctrl-C pressed again, a scheduler's
repeated SIGTERM) say once that it is stopping and are otherwise ignored.
Each used to raise another KeyboardInterrupt wherever the stopping code
was: inside the closing of the MLflow runs, or Ray's exit handler, which
printed a traceback and then crashed (exit 139, a segmentation fault in
Ray's teardown).  SIGKILL still stops it at once; `--resume` then closes
what it left open."""
from __future__ import annotations

import os
import signal
import sys
import threading

__all__ = ["enable", "restore", "ray_sigterm"]

_enabled = False
_signals: list[int] = []
_stopping: list[int] = []  # the signals received (the first one interrupts)


def _raise_interrupt(signum, frame):
    _stopping.append(signum)
    if len(_stopping) == 1:
        raise KeyboardInterrupt
    if len(_stopping) == 2:
        print(f"awnn: already stopping (closing this driver's runs in MLflow, then Ray); `kill -9 {os.getpid()}` ends it at once, "
              "and --resume closes what it left open", file=sys.stderr, flush=True)


def enable() -> None:
    global _enabled
    if threading.current_thread() is not threading.main_thread():
        return
    _enabled = True
    _stopping.clear()
    _signals[:] = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (an ignored SIGINT, `cmd &` in a script, stays so)
        _signals.append(signal.SIGINT)
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
