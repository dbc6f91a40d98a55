"""A trial's worker process is lost once more than --max-failures allows (an
OOM killer, a preempted or dying node, a crash): SIGKILL to the trial's own
process, on a local Ray, with --max-failures 0.

The loss is the environment's, not the config's: before, the trial was closed
`failed` like a config that raised, the sweep went on to select among the
others and exited 0 with a verdict short of that config, and `--resume`
(which re-runs nothing terminal) could never run it again.  Now the sweep
stops in one line (exit 2) naming the trial, the loss and --max-failures,
closes every trial in flight `interrupted`, counts none as a failure of its
config, and `--resume` finishes the comparison with every config once."""
from __future__ import annotations

import os
import signal

import pytest

from fault_helpers import Driver, epochs_lasting, resume_finishes, running_selection_trial, sweep_args, trial_runs, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def epochs() -> int:
    """Trials of ~3.5 s on this machine (fault_helpers.epochs_lasting; at least 300 epochs): the kill lands while the victim runs, in its first third."""
    return epochs_lasting(3.5, at_least=300)


@pytest.mark.timeout(420)
def test_a_trial_whose_worker_is_lost_past_max_failures_stops_the_sweep_and_resume_runs_it(tmp_path):
    grids, budget = write_inputs(tmp_path, epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--max-failures", "0", "--num-cpus", "2"])
    driver = Driver(args, cwd=tmp_path)
    try:
        victim = running_selection_trial(driver, tracking, before_epoch=epochs() // 3)
        os.kill(int(victim.data.tags["awnn.pid"]), signal.SIGKILL)
        rc = driver.wait(timeout=300)
        out = driver.output()
    finally:
        driver.cleanup()
    key = victim.data.tags["awnn.trial_key"]
    assert rc == 2, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn sweep: error:")]
    assert len(errors) == 1, out[-4000:]
    line = errors[0]
    assert f"trial awnn/selection/{key}: its worker process was lost 1 time (ActorDiedError" in line, line
    assert "--max-failures 0" in line and "none is counted as a failure of its config" in line and "--resume" in line, line
    assert "Traceback" not in out, out[-4000:]  # Ray Tune's "Trial task failed" in one line too (search/tune.py)

    runs = trial_runs(tracking)
    assert not [r for r in runs if r.data.tags.get("awnn.status") == "failed"], [(r.data.tags["awnn.trial_key"], r.data.tags["awnn.status"]) for r in runs]
    lost = [r for r in runs if r.data.tags["awnn.trial_key"] == key]
    assert len(lost) == 1 and (lost[0].info.status, lost[0].data.tags["awnn.status"]) == ("KILLED", "interrupted")
    assert "ActorDiedError" in lost[0].data.tags["awnn.last_error"]
    assert all(r.info.status != "RUNNING" for r in runs)  # the others in flight: interrupted too, none left open

    resume_finishes(args, tmp_path, tracking, epochs(), timeout=300)


@pytest.mark.timeout(420)
def test_rays_memory_monitor_killing_the_trials_stops_the_sweep_in_one_line_and_resume_runs_them(tmp_path):
    """Ray's memory monitor kills trial workers when the node's memory passes
    RAY_memory_usage_threshold (here 1%: at once).  A kill while the trial's
    actor starts made Ray Tune raise "Caught unexpected exception" out of its
    loop (before: a traceback, exit 1, the runs closed `failed`); a kill while
    it trains left no pickled error, so the trial ended `failed` like a
    config that raised.  Either way it is now a lost worker: one line, exit 2,
    the trials in flight interrupted, none failed, and `--resume` (the memory
    back) runs every config once."""
    grids, budget = write_inputs(tmp_path, 20)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--max-failures", "0", "--num-cpus", "2"])
    driver = Driver(args, cwd=tmp_path, env={"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"})
    try:
        rc = driver.wait(timeout=300)
        out = driver.output()
    finally:
        driver.cleanup()
    assert rc == 2, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn sweep: error:")]
    assert len(errors) == 1 and "OutOfMemoryError: " in errors[0] and "running low on memory" in errors[0], out[-4000:]
    assert "none is counted as a failure of its config" in errors[0] and "--resume" in errors[0], errors[0]
    assert "Traceback" not in out, out[-4000:]
    runs = trial_runs(tracking)
    assert not [r for r in runs if r.data.tags.get("awnn.status") == "failed"], [(r.data.tags["awnn.trial_key"], r.data.tags["awnn.status"]) for r in runs]
    assert all(r.info.status != "RUNNING" for r in runs)
    resume_finishes(args, tmp_path, tracking, 20, timeout=300)
