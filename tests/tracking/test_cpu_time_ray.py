"""Device-hours measure the trial, not the machine's load (issue #31 item 3).

One real local Ray, the real trial function (search/trial.py,
search/fused_trial.py) and the real tracking callback writing to MLflow on
a SQLite file: the same config trained twice, the second time beside a
busy-loop process spinning on its core.  Its wall time (and
wall_device_hours) doubles; its CPU time, hence device_hours, does not.  A
fused group of two configs splits the group's CPU time equally, as it
splits its wall time."""
from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from search.fusion import fuse_specs
from search.protocol import TrialSpec
from search.trial import trainable
from search.tune import RunSettings, trial_settings, tune_environment
from tracking.callback import TrialTracker
from tracking.caveats import caveats
from tracking.contract import Metric, Tag, client
from tracking.reader import _run_frame
from tracking.store import TrackingWriter, init_tracking

pytestmark = pytest.mark.slow

# busy loops beside the contended trial, on its core: one halves its share of the core.  (More also make its CPU
# time grow: measured on a 2-core VM, 1: +2-11%, 2: +20-25%, 3: +25-40%; its wall time x2, x3-4, x4-7.)
SPINNERS = 1
CONFIG = {"task": "doublemoon", "model": "fixed", "optimizer": "adam", "batch_size": 32, "hidden_layers": 2, "width": 256, "activation": "relu",
          "lr": 0.01, "split": "inner", "epochs": 15, "patience": 0, "seed": 0, "data_seed": 0}


def _spec(key: str, index: int, **config) -> TrialSpec:
    return TrialSpec(key=key, phase="selection", index=index, config={**CONFIG, **config}, strategy="fixed", family="fixed")


@pytest.fixture
def local_ray(tmp_path, monkeypatch):
    """A local Ray of 1 CPU whose workers run at niceness 0, not Ray's 15: the
    busy loop and whatever else the machine runs then compete with the
    trial on equal terms (beside a nice-0 process, a niced trial barely runs
    whether the busy loop is there or not)."""
    monkeypatch.setenv("RAY_worker_niceness", "0")
    tune_environment()
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR", object_store_memory=96 * 1024 * 1024)
    try:
        yield tmp_path
    finally:
        ray.shutdown()


def test_cpu_trial_device_hours_ignore_a_busy_neighbour(local_ray):
    from ray import tune

    uri = f"sqlite:///{local_ray / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    writer.start_run("cmp", name="compare-cpu", tags={Tag.KIND: "comparison"})
    writer.start_run("fixed/selection", name="fixed-selection", parent="cmp", tags={Tag.KIND: "sweep"})
    tracker = TrialTracker(writer, tags={Tag.COMPARISON: "cmp-cpu", Tag.TASK: "doublemoon"}, cpus_per_trial=1, gpus_per_trial=0)
    # first a fused group of two configs (it also warms the worker up), then the same config quiet and beside a busy loop
    (group,) = fuse_specs([_spec("sel-0000", 0), _spec("sel-0001", 1, activation="tanh")], fuse=2)
    assert group.members  # the two configs are fusable: one stacked Ray trial
    quiet, busy = _spec("sel-0002", 2), _spec("sel-0003", 3)

    class Neighbours(tune.Callback):
        """Pins the trials' worker to one core once it reports, and keeps busy
        loops on that core, at the worker's niceness, for as long as the
        `busy` trial runs."""

        def __init__(self):
            self.procs, self.core, self.nice = [], None, 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if self.core is None:
                pid = int(result["pid"])
                self.core, self.nice = {max(os.sched_getaffinity(pid))}, os.getpriority(os.PRIO_PROCESS, pid)
                os.sched_setaffinity(pid, self.core)

        def on_trial_start(self, iteration, trials, trial, **info):
            if trial.config["spec"]["key"] != busy.key:
                return
            ctx = mp.get_context("spawn")
            self.procs = [ctx.Process(target=exec, args=("while True: pass",), daemon=True) for _ in range(SPINNERS)]
            for p in self.procs:
                p.start()
                os.sched_setaffinity(p.pid, self.core)
                os.setpriority(os.PRIO_PROCESS, p.pid, self.nice)

        def on_trial_complete(self, iteration, trials, trial, **info):
            if trial.config["spec"]["key"] == busy.key:
                self.halt()

        def halt(self):
            for p in self.procs:
                p.terminate()
                p.join(timeout=10)

    neighbours = Neighbours()
    settings = trial_settings(RunSettings(cpus_per_trial=1, report_interval=0.5, checkpoint_interval=1000))
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"spec": tune.grid_search([s.to_dict() for s in (group, quiet, busy)]), "settings": settings},
        tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=1, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(local_ray / "ray"), verbose=0, callbacks=[tracker, neighbours],
                                  failure_config=tune.FailureConfig(max_failures=0)),
    )
    try:
        tuner.fit()
    finally:
        neighbours.halt()
    assert neighbours.procs and not any(p.is_alive() for p in neighbours.procs)
    assert neighbours.nice == 0  # (RAY_worker_niceness took effect)
    assert writer.flush(timeout=60)
    runs = client(uri).search_runs([writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")
    writer.close(timeout=30)
    by_key = {r.data.tags[Tag.TRIAL_KEY]: r for r in runs}
    assert sorted(by_key) == ["sel-0000", "sel-0001", "sel-0002", "sel-0003"]
    assert by_key[quiet.key].data.tags[Tag.PID] == by_key[busy.key].data.tags[Tag.PID]  # one worker, pinned to the neighbours' core
    assert all(r.data.tags[Tag.STATUS] == "ok" for r in runs), {k: r.data.tags for k, r in by_key.items()}
    m = {k: r.data.metrics for k, r in by_key.items()}
    q, b = m[quiet.key], m[busy.key]
    seen = {k: (v[Metric.CPU_SECONDS], v[Metric.COMPUTE_SECONDS]) for k, v in m.items()}  # (CPU, wall) seconds, for a failure's message
    for v in m.values():  # CPU time, capped at wall x 1 CPU; the wall-based figure kept beside it
        assert v[Metric.CPU_SECONDS] > 0 and v[Metric.WALL_DEVICE_HOURS] == pytest.approx(v[Metric.COMPUTE_SECONDS] / 3600)
        assert v[Metric.DEVICE_HOURS] == pytest.approx(min(v[Metric.CPU_SECONDS], v[Metric.COMPUTE_SECONDS]) / 3600)
        assert v[Metric.GPU_HOURS] == 0.0
    # a fused group's members: equal shares of the group's CPU time (same epochs), as of its wall time
    g1, g2 = m["sel-0000"], m["sel-0001"]
    assert g1[Metric.CPU_SECONDS] == pytest.approx(g2[Metric.CPU_SECONDS]) and g1[Metric.COMPUTE_SECONDS] == pytest.approx(g2[Metric.COMPUTE_SECONDS])
    # the report's warning counts the trials that had less than half their core (the busy one has about half, and
    # the machine's other work may slow any of them): read back from the store
    frame = _run_frame(runs, ["fixed"], {"cpus_per_trial": 1.0, "gpus_per_trial": 0.0})
    low = sum(v[Metric.CPU_SECONDS] < 0.5 * v[Metric.COMPUTE_SECONDS] for v in m.values())
    lines = caveats("quick", [0.9], runs=frame)
    assert len(lines) == (1 if low else 0) and all(x.startswith(f"{low} of 4 CPU trials used less than 50%") for x in lines), (low, lines)
    assert np.isfinite(frame["cpu_seconds"]).all() and (frame["wall_device_hours"] >= frame["device_hours"]).all()
    # the rest needs a baseline that had at least about half its core (one busy loop beside it then takes a third of it
    # or more from the trial: 0.5 -> 0.33, below the 0.8x asked).  On a machine loaded from outside (a CI host at half
    # speed: quiet 0.68 CPU-s in 2.05 s, 33% of its core, the busy one 29%) the neighbour's share cannot be told from the
    # load's, and the measure is not taken: said (skipped, with the figures), not passed
    share = lambda v: v[Metric.CPU_SECONDS] / v[Metric.COMPUTE_SECONDS]  # noqa: E731
    if share(q) < 0.45:
        pytest.skip(f"no quiet baseline: the quiet trial had {share(q):.0%} of its core (the machine was loaded from outside): {seen}")
    # the neighbours really took the core: the busy trial got a clearly smaller share of it than the quiet one (its
    # wall-based figure grew); shares, not walls: on a loaded machine (the suite's other worker) the quiet trial's wall
    # grows too (a CI run: quiet 0.66 s CPU in 1.04 s, busy 0.66 s in 1.43 s)
    assert share(b) < 0.8 * share(q) and b[Metric.WALL_DEVICE_HOURS] > q[Metric.WALL_DEVICE_HOURS], seen
    assert b[Metric.CPU_SECONDS] < 0.75 * b[Metric.COMPUTE_SECONDS], seen
    # ... and its device-hours (CPU time) hardly did: time-slicing with the neighbours costs the trial cache refills, so
    # its CPU time may grow some (a CI run: 0.82 -> 1.08 CPU-s, 1.32x, while the wall grew 0.82 -> 2.14 s, 2.62x; a
    # fresh clone on 2026-12-02: 0.88 -> 1.33 CPU-s, 1.52x, while the wall grew 0.87 -> 2.63 s, 3.0x), but far less
    # than the wall-based figure: at most half the wall's growth (the measure: what a wall-based count would have
    # charged), and never twice the quiet trial's (a count that followed the wall would: one neighbour at the same
    # niceness halves the trial's share of the core)
    cpu_growth = b[Metric.DEVICE_HOURS] / q[Metric.DEVICE_HOURS]
    wall_growth = b[Metric.WALL_DEVICE_HOURS] / q[Metric.WALL_DEVICE_HOURS]
    assert 0.8 < cpu_growth < 2.0 and cpu_growth - 1 < 0.5 * (wall_growth - 1), seen
