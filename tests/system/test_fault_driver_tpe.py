"""A TPE sweep whose driver is killed with SIGKILL is finished by `--resume`:
the Optuna study is reloaded from its RDB storage, a trial the dead driver
left running is re-run with the config TPE had given it (not a new draw),
every trial key completes exactly once, and the study ends up holding the
score of every finished trial."""
from __future__ import annotations

import json
import time
from collections import Counter

import optuna
import pytest

from conftest import run_awnn
from fault_helpers import Driver, a_finished_trial_and_a_running_ones_checkpoint, epochs_lasting, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = pytest.mark.slow

FIXED_GRID = """\
task: doublemoon
strategy: fixed
epochs: 100
retrain_runs: 1
fixed: {model: fixed, batch_size: 128, hidden_layers: 1, lr: 0.01}
grid:
  width: [8, 16, 32]
  activation: [relu, tanh]
"""


def _epochs() -> int:
    """~2.5 s a trial on one core (fixed 1 x 8..32 nets in the lean loop; at 100 epochs the whole sweep ended before
    the kill could land mid-trial, and 800 epochs, ~8 s once, were 1.6 s by 2026-11-29)."""
    return epochs_lasting(2.5, at_least=800, grid=FIXED_GRID)


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_fault_tpe_driver_killed_then_resume_keeps_the_study(tmp_path):
    grids, budget = write_inputs(tmp_path, _epochs(), grid=FIXED_GRID, strategy="fixed")
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, strategy="tpe", extra=["--num-cpus", "2", "--tpe-trials", "4", "--seed", "3"])
    driver = Driver(args, cwd=tmp_path)
    try:
        def ready():
            return a_finished_trial_and_a_running_ones_checkpoint(tracking, tmp_path / "results", "tpe", _epochs() // 2)
        wait_for(ready, 180, "a finished TPE trial and a checkpoint of a running one", driver.proc, interval=0.2)
        driver.kill()
    finally:
        driver.cleanup()
    before = trial_runs(tracking)
    open_before = {r.data.tags["awnn.trial_key"]: r for r in before if r.data.tags["awnn.status"] == "running"}
    assert open_before

    p = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=240, check=True)
    assert "resume: comparison" in p.stderr, p.stderr[-2000:]

    runs = trial_runs(tracking)
    sel = [r for r in runs if r.data.tags["awnn.phase"] == "selection"]
    finished = [r for r in sel if r.data.tags["awnn.status"] != "interrupted"]
    assert sorted(r.data.tags["awnn.trial_key"] for r in finished) == ["sel-0000", "sel-0001", "sel-0002", "sel-0003"]
    assert all(r.data.tags["awnn.status"] == "ok" and r.data.metrics["epochs_run"] == _epochs() for r in finished)
    for key, old in open_before.items():  # re-run with the config TPE drew for it, from its checkpoint
        if not key.startswith("sel-"):
            continue
        new = next(r for r in finished if r.data.tags["awnn.trial_key"] == key)
        # the config as the search gave it: a tag written with the run itself (the driver may die
        # between creating a run and logging its params, so an interrupted run can lack params)
        old_cfg, new_cfg = json.loads(old.data.tags["awnn.config"]), json.loads(new.data.tags["awnn.config"])
        assert (new_cfg["width"], new_cfg["activation"]) == (old_cfg["width"], old_cfg["activation"])
        assert (new.data.params["width"], new.data.params["activation"]) == (str(old_cfg["width"]), old_cfg["activation"])

    cid = runs[0].data.tags["awnn.comparison"]
    study = optuna.load_study(study_name=f"{cid}-tpe", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    told = Counter((str(t.params["width"]), t.params["activation"], round(t.value, 9)) for t in complete)
    ran = Counter((r.data.params["width"], r.data.params["activation"], round(r.data.metrics["best_val_acc"], 9)) for r in finished)
    assert told == ran
