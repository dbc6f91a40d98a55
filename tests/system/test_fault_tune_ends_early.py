"""Ray Tune returns before every trial ran (a fault injected in the driver:
its Tuner gets fewer samples than the comparison has trials, as when the
cluster ends trials without telling the driver).  The driver must not close
the trials it never ran as failed and report a finished comparison with
exit 0: it fails with one line naming them (exit 2), closes its runs as
failed, and `--resume` runs exactly the missing trials."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, run_awnn
from fault_helpers import sweep_args, trial_runs, write_inputs

pytestmark = pytest.mark.slow

# the driver, with Tune's num_samples capped at 2 (everything else real: Ray, MLflow, the CLI)
CAPPED_DRIVER = """
import sys
import search.sweep as sweep
real = sweep.run_plan
def capped(searcher, num_samples, *args, **kwargs):
    return real(searcher, min(num_samples, 2), *args, **kwargs)
sweep.run_plan = capped
from search.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.fault
@pytest.mark.timeout(300)
def test_tune_ending_before_every_trial_ran_fails_the_driver_and_resume_runs_the_rest(tmp_path):
    grids, budget = write_inputs(tmp_path, epochs=5)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"])
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    p = subprocess.run([sys.executable, "-c", CAPPED_DRIVER, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn sweep: error:")]
    assert len(errors) == 1 and "Ray Tune ended before 1 trial(s) of awnn/selection ran (sel-0002)" in errors[0], out[-4000:]
    assert "--resume" in errors[0]

    runs = trial_runs(tracking)
    assert sorted(r.data.tags["awnn.trial_key"] for r in runs) == ["sel-0000", "sel-0001"]  # nothing invented for sel-0002
    assert all(r.info.status == "FINISHED" and r.data.tags["awnn.status"] == "ok" for r in runs)
    c = MlflowClient(tracking)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    others = [r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("awnn.kind") != "trial"]
    assert {(r.data.tags["awnn.kind"], r.info.status, r.data.tags["awnn.state"]) for r in others} == {
        ("comparison", "FAILED", "failed"), ("sweep", "FAILED", "failed")}

    resumed = run_awnn([*args, "--resume"], cwd=tmp_path, check=True)
    assert "2 trials already finished" in resumed.stderr, resumed.stderr[-3000:]
    runs = trial_runs(tracking)
    assert sorted(r.data.tags["awnn.trial_key"] for r in runs) == ["ass-01", "sel-0000", "sel-0001", "sel-0002"]  # each once
    assert all(r.info.status == "FINISHED" and r.data.tags["awnn.status"] == "ok" for r in runs)
    others = [r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("awnn.kind") != "trial"]
    assert {(r.info.status, r.data.tags["awnn.state"]) for r in others} == {("FINISHED", "finished")}
