"""Faults in fused trials (`--fuse`, issue #20): a group of fixed configs
trained as one stacked model in one Ray trial must recover per config as
single trials do.

* The group's worker process is killed (SIGKILL) mid-training: Tune retries
  the group from its last checkpoint; every config ends with one FINISHED
  run, its retry recorded, and its epochs continue (they do not start over).
* The driver is stopped (SIGTERM) mid-group, then `--resume`d: the group
  continues from its checkpoint (tag awnn.resumed_from), every config has
  one FINISHED run besides its interrupted one."""
from __future__ import annotations

import os
import signal

import pytest
from mlflow.tracking import MlflowClient

from fault_helpers import Driver, epochs_lasting, registered_checkpoint, sweep_args, trial_runs, wait_for, write_inputs
from tracking.contract import Tag

pytestmark = [pytest.mark.slow, pytest.mark.fault]

GRID = """\
task: doublemoon
strategy: fixed
epochs: 100
retrain_runs: 1
fixed: {model: fixed, batch_size: 64, hidden_layers: 1, width: 64, activation: relu}
grid:
  lr: [0.001, 0.003, 0.01, 0.03]
"""
MEMBERS = ["sel-0000", "sel-0001", "sel-0002", "sel-0003"]


def _epochs() -> int:
    """A group of four 1x64 nets on DoubleMoon trains for ~10 s on one core (an epoch of the group costs ~2 of one
    net's), so the fault lands mid-training.  400 epochs were 10 s once, 2.8 s by 2026-11-29: a loaded CI run's
    SIGTERM then came after the group had finished.  At ~8 s (2026-12-06, a fresh clone's make test) the group ended
    in 7 s before the wait saw a checkpoint of its first half: Ray keeps one checkpoint, so the wait's window closes
    once the group passes its half (`_group_running_with_checkpoint`, now its first two thirds)."""
    return epochs_lasting(5.0, at_least=500, grid=GRID)


def _checkpoint_before() -> int:
    """The epoch before which the fault's checkpoint must have been taken: its first two thirds, so a third of the
    group's training (~3 s) is left for the fault to land in, and the wait has ~6 s to see one (Ray keeps only the
    latest checkpoint, and each of the wait's polls reads MLflow and the checkpoint files)."""
    return 2 * _epochs() // 3


def _args(tmp_path, tracking):
    grids, budget = write_inputs(tmp_path, _epochs(), grid=GRID, strategy="fixed")
    return sweep_args(tmp_path, grids, budget, tracking, strategy="fixed", extra=["--fuse", "4", "--num-cpus", "1", "--max-failures", "2"])


def _group_running_with_checkpoint(tmp_path, tracking):
    """The group's four running runs, once Ray Tune holds a checkpoint of it taken in its first two thirds (fault_helpers'
    `registered_checkpoint`): the fault then lands while it trains, and a retry or resume continues from there."""
    runs = [r for r in trial_runs(tracking) if r.data.tags.get(Tag.GROUP) == "fuse-sel-0000" and r.data.tags.get(Tag.STATUS) == "running"]
    if len(runs) != 4 or not all(r.data.tags.get(Tag.PID) for r in runs):
        return None
    ckpt = registered_checkpoint(tmp_path / "results", "fixed-fuse-sel-0000", tracking, runs[0].info.run_id, before_epoch=_checkpoint_before())
    return runs if ckpt else None


def _steps(tracking, run_id, name="train_loss"):
    return sorted(m.step for m in MlflowClient(tracking).get_metric_history(run_id, name))


@pytest.mark.timeout(300)
def test_fault_fused_group_worker_killed_retried_from_checkpoint(tmp_path):
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    driver = Driver(_args(tmp_path, tracking), cwd=tmp_path)
    try:
        running = wait_for(lambda: _group_running_with_checkpoint(tmp_path, tracking), 180, "a fused group with a checkpoint",
                           driver.proc, interval=0.2, output=driver.output)
        pid = int(running[0].data.tags[Tag.PID])
        os.kill(pid, signal.SIGKILL)  # the Ray worker that trains the whole group
        rc = driver.wait(timeout=240)
        out = driver.output()
        assert rc == 0, out[-4000:]
    finally:
        driver.cleanup()
    runs = trial_runs(tracking)
    sel = {r.data.tags[Tag.TRIAL_KEY]: r for r in runs if r.data.tags[Tag.PHASE] == "selection"}
    assert sorted(sel) == MEMBERS and len([r for r in runs if r.data.tags[Tag.PHASE] == "selection"]) == 4, out[-4000:]  # one run each
    for key, r in sel.items():
        assert r.info.status == "FINISHED" and r.data.tags[Tag.STATUS] == "ok" and r.data.tags[Tag.GROUP] == "fuse-sel-0000"
        assert r.data.tags[Tag.RETRIES] == "1" and r.data.metrics["attempts"] == 2, key  # the lost attempt is counted
        assert r.data.metrics["epochs_run"] == _epochs()
        steps = _steps(tracking, r.info.run_id)
        assert steps[0] == 1 and steps.count(1) == 1, key  # continued from the checkpoint: epoch 1 was not trained again
        assert set(steps) == set(range(1, _epochs() + 1))
        assert r.data.metrics["compute_seconds"] >= r.data.metrics["train_seconds"] * 0.999
    assert any(r.data.tags[Tag.PID] != str(pid) for r in sel.values())  # finished by another worker


@pytest.mark.timeout(360)
def test_fault_fused_group_driver_stopped_then_resumed_from_group_checkpoint(tmp_path):
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = _args(tmp_path, tracking)
    driver = Driver(args, cwd=tmp_path)
    try:
        wait_for(lambda: _group_running_with_checkpoint(tmp_path, tracking), 180, "a fused group with a checkpoint",
                 driver.proc, interval=0.2, output=driver.output)
        driver.proc.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=120) == 130, driver.output()[-3000:]
    finally:
        driver.cleanup()
    stopped = [r for r in trial_runs(tracking) if r.data.tags[Tag.PHASE] == "selection"]
    assert {r.data.tags[Tag.STATUS] for r in stopped} == {"interrupted"} and len(stopped) == 4
    again = Driver(args + ["--resume"], cwd=tmp_path)
    try:
        rc = again.wait(timeout=240)
        out = again.output()
        assert rc == 0, out[-4000:]
    finally:
        again.cleanup()
    runs = [r for r in trial_runs(tracking) if r.data.tags[Tag.PHASE] == "selection"]
    finished = {r.data.tags[Tag.TRIAL_KEY]: r for r in runs if r.info.status == "FINISHED"}
    assert sorted(finished) == MEMBERS and len(runs) == 8, out[-4000:]  # each config: its interrupted run and one finished run
    for key, r in finished.items():
        assert r.data.tags[Tag.GROUP] == "fuse-sel-0000" and "fixed-fuse-sel-0000" in r.data.tags[Tag.RESUMED_FROM], key
        steps = _steps(tracking, r.info.run_id)
        assert steps[0] > 1 and steps[-1] == _epochs(), key  # the resumed run goes on from the checkpoint's epoch
