"""`awnn study`: a paper claim checked with real AWNN sweeps (real Ray, real
MLflow).  Its flags, refused before anything starts, are checked in
tests/search/test_study.py."""
from __future__ import annotations


import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn, strict_json

pytestmark = pytest.mark.slow


def test_study_fig4_runs_its_grid_logs_the_profile_and_prints_a_verdict(tmp_path):
    p = run_awnn(["study", "fig4", "--budget", "smoke", "--num-cpus", "2"], cwd=tmp_path, check=True)
    out = strict_json(p.stdout.strip().splitlines()[-1])
    assert out["claim"] == "fig4" and out["profiles"] == ["authors"]
    (row,) = out["rows"]
    assert row["task"] == "spiralhard" and row["profile"] == "authors"
    configs = sorted((s["config"]["rate"], s["config"]["batch_size"]) for s in row["selection"])
    assert configs == [(r, b) for r in (0.005, 0.01, 0.05) for b in (32, 128)]
    verdict = out["verdicts"]["authors"]
    finals = verdict["final_widths"]
    assert len(finals) == 6 and all(w >= 1 for w in finals)
    assert verdict["max_over_min"] == max(finals) / min(finals)
    assert verdict["widths_converge"] == (max(finals) / min(finals) <= 1.5)
    assert "awnn study fig4" in p.stdout and "rate 0.005, batch 32" in p.stdout
    # logged like any sweep: one trial run per config plus the smoke budget's 2 re-training runs, each with the profile
    c = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = c.get_experiment_by_name("awnn-spiralhard")
    trials = [r for r in c.search_runs([exp.experiment_id], max_results=1000) if r.data.tags.get("awnn.kind") == "trial"]
    assert len(trials) == 6 + 2
    assert {t.data.params["awnn_profile"] for t in trials} == {"authors"}
    assert {float(t.data.params["sigma_theta"]) for t in trials} == {100.0}
