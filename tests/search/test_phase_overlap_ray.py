"""Overlapping phases on a real local Ray (2 CPUs) with a real MLflow: the
session's smoke comparison (fixed, awnn) as MLflow recorded it.  Without
Ray: tests/search/test_phase_overlap.py."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow


def _runs(uri: str):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return c.search_runs([exp.experiment_id], max_results=10000)


def test_the_next_arm_starts_in_a_phase_tail_and_retraining_after_its_selection(smoke_comparison):
    runs = _runs(smoke_comparison["tracking_uri"])
    sweeps = {r.data.tags["awnn.key"]: r for r in runs if r.data.tags.get("awnn.kind") == "sweep"}
    trials: dict[str, list] = {}
    for r in runs:
        if r.data.tags.get("awnn.kind") == "trial":
            trials.setdefault(f"{r.data.tags['awnn.arm']}/{r.data.tags['awnn.phase']}", []).append(r)
    assert set(sweeps) == set(trials) == {"fixed/selection", "fixed/assessment", "awnn/selection", "awnn/assessment"}
    assert all(s.info.status == "FINISHED" and s.data.tags["awnn.state"] == "finished" for s in sweeps.values())
    for arm in ("fixed", "awnn"):  # an arm's re-training starts after every selection trial of it ended
        sel, ass = trials[f"{arm}/selection"], trials[f"{arm}/assessment"]
        assert max(t.info.end_time for t in sel) <= min(t.info.start_time for t in ass), arm
        assert sweeps[f"{arm}/selection"].info.end_time <= sweeps[f"{arm}/assessment"].info.start_time, arm
    # the awnn arm's selection opened while fixed's last selection trials ran (before, it waited for all of them)
    assert sweeps["awnn/selection"].info.start_time < sweeps["fixed/selection"].info.end_time
    # each sweep's wall time spans its own trials, and an arm's two sweeps fit in the comparison's wall time
    cmp = next(r for r in runs if r.data.tags.get("awnn.kind") == "comparison")
    for key, s in sweeps.items():
        span = (max(t.info.end_time for t in trials[key]) - min(t.info.start_time for t in trials[key])) / 1000
        assert s.data.metrics["wall_seconds"] >= span * 0.9 - 0.1, key
    for arm in ("fixed", "awnn"):
        own = sweeps[f"{arm}/selection"].data.metrics["wall_seconds"] + sweeps[f"{arm}/assessment"].data.metrics["wall_seconds"]
        assert own <= cmp.data.metrics["wall_seconds"], arm
