"""All MLflow writes of a sweep go through one background thread on the driver.

Why one writer: the default store is a SQLite file, which must never see
concurrent writers, and a tracking server may be down for a while during a
sweep that runs for hours.  Trials never talk to MLflow; they report to Ray
Tune, the driver's callback turns reports into operations on this writer's
queue, and the writer applies them in order:

* metrics are batched (`log_batch`, up to 1000 per call), so per-epoch
  logging costs a few calls per trial rather than one per epoch: the
  pending writes of one run are merged across the other runs' writes
  queued between them (never past a write of its own that is not a
  metric), and the writer waits `linger` seconds (0.2) before a flush
  that holds only metrics, so that concurrent trials' epochs gather (in
  `make demo`, SQLite's per-call commit and latest-metrics query were
  half of the driver's CPU time when each epoch was one call);
* a failed call (server restarting, network blip) is retried with backoff,
  in order, without losing or duplicating anything queued behind it;
* `close(timeout)` flushes; whatever could not be written by then is saved
  to a spool file (JSON lines) that `replay_spool` applies later
  (`awnn sweep --resume` does), and the affected runs are reported
  (`last_error` says why the store refused them; `spool_error` why the
  spool file could not be written, if it could not: the runs then stay
  open in MLflow, and --resume runs their trials again);
* the writer reports each outage once (a warning) and retries: MLflow's
  own error log of each failed call from the writer's thread (a traceback
  per retry, thousands of lines in a long outage) is left out;
* a write addressed to a key no run was started for is a caller's bug, not
  an outage: it is dropped with an error in the log (`dropped` counts them)
  and the writes queued behind it go on (retried, it would hold back every
  later write of the comparison until the driver ends).

Runs are addressed by our own keys (e.g. "sel/0042"); the writer maps them
to MLflow run ids once the runs exist, so callers never wait for MLflow.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .checks import (TrackingUnavailable, check_sqlite_store, check_tracking, check_writable,  # noqa: F401 - part of this module's API
                     folder_lock, init_tracking, init_tracking_in_background, mlflow_said)
from .contract import MlflowTag, Tag, client, redact_uri, tag_equals

__all__ = ["NoRunForKey", "TrackingWriter", "TrackingUnavailable", "check_tracking", "check_writable", "check_sqlite_store",
           "folder_lock", "init_tracking", "init_tracking_in_background", "replay_spool"]

log = logging.getLogger(__name__)

MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100


def _first_line(error: BaseException) -> str:
    """An error in one line: MLflow's store errors carry the SQL and its parameters on the next lines."""
    text = str(error).strip().splitlines()
    inner = text[0] if text else type(error).__name__
    return inner[:300]


class _ThreadFilter(logging.Filter):
    """Leave out the records logged from the given threads (see _quiet_in_thread)."""

    def __init__(self):
        super().__init__()
        self.threads: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName not in self.threads


_QUIET = _ThreadFilter()
# MLflow's loggers that log a failed store call with its traceback before raising it (the writer retries and says so)
_MLFLOW_CALL_LOGGERS = ("mlflow.store.db.utils", "mlflow.utils.rest_utils", "mlflow.store.tracking.sqlalchemy_store")


def _quiet_in_thread(name: str) -> None:
    """MLflow's error log of a call that fails in the writer's thread `name` is left out: the writer
    reports the outage itself, once, and retries (module docstring); other threads' records stay."""
    _QUIET.threads.add(name)
    for logger in _MLFLOW_CALL_LOGGERS:
        if _QUIET not in logging.getLogger(logger).filters:
            logging.getLogger(logger).addFilter(_QUIET)


class NoRunForKey(RuntimeError):
    """A write addressed to a key that no run was started (or adopted) for."""

    def __init__(self, key: str):
        super().__init__(f"no MLflow run started for {key!r}")
        self.key = key


@dataclass
class _Op:
    kind: str  # start | metrics | tags | params | end | reopen | artifact
    key: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "key": self.key, "data": self.data}, default=str)


class TrackingWriter:
    """The driver's single MLflow writer (see module docstring)."""

    def __init__(self, tracking_uri: str, experiment: str, spool_path: str | Path | None = None, retry_seconds: float = 600.0,
                 linger: float = 0.2):
        self.uri = tracking_uri
        self.linger = linger  # seconds a flush of metrics waits for more (module docstring); 0: none
        self.experiment = experiment
        self.spool_path = Path(spool_path) if spool_path else None
        self.retry_seconds = retry_seconds
        self.client = client(tracking_uri)
        self.experiment_id = self._first_request()
        self.run_ids: dict[str, str] = {}
        self._queue: "queue.Queue[_Op | None]" = queue.Queue()
        self._pending: list[_Op] = []
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = False
        self._wake = threading.Event()  # set by close(): a backoff wait ends at once
        self._failing = False  # in an outage (warned once)
        self.failures = 0  # calls that failed and were retried
        self.dropped: dict[str, int] = {}  # key -> writes dropped because no run was started for it
        self.outage_seconds = 0.0
        self.last_error: str | None = None  # why the last failed call failed
        self.spool_error: str | None = None  # why close() could not save the leftover writes
        self._thread = threading.Thread(target=self._loop, name=f"mlflow-writer-{id(self):x}", daemon=True)
        _quiet_in_thread(self._thread.name)
        self._thread.start()

    # ------------------------------------------------------------ public API
    def _first_request(self) -> str:
        """The experiment's id (made where there is none): the store's first request, before anything is written.  What
        MLflow refuses it with (credentials it cannot read or the store does not take, no permission to make the
        experiment) is one line naming the store, not a traceback of MLflow's."""
        from mlflow.exceptions import MlflowException

        try:
            return self._ensure_experiment()
        except MlflowException as e:
            said = mlflow_said(e)
            if self.uri.lower().startswith(("http://", "https://")) and "error code 404 " in said:  # (MLflow's words, 3.17)
                said = said.rstrip(". ") + ("; nothing at that URL answers MLflow's REST API: it is not an MLflow tracking server (another "
                         "service's port?), or the server is under another path")
            raise TrackingUnavailable(f"MLflow store {redact_uri(self.uri)}: the first request (experiment {self.experiment!r}) "
                                      f"was refused: {said}") from None

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
        # MLflow's own context tags (user, source, git commit), as its fluent API sets them, then ours
        tags = {**context_tags(), **(tags or {})}
        self._put(_Op("start", key, {"name": name, "parent": parent, "tags": tags, "params": params or {}, "time": _now_ms()}))

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
        self._wake.set()
        self._queue.put(None)
        # the thread ends within a few seconds once stopped (a failing store: after one last try); one stuck in a
        # call to the store is waited for, so that nothing it holds is both applied and saved
        self._thread.join(timeout=60.0)
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
            try:
                self.spool_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.spool_path, "a") as f:
                    f.write(json.dumps({"kind": "run_ids", "key": "", "data": self.run_ids}) + "\n")
                    for op in leftover:
                        f.write(op.to_json() + "\n")
            except OSError as e:  # (e.g. the same full disk): said by the caller, not raised over why the driver stopped
                self.spool_error = f"{type(e).__name__}: {e.strerror or e}"
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
                if op.kind == "metrics" and self.linger > 0:
                    time.sleep(self.linger)  # let concurrent trials' epochs gather into fewer, larger batches
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
                self._failing = False
            except Exception as e:  # noqa: BLE001 - retried: any failure of the store
                self.failures += 1
                if not self._outage(e) and self._stop:
                    return  # closing, and the store still refuses: close() saves what is pending
                continue
            if self._queue.empty():
                self._idle.set()
            if self._stop and self._queue.empty():
                return

    def _outage(self, error: Exception) -> bool:
        """Back off and retry the pending operations, for up to retry_seconds
        (once the writer is closing, for 2 s); True once they went through.
        An outage is said once, in one line, however many retries it takes."""
        self.last_error = _first_line(error)
        if not self._failing:
            self._failing = True
            log.warning("MLflow write failed (%s: %s); retrying", type(error).__name__, self.last_error)
        start = time.monotonic()
        delay = 0.5
        while not self._stop or time.monotonic() - start < 2.0:
            before = time.monotonic()
            if self._stop:
                time.sleep(0.5)
            else:
                self._wake.wait(delay)
            self.outage_seconds += time.monotonic() - before
            delay = min(delay * 2, 10.0)
            try:
                self._apply_pending()
                self._failing = False
                return True
            except Exception as e:  # noqa: BLE001
                self.failures += 1
                self.last_error = _first_line(e)
                if time.monotonic() - start > self.retry_seconds:
                    log.error("MLflow unreachable for %.0fs; keeping %d operations for the spool file", time.monotonic() - start, len(self._pending))
                    return False
                log.debug("MLflow still failing: %s", e)
        return False

    def _apply_pending(self) -> None:
        """Apply pending ops in order; successful ones are removed as they go."""
        while self._pending:
            op = self._pending[0]
            if op.kind == "metrics":
                # batch this run's metric ops, up to its first op of another kind (other runs' ops keep their order)
                rows, taken = [], []
                for i, other in enumerate(self._pending):
                    if other.key != op.key:
                        continue
                    if other.kind != "metrics" or len(rows) >= MAX_METRICS_PER_BATCH:
                        break
                    rows.extend(other.data["rows"])
                    taken.append(i)
                try:
                    self._log_metric_rows(op.key, rows)
                except NoRunForKey as e:
                    self._drop(e, taken)
                    continue
                self._remove(taken)
                continue
            try:
                self._apply(op)
            except NoRunForKey as e:
                self._drop(e, 1)
                continue
            self._pending.pop(0)

    def _remove(self, indices: list[int]) -> None:
        """Take these (ascending) positions out of the pending writes."""
        if indices == list(range(len(indices))):
            del self._pending[: len(indices)]
            return
        gone = set(indices)
        self._pending = [op for i, op in enumerate(self._pending) if i not in gone]

    def _drop(self, error: "NoRunForKey", n: "int | list[int]") -> None:
        """Drop pending writes (the first `n`, or those at the positions `n`):
        their run was never started (see the module docstring)."""
        indices = list(range(n)) if isinstance(n, int) else n
        ops = [self._pending[i] for i in indices]
        self._remove(indices)
        first = error.key not in self.dropped
        self.dropped[error.key] = self.dropped.get(error.key, 0) + len(ops)
        if first:
            log.error("MLflow write dropped: %s (%s write%s; the key's later writes are dropped the same way)",
                      error, ops[0].kind, "s" if len(ops) > 1 else "")

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
            raise NoRunForKey(key) from None

    def _apply(self, op: _Op) -> None:
        from mlflow.entities import Param, RunTag

        d = op.data
        if op.kind == "start":
            if op.key in self.run_ids:
                return  # already created (a retry after a timeout that did succeed is not possible: we look it up below)
            tags = {k: str(v) for k, v in d["tags"].items()}
            tags[Tag.KEY] = op.key
            if d["parent"]:
                tags["mlflow.parentRunId"] = self._require(d["parent"])
            # only a retried create can have reached the server already
            existing = self._find_by_key(op.key, tags.get(Tag.COMPARISON)) if d.get("attempted") else None
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
            filter_string=tag_equals((Tag.KEY, key), (Tag.COMPARISON, comparison)),
            max_results=1,
        )
        return runs[0].info.run_id if runs else None


def _param_str(v: Any) -> str:
    s = "" if v is None else str(v)
    return s[:6000]


_CONTEXT: dict[str, str] | None = None


def context_tags() -> dict[str, str]:
    """MLflow's standard context tags for every run this process starts:
    `mlflow.user`, `mlflow.source.name` (the command line), `mlflow.source.type`
    LOCAL, and `mlflow.source.git.commit` when this code is a git checkout
    (read once; no commit when git or the checkout is absent)."""
    global _CONTEXT
    if _CONTEXT is None:
        import getpass
        import os
        import subprocess
        import sys

        prog = os.path.basename(sys.argv[0] or "python")
        prog = "awnn" if prog in ("awnn", "cli.py") else prog  # the console script, or python -m search.cli
        out = {MlflowTag.SOURCE_TYPE: "LOCAL", MlflowTag.SOURCE_NAME: " ".join([prog, *sys.argv[1:3]])}
        try:
            out[MlflowTag.USER] = getpass.getuser()
        except Exception:  # noqa: BLE001 - no user name in this environment (a container without one)
            pass
        try:
            root = Path(__file__).resolve().parent.parent
            commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
            if commit.returncode == 0 and len(commit.stdout.strip()) == 40:
                out[MlflowTag.GIT_COMMIT] = commit.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
        _CONTEXT = out
    return dict(_CONTEXT)


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
        if op.kind == "start":  # a replay cut short (Ctrl-C, a kill: the file stays) may have created it: looked up first
            op.data["attempted"] = True
        if op.kind == "metrics":
            op.data["rows"] = [tuple(r) for r in op.data["rows"]]
        writer._put(op)
        n += 1
    left = writer.close(timeout=120.0)
    if not left:
        path.unlink()
    return n
