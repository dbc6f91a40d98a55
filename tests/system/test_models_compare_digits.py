"""`awnn compare --task digits --budget smoke` end to end: the image path
(ResNet-20, fixed and adaptive classifier) through Ray Tune and MLflow."""
from __future__ import annotations

import pytest

pytest.importorskip("sklearn", reason="the digits task is scikit-learn's bundled data set")
from mlflow.tracking import MlflowClient  # noqa: E402

from conftest import run_awnn  # noqa: E402

pytestmark = pytest.mark.slow


def test_compare_digits_smoke_runs_end_to_end_with_head_widths(tmp_path):
    p = run_awnn(["compare", "--task", "digits", "--budget", "smoke", "--num-cpus", "2"], cwd=tmp_path, check=True)
    assert "digits" in p.stdout
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("awnn-digits")
    trials = [r for r in client.search_runs([exp.experiment_id], max_results=1000) if r.data.tags.get("awnn.kind") == "trial"]
    count = {}
    for t in trials:
        key = (t.data.tags["awnn.strategy"], t.data.tags["awnn.phase"])
        count[key] = count.get(key, 0) + 1
    # Table 4: 5 fixed classifier widths, 1 AWNN config; smoke: R = 2 re-training runs
    assert count == {("fixed", "selection"): 5, ("awnn", "selection"): 1, ("fixed", "assessment"): 2, ("awnn", "assessment"): 2}
    fixed_sel = [t for t in trials if t.data.tags["awnn.strategy"] == "fixed" and t.data.tags["awnn.phase"] == "selection"]
    assert sorted(int(t.data.params["width"]) for t in fixed_sel) == [0, 32, 128, 256, 512]
    for t in trials:
        m, params = t.data.metrics, t.data.params
        assert t.data.tags["awnn.status"] == "ok" and params["augment"] == "crop"
        assert int(m["epochs_run"]) == 2
        if t.data.tags["awnn.strategy"] == "awnn":
            assert m["width_head"] == m["width_total"] >= 1 and "rate_l0" in m
            assert len(client.get_metric_history(t.info.run_id, "width_head")) == 2  # one per epoch
        elif params["width"] == "0":
            assert m["width_total"] == 0 and "width_head" not in m  # a linear classifier
        else:
            assert m["width_head"] == m["width_total"] == int(params["width"])
