"""A trial's node sees the driver's --storage.

`--storage` must be a folder every node mounts at the same path (NFS, a shared
volume) or an `s3://`-style URI: trials write their checkpoints there, a trial
retried on another node continues from them, `--resume` finds them after the
driver died, and the driver logs each re-training run's model from there.  Ray
checks it only when a trial first saves a checkpoint.  Given a folder on each
node's own disk (the same path, but not shared; found 2026-12-07), a smoke
comparison's selection trials (which save none at that budget) finished on the
other node, then each re-training trial failed three times in Ray's "Unable to
set up cluster storage" with its traceback (396 lines), and the command ended
with exit 0 and "Verdict: none: no arm has a test accuracy"; at a longer
budget every trial fails at its first checkpoint, after its first epochs.

The driver writes one small file into a local --storage (`mark`: a name no
node has looked up before, so no NFS client holds a stale "missing" entry for
it) and hands its path to every trial (search/tune.py trial_settings); a trial
that does not find it (`check`, retried for a few seconds) ends with
`StorageNotShared`, an ImportError as search/code_identity.py's CodeMismatch is:
the environment fault, which stops the comparison at its first trial, names
the node and is resumable.  The file is removed when the driver exits.  A URI
(`s3://...`, `gs://...`) is one store for every node: nothing is checked.
Where the driver cannot write the file, nothing is checked (Ray Tune's own
writes there meet the storage fault).  Switch: AWNN_STORAGE_CHECK=0.

A driver killed without its exit handlers (SIGKILL, the machine's OOM killer)
leaves its file behind: each new mark removes the marks of drivers of this
host whose process is gone (`_sweep`; a mark of another host, or of a live
process, is left alone: another driver's trials may still look for it).
"""
from __future__ import annotations

import atexit
import os
import re
import secrets
import socket
import time

__all__ = ["SWITCH", "StorageNotShared", "mark", "check"]

SWITCH = "AWNN_STORAGE_CHECK"
WAIT_S = 10.0  # a trial looks again for this long before it says the file is missing (a network mount's caches)
_MARKS: dict[str, str | None] = {}


class StorageNotShared(ImportError):
    """This node does not see the driver's --storage: a folder on its own disk, not one every node shares."""


def mark(storage: str) -> str | None:
    """The driver's mark in `storage` (written once per storage and process, removed at exit), or None where nothing
    is checked (a URI, the switch off, a folder the driver cannot write)."""
    if os.environ.get(SWITCH, "1") == "0" or "://" in storage:
        return None
    if storage not in _MARKS:
        path = os.path.join(storage, f"{PREFIX}{secrets.token_hex(8)}")
        try:
            os.makedirs(storage, exist_ok=True)
            with open(path, "x", encoding="utf-8") as f:
                f.write(_text(socket.gethostname(), os.getpid()))
        except OSError:
            path = None
        else:
            atexit.register(_remove, path)
            _sweep(storage, keep=path)
        _MARKS[storage] = path
    return _MARKS[storage]


PREFIX = ".awnn-driver-"


def _text(host: str, pid: int) -> str:
    return (f"written by the awnn driver on {host}, pid {pid}, for its trials to find (search/shared_storage.py); "
            "removed when it exits\n")


_OWNER = re.compile(r"^written by the awnn driver on (?P<host>.+), pid (?P<pid>\d+), for its trials to find")


def _sweep(storage: str, keep: str) -> list[str]:
    """Remove the marks in `storage` that drivers of this host left when they were killed (their process is gone);
    the paths removed."""
    host = socket.gethostname()
    removed = []
    try:
        names = [n for n in os.listdir(storage) if n.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(storage, name)
        if path == keep:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                owner = _OWNER.match(f.read(500))
        except (OSError, UnicodeDecodeError):
            continue
        if owner is None or owner["host"] != host or _alive(int(owner["pid"])):
            continue
        try:
            os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (PermissionError: another user's live process)
        return True
    return True


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def check(marker: str | None, wait: float = WAIT_S) -> None:
    """In a trial: raise StorageNotShared unless the driver's mark `marker` is there (None: nothing to check)."""
    if not marker:
        return
    deadline = time.monotonic() + wait
    while not os.path.exists(marker):
        if time.monotonic() >= deadline:
            raise StorageNotShared(
                f"this node does not see the driver's --storage {os.path.dirname(marker)}: a file the driver wrote there "
                f"({os.path.basename(marker)}) is missing on this node, so the folder is this node's own, not one every "
                "node shares")
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
