"""SIGTERM (a job scheduler, `kill`) ends an `awnn` command the way Ctrl-C
does: a KeyboardInterrupt in the main thread, so the driver closes its
MLflow runs as interrupted, flushes its writes and exits 130.

Ray's core worker installs its own SIGTERM handler in `ray.init` (it dumps
a C++ stack trace and aborts: exit 134, runs left RUNNING), so `init_ray`
installs ours again after it: `restore()` does, once the CLI `enable()`d it
(a program that uses the package as a library keeps its own handlers)."""
from __future__ import annotations

import signal
import threading

__all__ = ["enable", "restore"]

_enabled = False


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def enable() -> None:
    global _enabled
    _enabled = True
    restore()


def restore() -> None:
    if _enabled and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
