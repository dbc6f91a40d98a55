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

Between a driver's start and its first tags (its imports, Ray's start:
seconds) MLflow shows nothing of it: two `--resume` of a stopped comparison
typed in two terminals, or a scheduler's retry beside the user's, both went
on and ran every unfinished trial twice.  On one machine a lock closes that
window (`hold_comparison`: flock on a file in the temporary folder, named
after the store and the comparison, held until the process ends however it
ends): a driver takes it when it creates a comparison and before it adopts
one; a second driver finds it held and refuses.  (The lock files, a few
bytes each in `<tmp>/awnn-locks/`, stay: removing a lock file that another
process has open lets two processes hold "the" lock.)  Drivers on two machines
that resume one comparison within those seconds are still not told apart
(a SQLite store and a tracking server give no transaction across the check
and the tag).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Mapping

from tracking.contract import Tag

__all__ = ["HEARTBEAT_S", "LEASE_S", "driver_tags", "live_driver", "start_heartbeat", "hold_comparison"]

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


_held: dict[str, int] = {}  # lock file -> its open descriptor, for the life of this process


def hold_comparison(uri: str, comparison: str) -> str | None:
    """Take this machine's lock on `comparison` of the store `uri` for the rest
    of this process (released by the kernel when it ends, however it ends;
    its file removed at a normal end: release_comparisons).
    None when this process holds it now (or the lock cannot be used here: a
    temporary folder this user cannot write); else who holds it, in words."""
    import fcntl
    import hashlib
    import tempfile

    if uri.startswith("sqlite:///"):  # one store, however its path was written
        uri = "sqlite:///" + os.path.realpath(uri[len("sqlite:///"):])
    name = hashlib.sha256(f"{uri}\0{comparison}".encode()).hexdigest()[:24]
    folder = Path(tempfile.gettempdir()) / "awnn-locks"
    path = folder / f"{name}.lock"
    if str(path) in _held:
        return None
    for _ in range(5):  # (a holder that ended removed the file between our open and our lock: take the new one)
        try:
            if not folder.is_dir():
                folder.mkdir(exist_ok=True)
                os.chmod(folder, 0o1777)  # every user's drivers keep their locks here (sticky: each removes only its own)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            return f"another driver on this machine{f', process {holder},' if holder.isdigit() else ''} works on it"
        if _names(path, fd):
            break
        os.close(fd)  # a lock on a removed file locks nothing
    else:
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    if not _held:
        import atexit

        atexit.register(release_comparisons)
    _held[str(path)] = fd
    return None


def _names(path: Path, fd: int) -> bool:
    """`path` still names the file open as `fd`."""
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def release_comparisons() -> None:
    """Remove this process's comparison lock files, then release them (at its
    exit: search/tune.exit_now calls it too, as it skips the exit handlers).
    Removed while still locked, so a driver that opened one meanwhile finds
    it gone (`_names`) and takes a new one; a driver that was killed leaves
    its file, which the next holder reuses and removes."""
    for path, fd in list(_held.items()):
        try:
            os.unlink(path)
        except OSError:
            pass
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()
