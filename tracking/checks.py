"""Checks run before a sweep writes anything: the tracking store answers (a
server, or a SQLite file that is an MLflow store), folders are writable, one
driver at a time creates a new SQLite store's schema (`folder_lock`)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from .contract import client

__all__ = ["TrackingUnavailable", "check_tracking", "check_writable", "check_sqlite_store", "folder_lock", "init_tracking"]


class TrackingUnavailable(RuntimeError):
    """The tracking server cannot be reached (one readable line)."""


def check_tracking(uri: str, timeout: float = 10.0, write: bool = True) -> None:
    """Fail fast, with one line naming the store and what is wrong, when the
    tracking store cannot be used: a server that does not answer or refuses
    the credentials; a SQLite store in a missing or unwritable folder, a file
    that cannot be written, or one that is not an MLflow SQLite database.
    `write=False` (read-only commands such as `awnn report`) also requires the
    store to exist, and never writes to it."""
    if uri.startswith(("http://", "https://")):
        _check_server(uri, timeout)
    elif uri.startswith("sqlite:///"):
        _check_sqlite(uri, Path(uri[len("sqlite:///"):]), write)


def _check_server(uri: str, timeout: float) -> None:
    import requests

    try:
        r = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as e:
        raise TrackingUnavailable(f"--tracking-uri {uri}: cannot reach the MLflow server ({type(e).__name__})") from None
    if r.status_code >= 500:
        raise TrackingUnavailable(f"--tracking-uri {uri}: server answered {r.status_code} on /health")
    # credentials: an authenticated call tells a 401 apart from success
    # the same credentials the MLflow client will use: the environment
    # (MLFLOW_TRACKING_USERNAME/PASSWORD), else ~/.mlflow/credentials
    from mlflow.utils.credentials import read_mlflow_creds

    creds = read_mlflow_creds()
    auth = (creds.username, creds.password or "") if creds.username else None
    try:
        r = requests.get(uri.rstrip("/") + "/api/2.0/mlflow/experiments/search", params={"max_results": 1}, auth=auth, timeout=timeout)
    except requests.RequestException as e:
        raise TrackingUnavailable(f"--tracking-uri {uri}: cannot reach the MLflow server ({type(e).__name__})") from None
    if r.status_code in (401, 403):
        raise TrackingUnavailable(f"--tracking-uri {uri}: the server refused the credentials (HTTP {r.status_code}); set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")


SQLITE_HEADER = b"SQLite format 3\x00"
MLFLOW_TABLES = {"experiments", "runs", "alembic_version"}


def _check_sqlite(uri: str, path: Path, write: bool) -> None:
    folder = path.parent
    if not folder.exists():
        raise TrackingUnavailable(f"--tracking-uri {uri}: folder {folder} does not exist")
    if not folder.is_dir():
        raise TrackingUnavailable(f"--tracking-uri {uri}: {folder} is not a folder")
    if path.exists() and not path.is_file():
        raise TrackingUnavailable(f"--tracking-uri {uri}: {path} is not a file")
    has_data = path.is_file() and path.stat().st_size > 0
    if not write and not has_data:
        what = "an empty file, not an MLflow store" if path.exists() else "no such SQLite file"
        raise TrackingUnavailable(f"--tracking-uri {uri}: {what}; pass the store `awnn compare` wrote (its summary prints it)")
    if has_data:
        check_sqlite_store(path, f"--tracking-uri {uri}")
    if write:
        check_writable(folder, f"--tracking-uri {uri}")
        if path.exists():
            try:
                os.close(os.open(path, os.O_RDWR))
            except OSError as e:
                raise TrackingUnavailable(f"--tracking-uri {uri}: cannot write to {path} ({e.strerror or type(e).__name__})") from None


def check_sqlite_store(path: Path, what: str, tables: set[str] = MLFLOW_TABLES, kind: str = "an MLflow SQLite store") -> None:
    """A non-empty file that must be an intact SQLite database holding `tables`
    (read-only: the file is opened with mode=ro and nothing is written)."""
    import sqlite3

    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise TrackingUnavailable(f"{what}: cannot read {path} ({e.strerror or type(e).__name__})") from None
    if head != SQLITE_HEADER:
        raise TrackingUnavailable(f"{what}: {path} is not {kind}: file is not a database")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            check = con.execute("PRAGMA quick_check(1)").fetchone()
            if not check or check[0] != "ok":
                raise sqlite3.DatabaseError(check[0] if check else "no answer to quick_check")
            found = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise TrackingUnavailable(f"{what}: {path} is not {kind}: {str(e).splitlines()[0][:200]}") from None
    if not tables <= found:
        raise TrackingUnavailable(f"{what}: {path} is a SQLite database but not {kind} (no table {', '.join(sorted(tables - found))})")


def check_writable(folder: Path, what: str) -> None:
    """Create and remove a file in `folder` (or its nearest existing parent,
    which must be a folder): a read-only folder or mount fails here, in
    milliseconds, instead of deep inside a sweep."""
    import tempfile

    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise TrackingUnavailable(f"{what}: {probe} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".awnn-write-check-"):
            pass
    except OSError as e:
        raise TrackingUnavailable(f"{what}: cannot write in {probe} ({e.strerror or type(e).__name__})") from None


@contextmanager
def folder_lock(folder: Path):
    """An exclusive lock on `folder` (flock on the folder itself: no lock file
    is left behind) between processes on this host."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def init_tracking(uri: str) -> None:
    """Create the MLflow schema of a new SQLite store under a lock on its
    folder, so that drivers started at the same moment on a new file do not
    both run MLflow's migrations (the loser crashes inside alembic)."""
    if not uri.startswith("sqlite:///"):
        return
    path = Path(uri[len("sqlite:///"):])
    with folder_lock(path.parent):
        client(uri).search_experiments(max_results=1)
