"""Which driver works on a comparison, so that a second one does not.

A driver that starts or resumes a comparison tags its MLflow run with who
it is (`awnn.driver`: `<host>|<pid>`) and keeps a heartbeat there
(`awnn.heartbeat`: Unix seconds, every HEARTBEAT_S while it works).
`--resume` of a comparison whose state is still `running` first asks
whether that driver is alive (`live_driver`): on this machine, whether its
process still runs the awnn command (exact, whatever the heartbeat); on
another machine, whether its heartbeat is younger than LEASE_S.  A live one
is not resumed: two drivers on one comparison each ran every unfinished
trial, so every config got two finished runs and its cost twice (measured:
a `--resume` typed while the first driver still ran, both exited 0).

Two `--resume` started within the same second can still both go on (the
check and the tag are not one transaction: a SQLite store and a tracking
server give none); the lease covers the case that happens, a driver that
is still running when someone resumes it.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Mapping

from tracking.contract import Tag

__all__ = ["HEARTBEAT_S", "LEASE_S", "driver_tags", "live_driver", "start_heartbeat"]

HEARTBEAT_S = 15.0  # how often a working driver renews its heartbeat
LEASE_S = 90.0  # a driver on another machine whose heartbeat is younger is taken to be alive


def _me() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()


def driver_tags(now: float | None = None) -> dict[str, str]:
    """The tags that say this process drives the comparison, now."""
    host, pid = _me()
    return {Tag.DRIVER: f"{host}|{pid}", Tag.HEARTBEAT: str(int(now if now is not None else time.time()))}


def _runs_awnn(pid: int) -> bool:
    """Does process `pid` on this machine exist and run the awnn command?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS): it exists, take it as the driver
    return any(part.endswith(b"awnn") or part == b"search.cli" for part in cmdline)


def live_driver(tags: Mapping[str, str], now: float | None = None) -> str | None:
    """Who still drives the comparison whose run has these tags, in words
    for a message, or None when no driver is alive (or none was recorded)."""
    who = tags.get(Tag.DRIVER, "")
    host, _, pid = who.rpartition("|")
    if not host or not pid.isdigit():
        return None
    my_host, my_pid = _me()
    if host == my_host:
        if int(pid) != my_pid and _runs_awnn(int(pid)):
            return f"its driver, process {pid} on this machine, is still running"
        return None
    try:
        beat = float(tags.get(Tag.HEARTBEAT, ""))
    except ValueError:
        return None
    age = (now if now is not None else time.time()) - beat
    if age < LEASE_S:
        return (f"its driver, process {pid} on {host}, wrote its heartbeat {max(age, 0):.0f} s ago (a driver that died is "
                f"taken for dead {LEASE_S:.0f} s after its last one)")
    return None


def start_heartbeat(write: Callable[[dict[str, str]], None], interval: float = HEARTBEAT_S) -> Callable[[], None]:
    """Write `driver_tags()` now and every `interval` s on a daemon thread
    (through `write`, the driver's MLflow writer); returns the stop function."""
    stop = threading.Event()
    write(driver_tags())

    def beat() -> None:
        while not stop.wait(interval):
            write(driver_tags())

    threading.Thread(target=beat, name="awnn-heartbeat", daemon=True).start()
    return stop.set
