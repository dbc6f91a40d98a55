"""Scratch folders in a node's temporary folder, never left behind.

The tool writes three kinds of short-lived folders in the temporary folder
of the machine it runs on: a trial's checkpoint before Ray Tune copies it
into the storage (`awnn-ckpt-*`, `awnn-model-*`: search/trial_common.py)
and the driver's note of its warmed-up workers (`awnn-warm-*`:
search/tune.py).  Each is removed by its process when done, in a `finally`
or an exit handler, but a process that is killed (SIGKILL, the kernel's
out-of-memory killer, a node's containers stopped) runs neither: measured,
one session of `make test` runs (its fault tests kill drivers and workers)
left 74 in /tmp (50 checkpoints, 16 models, 8 warm-up notes); a cluster node whose trials are killed now and then
would keep gathering them.

So the owner of a scratch folder holds a shared flock on it for as long
as the folder is in use (the kernel releases it when the process ends,
however it ends), and every new scratch folder first sweeps the folders of
these kinds that nobody holds and that have not changed for GRACE_S (a
folder is made a moment before it is locked: the grace keeps a sweeper from
taking it in between).  Folders of other users are left alone (a sticky
/tmp would refuse anyway), and so are other names.  A sweep runs at most
once every SWEEP_EVERY_S in a process.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["PREFIXES", "GRACE_S", "make", "remove", "sweep"]

PREFIXES = ("awnn-ckpt-", "awnn-model-", "awnn-warm-")  # every kind of scratch folder this tool makes
GRACE_S = 30.0  # an unlocked folder younger than this may be one being made: kept
SWEEP_EVERY_S = 60.0

_held: dict[str, int] = {}  # folder -> the descriptor that holds its lock
_last_sweep = [float("-inf")]


def make(prefix: str) -> str:
    """A new folder `<tmp>/<prefix>XXXXXXXX` (prefix: one of PREFIXES), held
    by this process until `remove` (or its end), after a sweep of stale ones."""
    import fcntl

    if prefix not in PREFIXES:
        raise ValueError(f"scratch folder prefix {prefix!r} is not one of {PREFIXES} (search/scratch.py sweeps only those)")
    if time.monotonic() - _last_sweep[0] >= SWEEP_EVERY_S:
        sweep()
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # (a folder we cannot open is still a folder: its owner removes it as before)
        return path
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return path
    _held[path] = fd
    return path


def remove(path: str | os.PathLike) -> None:
    """Remove a scratch folder and let go of its lock (nothing when it is gone)."""
    path = str(path)
    shutil.rmtree(path, ignore_errors=True)
    fd = _held.pop(path, None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def sweep(folder: str | os.PathLike | None = None, grace_s: float = GRACE_S) -> list[str]:
    """Remove the scratch folders in `folder` (default: the temporary folder)
    that no live process holds and that have not changed for `grace_s`;
    the ones removed."""
    import fcntl

    _last_sweep[0] = time.monotonic()
    base = Path(folder or tempfile.gettempdir())
    try:
        names = [n for n in os.listdir(base) if n.startswith(PREFIXES)]
    except OSError:
        return []
    removed, uid, now = [], os.getuid(), time.time()
    for name in names:
        path = base / name
        if str(path) in _held:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not _is_dir(st.st_mode) or st.st_uid != uid or now - st.st_mtime < grace_s:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its process lives
            os.close(fd)
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
        if not path.exists():
            removed.append(str(path))
    return removed


def _is_dir(mode: int) -> bool:
    import stat

    return stat.S_ISDIR(mode)
