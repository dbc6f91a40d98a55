"""A sweep whose driver (`awnn sweep`) is killed with SIGKILL mid-sweep is
finished by the same command with `--resume`: no config runs twice to
completion, none is missing, the runs the dead driver left open are closed as
`interrupted`, a re-run trial continues from its checkpoint, and the
analysis counts each config once."""
from __future__ import annotations

import time

from pathlib import Path

import pytest

from conftest import run_awnn
from fault_helpers import Driver, a_finished_trial_and_a_running_ones_checkpoint, checkpoints, epochs_lasting, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = pytest.mark.slow


def _epochs() -> int:
    """Trials of ~3 s: the kill lands on one with epochs to go (400 epochs were 4 s once, 2.3 s by 2026-11-29)."""
    return epochs_lasting(3.0, at_least=400)


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_fault_driver_killed_then_resume_finishes_each_config_once(tmp_path):
    grids, budget = write_inputs(tmp_path, _epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"])
    t0 = time.monotonic()
    driver = Driver(args, cwd=tmp_path)
    try:
        # kill when one trial has finished and another has a checkpoint
        def ready():
            return a_finished_trial_and_a_running_ones_checkpoint(tracking, tmp_path / "results", "awnn", _epochs() // 2)
        wait_for(ready, 180, "a finished trial and a checkpoint of a running one", driver.proc, interval=0.2)
        driver.kill()
        print(f"killed after {time.monotonic() - t0:.1f} s")
    finally:
        driver.cleanup()
    before = trial_runs(tracking)
    finished_before = {r.data.tags["awnn.trial_key"] for r in before if r.data.tags["awnn.status"] == "ok"}
    open_before = {r.info.run_id: r.data.tags["awnn.trial_key"] for r in before if r.data.tags["awnn.status"] == "running"}
    assert finished_before and open_before
    # the open trials that left a complete checkpoint: each must continue from one
    left = {p.parent.name for p in checkpoints(tmp_path / "results")}
    with_ckpt = {key for key in open_before.values() if f"awnn-{key}" in left}
    assert with_ckpt, (open_before, sorted(left))

    p = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=240, check=True)
    print(f"resumed sweep done after {time.monotonic() - t0:.1f} s")
    assert "resume: comparison" in p.stderr, p.stderr[-2000:]

    runs = trial_runs(tracking)
    keys = {"sel-0000", "sel-0001", "sel-0002", "ass-01"}
    by_key: dict[str, list] = {}
    for r in runs:
        by_key.setdefault(r.data.tags["awnn.trial_key"], []).append(r)
    assert set(by_key) == keys
    for key, rs in by_key.items():
        done = [r for r in rs if r.data.tags["awnn.status"] != "interrupted"]
        assert len(done) == 1, (key, [r.data.tags["awnn.status"] for r in rs])  # exactly once to completion
        assert done[0].data.tags["awnn.status"] == "ok" and done[0].info.status == "FINISHED"
        assert done[0].data.metrics["epochs_run"] == _epochs()
    for key in finished_before:  # finished trials were not run again
        assert len(by_key[key]) == 1
    by_id = {r.info.run_id: r for r in runs}
    for run_id, key in open_before.items():  # the dead driver's open runs are closed as interrupted
        assert by_id[run_id].data.tags["awnn.status"] == "interrupted"
        assert by_id[run_id].info.status == "KILLED"
    # a trial that had a checkpoint continued from it: its new run starts past epoch 1
    # (tag: the checkpoint it really continued from; "none: ..." when no file there was readable)
    resumed = [r for r in runs if r.data.tags.get("awnn.resumed_from") and not r.data.tags["awnn.resumed_from"].startswith("none")]
    assert resumed, "no re-run trial resumed from a checkpoint"
    assert with_ckpt <= {r.data.tags["awnn.trial_key"] for r in resumed}, (with_ckpt, [(r.data.tags["awnn.trial_key"], r.data.tags.get("awnn.resumed_from")) for r in runs])
    for r in resumed:
        assert (Path(r.data.tags["awnn.resumed_from"]) / "trainer.pt").is_file(), r.data.tags["awnn.resumed_from"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking)
    for r in resumed:
        steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, "val_acc"))
        assert steps[0] > 1 and steps[-1] == _epochs(), steps[:3]

    # one comparison, its sweeps finished; the analysis counts each config once
    from tracking.analysis import cost_table, load_comparison

    data = load_comparison(tracking)
    assert data.comparison["state"] == "finished"
    table = cost_table(data)
    sel = table[(table["strategy"] == "awnn") & (table["phase"] == "selection")].iloc[0]
    assert sel["configs"] == 3 and sel["trials"] == 3 and sel["ok"] == 3
    assert sel["interrupted_runs"] == len([k for k in open_before.values() if k.startswith("sel-")])
    trials = data.trials()
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
