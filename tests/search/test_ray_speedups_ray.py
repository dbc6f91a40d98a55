"""search/_ray_speedups.py: a comparison gives the same results with the
Ray speed-ups on and off (the session's `smoke_comparison` ran with them on).
Each patch and the switch are checked without Ray in
tests/search/test_ray_speedups.py."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from search import _ray_speedups as speedups

pytestmark = pytest.mark.slow


def _trial_results(uri: str) -> dict:
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], max_results=1000)
    trials = {r.data.tags["awnn.trial_key"] + "@" + r.data.tags["awnn.strategy"]: (r.data.tags["awnn.status"], r.data.metrics["best_val_acc"],
              r.data.metrics.get("test_acc"), r.data.tags.get("awnn.widths"))
              for r in runs if r.data.tags.get("awnn.kind") == "trial"}
    selected = {r.data.tags["awnn.strategy"]: r.data.tags["awnn.selected_key"] for r in runs
                if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags.get("awnn.phase") == "selection"}
    (cmp,) = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    return {"trials": trials, "selected": selected, "warm_pids": cmp.data.tags.get("awnn.warm_pids")}


def test_comparison_without_speedups_gives_the_same_results(smoke_comparison, tmp_path):
    """The session's smoke comparison ran with the speed-ups on; its AWNN arm
    run again with AWNN_RAY_SPEEDUPS=0 (the fixed grid's 30 trials left out
    to keep the suite short) runs every trial once with the same outcome,
    selects the same config, and warms no workers."""
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2", "--strategies", "awnn"], cwd=tmp_path,
                 env={speedups.SWITCH: "0"})
    assert p.returncode == 0, p.stderr[-3000:]
    off = _trial_results(f"sqlite:///{tmp_path / 'mlflow.db'}")
    on = _trial_results(smoke_comparison["tracking_uri"])
    on_awnn = {k: v for k, v in on["trials"].items() if k.endswith("@awnn")}
    assert len(off["trials"]) == len(on_awnn) == 6 + 2
    assert off["trials"] == on_awnn
    assert off["selected"] == {"awnn": on["selected"]["awnn"]}
    assert on["warm_pids"] and not off["warm_pids"]
