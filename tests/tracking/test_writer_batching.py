"""The MLflow writer's metric batches (tracking/store.py, issue #30): one run's
epochs queued between other runs' epochs go to MLflow in one `log_batch`,
never ahead of a write of their own run that is not a metric, and every
value lands, in order.  A real TrackingWriter on a real MLflow SQLite file;
the client's calls are counted by wrapping the real method."""
from __future__ import annotations

import pytest

from tracking.contract import client
from tracking.store import TrackingWriter, init_tracking

RUNS = ["sel/0", "sel/1", "sel/2"]
EPOCHS = 12


@pytest.fixture
def writer(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    w = TrackingWriter(uri, "awnn-batching", linger=0.0)
    for key in RUNS:
        w.start_run(key, name=key)
    assert w.flush(timeout=30)
    calls = []
    real = w.client.log_batch

    def counted(run_id, metrics=(), params=(), tags=(), **kw):
        calls.append((run_id, "metrics" if metrics else "tags" if tags else "params", len(metrics)))
        return real(run_id, metrics=metrics, params=params, tags=tags, **kw)

    w.client.log_batch = counted
    yield w, calls, uri
    w.close(timeout=30)


def test_interleaved_epochs_of_several_runs_go_in_one_batch_per_run(writer, monkeypatch):
    w, calls, uri = writer
    gate = threading_gate(w, monkeypatch)
    for epoch in range(1, EPOCHS + 1):  # concurrent trials: one epoch of each run in turn
        for i, key in enumerate(RUNS):
            w.log_metrics(key, [("val_acc", i + epoch / 100, epoch), ("train_loss", 1.0 / epoch, epoch)])
    gate.set()
    assert w.flush(timeout=30)
    metric_calls = [c for c in calls if c[1] == "metrics"]
    assert len(metric_calls) == len(RUNS), metric_calls  # one per run, where one per epoch was 36
    assert all(n == 2 * EPOCHS for _, _, n in metric_calls)
    mc = client(uri)
    for i, key in enumerate(RUNS):
        history = mc.get_metric_history(w.run_id(key), "val_acc")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [(e, i + e / 100) for e in range(1, EPOCHS + 1)]


def test_a_runs_metrics_never_pass_its_own_other_writes(writer, monkeypatch):
    w, calls, uri = writer
    gate = threading_gate(w, monkeypatch)
    a, b = w.run_id("sel/0"), w.run_id("sel/1")
    w.log_metrics("sel/0", [("val_acc", 0.1, 1)])
    w.log_metrics("sel/1", [("val_acc", 0.2, 1)])
    w.set_tags("sel/0", {"awnn.status": "stopping"})  # a's own write: its later metrics stay behind it
    w.log_metrics("sel/1", [("val_acc", 0.3, 2)])
    w.log_metrics("sel/0", [("val_acc", 0.4, 2)])
    gate.set()
    assert w.flush(timeout=30)
    order = [(run, kind) for run, kind, _ in calls]
    assert order == [(a, "metrics"), (b, "metrics"), (a, "tags"), (a, "metrics")], order
    assert [n for run, kind, n in calls if run == b] == [2]  # b's two epochs merged across a's tag write


def threading_gate(w: TrackingWriter, monkeypatch):
    """Make the writer's next flush wait for the returned event, with every op
    queued meanwhile pending at once (what a busy writer sees)."""
    import threading

    gate = threading.Event()
    real = w._apply_pending

    def gated():
        gate.wait(30)
        monkeypatch.setattr(w, "_apply_pending", real)
        # the ops queued while the gate was closed
        while True:
            try:
                op = w._queue.get_nowait()
            except Exception:  # noqa: BLE001 - queue.Empty
                break
            if op is None:
                w._stop = True
                break
            w._pending.append(op)
        real()

    monkeypatch.setattr(w, "_apply_pending", gated)
    return gate


@pytest.mark.parametrize("spool", ["file", "/dev/full"])
def test_a_store_that_refuses_writes_is_said_once_and_close_saves_what_it_holds_never_applying_it_after(tmp_path, caplog, spool):
    """A store that refuses every write (a full disk: SQLite's 'database or
    disk is full'): the outage is one warning of one line, however many
    retries; close() stops the writer thread and saves what it holds to the
    spool file, and the thread applies nothing after that (applied and
    saved, a replay would write it twice); `replay_spool` then applies it.
    A spool file that cannot be written (/dev/full: ENOSPC) is said in
    `spool_error`, not raised."""
    import logging
    import time

    from mlflow.exceptions import MlflowException

    from tracking.store import replay_spool

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    path = tmp_path / "pending.jsonl" if spool == "file" else "/dev/full"
    w = TrackingWriter(uri, "awnn-refused", spool_path=path, linger=0.0)
    for key in RUNS:
        w.start_run(key, name=key)
    assert w.flush(timeout=30)
    real, calls, refuse = w.client.log_batch, [], [True]

    def refusing(run_id, metrics=(), **kw):
        calls.append(run_id)
        if refuse[0]:
            raise MlflowException("(sqlite3.OperationalError) database or disk is full\n[SQL: INSERT INTO latest_metrics ...]\n[parameters: ...]")
        return real(run_id, metrics=metrics, **kw)

    w.client.log_batch = refusing
    caplog.set_level(logging.WARNING, logger="tracking.store")
    for epoch in range(1, 4):
        for key in RUNS:
            w.log_metrics(key, [("val_acc", 0.5 + epoch / 10, epoch)])
    time.sleep(4)  # a few retries (0.5 s, 1 s, 2 s backoff)
    assert len(calls) >= 3
    leftover = w.close(timeout=1)
    assert sorted(leftover) == RUNS and not w._thread.is_alive()
    assert w.last_error == "(sqlite3.OperationalError) database or disk is full"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "database or disk is full" in warnings[0], warnings
    refuse[0] = False
    n = len(calls)
    time.sleep(1.5)
    assert len(calls) == n  # nothing applied after close: it is in the spool only
    if spool == "/dev/full":
        assert w.spool_error is not None and "No space left on device" in w.spool_error
        return
    assert w.spool_error is None
    replay_spool(path, uri, "awnn-refused")
    c = client(uri)
    for key in RUNS:
        run_id = w.run_ids[key]
        assert [(m.step, m.value) for m in sorted(c.get_metric_history(run_id, "val_acc"), key=lambda m: m.step)] == \
            [(e, pytest.approx(0.5 + e / 10)) for e in range(1, 4)]


def test_a_spool_replayed_twice_creates_each_run_once(tmp_path):
    """A replay cut short (Ctrl-C or a kill while --resume applied the spool: the file stays for the next one) had
    already created some runs; the next replay finds them by key instead of creating them again (two runs of one
    trial would each count)."""
    import json
    import shutil

    from tracking.store import replay_spool

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    spool = tmp_path / "pending.jsonl"
    ops = [{"kind": "run_ids", "key": "", "data": {}}]
    for key in RUNS:
        ops.append({"kind": "start", "key": key, "data": {"name": key, "parent": None, "params": {"lr": 0.1}, "time": 1_700_000_000_000,
                                                          "tags": {"awnn.comparison": "cmp-1", "awnn.kind": "trial"}}})
        ops.append({"kind": "metrics", "key": key, "data": {"rows": [["val_acc", 0.5, 1, 1_700_000_000_000]]}})
        ops.append({"kind": "end", "key": key, "data": {"status": "FINISHED", "time": 1_700_000_001_000}})
    spool.write_text("".join(json.dumps(op) + "\n" for op in ops))
    again = tmp_path / "again.jsonl"
    shutil.copy(spool, again)
    assert replay_spool(spool, uri, "awnn-replayed") == 3 * len(RUNS)
    assert not spool.exists()
    replay_spool(again, uri, "awnn-replayed")  # the same operations once more
    c = client(uri)
    runs = c.search_runs([c.get_experiment_by_name("awnn-replayed").experiment_id])
    assert sorted(r.data.tags["awnn.key"] for r in runs) == sorted(RUNS)
    for r in runs:
        assert r.info.status == "FINISHED"
        assert [(m.step, m.value) for m in c.get_metric_history(r.info.run_id, "val_acc")] == [(1, 0.5)]
