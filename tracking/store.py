"""All MLflow writes of a sweep go through one background thread on the driver.

Why one writer: the default store is a SQLite file, which must never see
concurrent writers, and a tracking server may be down for a while during a
sweep that runs for hours.  Trials never talk to MLflow; they report to Ray
Tune, the driver's callback turns reports into operations on this writer's
queue, and the writer applies them in order:

* metrics are batched (`log_batch`, up to 1000 per call), so per-epoch
  logging costs a few calls per trial rather than one per epoch;
* a failed call (server restarting, network blip) is retried with backoff,
  in order, without losing or duplicating anything queued behind it;
* `close(timeout)` flushes; whatever could not be written by then is saved
  to a spool file (JSON lines) that `replay_spool` applies later
  (`awnn sweep --resume` does), and the affected runs are reported.

Runs are addressed by our own keys (e.g. "sel/0042"); the writer maps them
to MLflow run ids once the runs exist, so callers never wait for MLflow.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .contract import client

__all__ = ["TrackingWriter", "TrackingUnavailable", "check_tracking", "check_writable", "check_sqlite_store",
           "folder_lock", "init_tracking", "replay_spool"]

log = logging.getLogger(__name__)

MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100


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


@dataclass
class _Op:
    kind: str  # start | metrics | tags | params | end | reopen | artifact
    key: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "key": self.key, "data": self.data}, default=str)


class TrackingWriter:
    """The driver's single MLflow writer (see module docstring)."""

    def __init__(self, tracking_uri: str, experiment: str, spool_path: str | Path | None = None, retry_seconds: float = 600.0):
        self.uri = tracking_uri
        self.experiment = experiment
        self.spool_path = Path(spool_path) if spool_path else None
        self.retry_seconds = retry_seconds
        self.client = client(tracking_uri)
        self.experiment_id = self._ensure_experiment()
        self.run_ids: dict[str, str] = {}
        self._queue: "queue.Queue[_Op | None]" = queue.Queue()
        self._pending: list[_Op] = []
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = False
        self.failures = 0  # calls that failed and were retried
        self.outage_seconds = 0.0
        self._thread = threading.Thread(target=self._loop, name="mlflow-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ public API
    def _ensure_experiment(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        try:
            return self.client.create_experiment(self.experiment)
        except Exception:  # created concurrently by another driver
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None:
                raise
            return exp.experiment_id

    def adopt(self, key: str, run_id: str) -> None:
        """Address an existing MLflow run by `key` (used when resuming)."""
        self.run_ids[key] = run_id

    def start_run(self, key: str, name: str, parent: str | None = None, tags: dict | None = None, params: dict | None = None) -> None:
        self._put(_Op("start", key, {"name": name, "parent": parent, "tags": tags or {}, "params": params or {}, "time": _now_ms()}))

    def log_metrics(self, key: str, metrics: Iterable[tuple[str, float, int]], timestamp_ms: int | None = None) -> None:
        ts = timestamp_ms or _now_ms()
        rows = [(n, float(v), int(s), ts) for n, v, s in metrics if v is not None and v == v]  # drop None/NaN
        if rows:
            self._put(_Op("metrics", key, {"rows": rows}))

    def set_tags(self, key: str, tags: dict[str, Any]) -> None:
        self._put(_Op("tags", key, {"tags": {k: str(v) for k, v in tags.items()}}))

    def log_params(self, key: str, params: dict[str, Any]) -> None:
        self._put(_Op("params", key, {"params": params}))

    def end_run(self, key: str, status: str = "FINISHED") -> None:
        self._put(_Op("end", key, {"status": status, "time": _now_ms()}))

    def reopen_run(self, key: str) -> None:
        """Mark an ended run (e.g. an interrupted sweep) RUNNING again: --resume continues it."""
        self._put(_Op("reopen", key))

    def log_artifacts(self, key: str, local_dir: str | Path, artifact_path: str | None = None) -> None:
        self._put(_Op("artifact", key, {"dir": str(local_dir), "path": artifact_path}))

    def run_id(self, key: str, timeout: float = 60.0) -> str | None:
        """The MLflow run id for `key`, waiting up to `timeout` for its creation."""
        deadline = time.monotonic() + timeout
        while key not in self.run_ids and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.run_ids.get(key)

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until everything queued so far is written; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.empty() and self._idle.is_set():
                return True
            time.sleep(0.02)
        return False

    def close(self, timeout: float = 60.0) -> list[str]:
        """Flush and stop.  Returns the keys of runs with writes that could not
        be made (they are saved to the spool file when one is set)."""
        flushed = self.flush(timeout)
        self._stop = True
        self._queue.put(None)
        self._thread.join(timeout=5.0)
        if flushed:
            return []
        leftover = list(self._pending)
        while True:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                break
            if op is not None:
                leftover.append(op)
        keys = sorted({op.key for op in leftover})
        if leftover and self.spool_path is not None:
            self.spool_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.spool_path, "a") as f:
                f.write(json.dumps({"kind": "run_ids", "key": "", "data": self.run_ids}) + "\n")
                for op in leftover:
                    f.write(op.to_json() + "\n")
        return keys

    # --------------------------------------------------------------- worker
    def _put(self, op: _Op) -> None:
        self._idle.clear()
        self._queue.put(op)

    def _loop(self) -> None:
        while True:
            if not self._pending:
                op = self._queue.get()
                if op is None:
                    return
                self._pending.append(op)
            # take whatever else is queued, so metrics can be batched
            while True:
                try:
                    op = self._queue.get_nowait()
                except queue.Empty:
                    break
                if op is None:
                    self._stop = True
                    break
                self._pending.append(op)
            try:
                self._apply_pending()
            except Exception as e:  # noqa: BLE001 - retried: any failure of the store
                self.failures += 1
                self._outage(e)
                continue
            if self._queue.empty():
                self._idle.set()
            if self._stop and self._queue.empty():
                return

    def _outage(self, error: Exception) -> None:
        """Back off and retry the pending operations, for up to retry_seconds."""
        log.warning("MLflow write failed (%s: %s); retrying", type(error).__name__, str(error)[:200])
        start = time.monotonic()
        delay = 0.5
        while not self._stop or time.monotonic() - start < 2.0:
            time.sleep(delay)
            self.outage_seconds += delay
            delay = min(delay * 2, 10.0)
            try:
                self._apply_pending()
                return
            except Exception as e:  # noqa: BLE001
                self.failures += 1
                if time.monotonic() - start > self.retry_seconds:
                    log.error("MLflow unreachable for %.0fs; keeping %d operations for the spool file", time.monotonic() - start, len(self._pending))
                    return
                log.debug("MLflow still failing: %s", e)
            if self._stop:
                return

    def _apply_pending(self) -> None:
        """Apply pending ops in order; successful ones are removed as they go."""
        while self._pending:
            op = self._pending[0]
            if op.kind == "metrics":
                # batch this and following metric ops of the same run
                rows = []
                n = 0
                while n < len(self._pending) and self._pending[n].kind == "metrics" and self._pending[n].key == op.key and len(rows) < MAX_METRICS_PER_BATCH:
                    rows.extend(self._pending[n].data["rows"])
                    n += 1
                self._log_metric_rows(op.key, rows)
                del self._pending[:n]
                continue
            self._apply(op)
            self._pending.pop(0)

    def _log_metric_rows(self, key: str, rows: list) -> None:
        from mlflow.entities import Metric

        run_id = self._require(key)
        for i in range(0, len(rows), MAX_METRICS_PER_BATCH):
            chunk = rows[i : i + MAX_METRICS_PER_BATCH]
            self.client.log_batch(run_id, metrics=[Metric(n, v, ts, s) for n, v, s, ts in chunk], synchronous=True)

    def _require(self, key: str) -> str:
        try:
            return self.run_ids[key]
        except KeyError:
            raise RuntimeError(f"no MLflow run started for {key!r}") from None

    def _apply(self, op: _Op) -> None:
        from mlflow.entities import Param, RunTag

        d = op.data
        if op.kind == "start":
            if op.key in self.run_ids:
                return  # already created (a retry after a timeout that did succeed is not possible: we look it up below)
            tags = {k: str(v) for k, v in d["tags"].items()}
            tags["awnn.key"] = op.key
            if d["parent"]:
                tags["mlflow.parentRunId"] = self._require(d["parent"])
            # only a retried create can have reached the server already
            existing = self._find_by_key(op.key, tags.get("awnn.comparison")) if d.get("attempted") else None
            d["attempted"] = True
            if existing is not None:
                self.run_ids[op.key] = existing
            else:
                run = self.client.create_run(self.experiment_id, start_time=d["time"], tags=tags, run_name=d["name"])
                self.run_ids[op.key] = run.info.run_id
            params = [Param(k, _param_str(v)) for k, v in d["params"].items()]
            for i in range(0, len(params), MAX_PARAMS_PER_BATCH):
                self.client.log_batch(self.run_ids[op.key], params=params[i : i + MAX_PARAMS_PER_BATCH], synchronous=True)
        elif op.kind == "tags":
            self.client.log_batch(self._require(op.key), tags=[RunTag(k, v) for k, v in d["tags"].items()], synchronous=True)
        elif op.kind == "params":
            params = [Param(k, _param_str(v)) for k, v in d["params"].items()]
            for i in range(0, len(params), MAX_PARAMS_PER_BATCH):
                self.client.log_batch(self._require(op.key), params=params[i : i + MAX_PARAMS_PER_BATCH], synchronous=True)
        elif op.kind == "end":
            self.client.set_terminated(self._require(op.key), status=d["status"], end_time=d["time"])
        elif op.kind == "reopen":
            self.client.update_run(self._require(op.key), status="RUNNING")
        elif op.kind == "artifact":
            self.client.log_artifacts(self._require(op.key), d["dir"], d["path"])
        else:  # pragma: no cover - internal
            raise AssertionError(op.kind)

    def _find_by_key(self, key: str, comparison: str | None) -> str | None:
        """A run with this key created by an earlier attempt of the same call
        (a create that succeeded on the server but whose answer was lost)."""
        if comparison is None:
            return None
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`awnn.key` = '{key}' and tags.`awnn.comparison` = '{comparison}'",
            max_results=1,
        )
        return runs[0].info.run_id if runs else None


def _param_str(v: Any) -> str:
    s = "" if v is None else str(v)
    return s[:6000]


def _now_ms() -> int:
    return int(time.time() * 1000)


def replay_spool(path: str | Path, tracking_uri: str, experiment: str) -> int:
    """Apply the operations a previous driver could not write.  Returns how
    many were applied; the file is removed when all went through."""
    path = Path(path)
    if not path.exists():
        return 0
    writer = TrackingWriter(tracking_uri, experiment)
    n = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a driver killed while saving: the rest still counts
            log.warning("%s: skipped a line that is not complete JSON (%d characters)", path, len(line))
            continue
        if rec["kind"] == "run_ids":
            for k, v in rec["data"].items():
                writer.adopt(k, v)
            continue
        op = _Op(rec["kind"], rec["key"], rec["data"])
        if op.kind == "metrics":
            op.data["rows"] = [tuple(r) for r in op.data["rows"]]
        writer._put(op)
        n += 1
    left = writer.close(timeout=120.0)
    if not left:
        path.unlink()
    return n
