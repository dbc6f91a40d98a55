"""The cost rule of tracking/callback.py ("Cost") without Ray: a CPU trial's
device_hours are its CPU seconds capped at wall x CPUs, a GPU trial's its
wall x GPU share, an attempt that reported no CPU time counts its wall
time; wall_device_hours keeps the wall figure.  Trial reports through the
callback's hooks, a real TrackingWriter on a real MLflow SQLite store.  And
the warning of tracking/caveats.py for trials that got under half their CPUs."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from tracking.callback import TrialTracker
from tracking.caveats import CPU_BUSY, caveats, cpu_time_caveat
from tracking.contract import Metric, Tag, client
from tracking.store import TrackingWriter, init_tracking

CONFIG = {"task": "doublemoon", "model": "fixed", "optimizer": "adam", "batch_size": 32, "hidden_layers": 1, "width": 8, "activation": "relu",
          "lr": 0.01, "split": "inner", "epochs": 2, "patience": 0, "seed": 0, "data_seed": 0}


def _spec(key: str, **extra) -> dict:
    return {"key": key, "phase": "selection", "index": 0, "config": CONFIG, "strategy": "fixed", "family": "fixed", "repeat": 0,
            "resume_from": None, "report_at": [], "members": [], "done": [], **extra}


@pytest.fixture
def store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    writer.start_run("cmp", name="compare-x", tags={Tag.KIND: "comparison"})
    writer.start_run("fixed/selection", name="fixed-selection", parent="cmp", tags={Tag.KIND: "sweep"})
    finished: dict[str, dict] = {}

    def tracker(cpus: float, gpus: float) -> TrialTracker:
        return TrialTracker(writer, tags={Tag.COMPARISON: "cmp-1"}, cpus_per_trial=cpus, gpus_per_trial=gpus,
                            on_finished=lambda k, o: finished.__setitem__(k.rsplit("/", 1)[1], o))

    def metrics() -> dict[str, dict]:
        assert writer.flush(timeout=60)
        runs = client(uri).search_runs([writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")
        return {r.data.tags[Tag.TRIAL_KEY]: r.data.metrics for r in runs}

    yield SimpleNamespace(tracker=tracker, finished=finished, metrics=metrics)
    writer.close(timeout=30)


def _report(t: TrialTracker, trial, attempt: str, start: float, wall: float, cpu: float | None, final: dict | None = None) -> None:
    result = {"epoch": 1, "attempt": attempt, "attempt_start_seconds": start, "train_seconds": wall, "best_val_acc": 0.5,
              "epochs": [{"epoch": 1, "val_acc": 0.5}], "final": final}
    if cpu is not None:
        result["attempt_cpu_seconds"] = cpu
    t.on_trial_result(0, [], trial, result)


FINAL = {"status": "ok", "best_val_acc": 0.5, "epochs_run": 1}


def test_cpu_trial_device_hours_are_its_cpu_time_capped_at_wall_times_cpus(store):
    t = store.tracker(cpus=2, gpus=0)
    loaded, retried, old, over = (SimpleNamespace(config={"spec": _spec(k)}) for k in ("sel-0000", "sel-0001", "sel-0002", "sel-0003"))
    for trial in (loaded, retried, old, over):
        t.on_trial_start(0, [], trial)
    _report(t, loaded, "a1", 0.0, 100.0, 60.0, FINAL)  # 100 s on 2 CPUs, 60 CPU-s: a loaded machine
    _report(t, retried, "a1", 0.0, 40.0, 70.0)  # first attempt dies after 40 s ...
    _report(t, retried, "a2", 30.0, 90.0, 110.0, FINAL)  # ... the retry continues from 30 s: 60 s more
    _report(t, old, "a1", 0.0, 50.0, None, FINAL)  # no CPU time reported: the wall figure
    _report(t, over, "a1", 0.0, 10.0, 25.0, FINAL)  # more CPU time than wall x CPUs (threads of its own): capped
    for trial in (loaded, retried, old, over):
        t.on_trial_complete(0, [], trial)
    m = store.metrics()
    expect = {"sel-0000": (100.0, 60.0, 60.0), "sel-0001": (100.0, 180.0, 180.0), "sel-0002": (50.0, None, 100.0), "sel-0003": (10.0, 25.0, 20.0)}
    for key, (wall, cpu, counted) in expect.items():
        got = m[key]
        assert got[Metric.COMPUTE_SECONDS] == pytest.approx(wall) and got[Metric.WALL_DEVICE_HOURS] == pytest.approx(wall * 2 / 3600), key
        assert got[Metric.DEVICE_HOURS] == pytest.approx(counted / 3600) and got[Metric.GPU_HOURS] == 0.0, key
        assert got.get(Metric.CPU_SECONDS) == (None if cpu is None else pytest.approx(cpu)), key
        assert store.finished[key][Metric.DEVICE_HOURS] == pytest.approx(counted / 3600), key  # the protocol sees the same figure


def test_gpu_trial_device_hours_stay_wall_times_gpu_share(store):
    t = store.tracker(cpus=1, gpus=0.5)
    trial = SimpleNamespace(config={"spec": _spec("sel-0000")})
    t.on_trial_start(0, [], trial)
    _report(t, trial, "a1", 0.0, 360.0, 30.0, FINAL)  # the GPU did the work: CPU time says nothing about it
    t.on_trial_complete(0, [], trial)
    got = store.metrics()["sel-0000"]
    assert got[Metric.DEVICE_HOURS] == pytest.approx(0.05) and got[Metric.GPU_HOURS] == pytest.approx(0.05)
    assert got[Metric.WALL_DEVICE_HOURS] == pytest.approx(0.05) and got[Metric.CPU_SECONDS] == pytest.approx(30.0)


def test_fused_members_and_interrupted_trials_follow_the_same_rule(store):
    t = store.tracker(cpus=1, gpus=0)
    members = [_spec("sel-0000"), _spec("sel-0001")]
    group = SimpleNamespace(config={"spec": _spec("fuse-sel-0000", members=members)})
    t.on_trial_start(0, [], group)
    part = lambda wall, cpu, final=None: {"epochs": [{"epoch": 1, "val_acc": 0.5}], "best_val_acc": 0.5, "train_seconds": wall,  # noqa: E731
                                          "attempt_start_seconds": 0.0, "attempt_cpu_seconds": cpu, "epoch": 1, "final": final}
    t.on_trial_result(0, [], group, {"attempt": "g1", "epoch": 1, "epochs": [], "final": None, "best_val_acc": 0.5,
                                     "members": {"sel-0000": part(20.0, 8.0, FINAL), "sel-0001": part(20.0, 8.0)}})
    t.interrupt_open()  # the driver stops with sel-0001 still training
    m = store.metrics()
    for key in ("sel-0000", "sel-0001"):
        assert m[key][Metric.CPU_SECONDS] == pytest.approx(8.0) and m[key][Metric.DEVICE_HOURS] == pytest.approx(8.0 / 3600), key
        assert m[key][Metric.WALL_DEVICE_HOURS] == pytest.approx(20.0 / 3600), key


def _runs(rows) -> pd.DataFrame:
    cols = ["strategy", "phase", "trial_key", "cpu_seconds", "wall_device_hours", "gpu_hours"]
    return pd.DataFrame(rows, columns=cols)


def test_caveat_counts_cpu_trials_that_got_under_half_their_cpus():
    h = 100.0 / 3600  # 100 wall-seconds x CPUs
    runs = _runs([
        ("fixed", "selection", "sel-0000", 95.0, h, 0.0),
        ("fixed", "selection", "sel-0001", 30.0, h, 0.0),  # loaded
        ("fixed", "selection", "sel-0001", 40.0, h, 0.0),  # its second run (resumed): one trial
        ("awnn", "selection", "sel-0000", 45.0, h, 0.0),  # loaded
        ("awnn", "assessment", "ass-00", 5.0, h, h),  # a GPU trial: not judged by CPU time
        ("awnn", "assessment", "ass-01", math.nan, h, 0.0),  # no CPU time recorded (an older store)
    ])
    line = cpu_time_caveat(runs)
    assert line.startswith(f"2 of 3 CPU trials used less than {100 * CPU_BUSY:.0f}%") and "(median 40%)" in line
    assert "machine was loaded or the trials waited on I/O; device-hours use CPU time" in line
    assert caveats("quick", [0.9, 0.8], runs=runs) == [line]
    assert cpu_time_caveat(runs.iloc[[0, 4, 5]]) is None and cpu_time_caveat(runs.iloc[:0]) is None
    assert caveats("quick", [0.9, 0.8]) == []  # without the runs: not checked
