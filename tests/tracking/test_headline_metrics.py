"""The comparison run carries the report's headline numbers as metrics
(issues #17, #32): per arm `<arm>.total_device_hours`, `<arm>.test_acc_mean`
and `<arm>.test_acc_pct`, `<arm>.savings_vs_<baseline>`, ..., rounded as
the report shows them, so MLflow's runs table answers "AWNN vs the fixed
grid" without opening the report; the report folder is its artifact, the
baseline its tag `awnn.savings_baseline` and the verdict its description."""
from __future__ import annotations

import json

import pytest

from golden_report import GOLDEN
from tracking import contract as C
from tracking.summary import headline_metrics


def test_headline_metrics_are_the_summarys_numbers():
    summary = json.loads((GOLDEN / "summary.json").read_text())
    m = dict(headline_metrics(summary))
    assert all(C.is_metric(name) for name in m), [n for n in m if not C.is_metric(n)]
    assert m["fixed.total_device_hours"] == float(f"{summary['device_hours']['fixed']['total']:.4g}")  # rounded: no 16-digit values
    assert m["awnn.selection_device_hours"] == float(f"{summary['device_hours']['awnn']['selection']:.4g}")
    assert m["awnn.test_acc_mean"] == round(summary["test_acc_mean"]["awnn"], 4) and m["awnn.test_runs"] == 2
    assert m["awnn.test_acc_pct"] == 100.0 and m["awnn.test_acc_std_pct"] == 0.0  # in %, as the terminal and the report
    assert m["awnn.width_total"] == round(summary["strategies"]["awnn"]["width"]["total_mean"], 1)
    assert m["fixed.trials"] == 30 and m["awnn.trials"] == 6
    sv = summary["savings"]["awnn"]
    assert summary["baseline"] == "fixed"
    assert (m["awnn.savings_vs_fixed"], m["awnn.savings_vs_fixed_lo"], m["awnn.savings_vs_fixed_hi"]) == (sv["selection"], *sv["selection_ci"])
    assert (m["awnn.total_savings_vs_fixed"], m["awnn.total_savings_vs_fixed_lo"], m["awnn.total_savings_vs_fixed_hi"]) == (sv["total"], *sv["total_ci"])
    assert not any(n.startswith("fixed.") and "savings" in n for n in m)  # the baseline has no savings against itself
    assert not any("savings_ratio" in n or "vs_reference" in n for n in m)  # the old names, which meant other directions, are gone
    assert all(len(repr(v)) <= 12 for v in m.values()), {n: v for n, v in m.items() if len(repr(v)) > 12}
    assert not C.is_metric("fixed.no_such_number") and not C.is_metric("savings_ratio") and C.is_metric("tpe.r2.total_savings_vs_awnn_lo")


@pytest.mark.slow
def test_compare_logs_them_on_the_comparison_run(smoke_comparison):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(smoke_comparison["tracking_uri"])
    exp = c.get_experiment_by_name("awnn-doublemoon")
    root = c.search_runs([exp.experiment_id], filter_string=C.tag_equals((C.Tag.KIND, "comparison")), max_results=1)[0]
    metrics = root.data.metrics
    for arm in ("fixed", "awnn"):
        for name in ("selection_device_hours", "total_device_hours", "test_acc_mean", "trials", "width_total"):
            assert C.arm_metric(arm, name) in metrics, (arm, name)
    assert metrics["awnn.savings_vs_fixed_lo"] <= metrics["awnn.savings_vs_fixed"] <= metrics["awnn.savings_vs_fixed_hi"]
    assert root.data.tags[C.Tag.SAVINGS_BASELINE] == "fixed" and root.data.tags[C.MlflowTag.NOTE].startswith("**Verdict:**")
    assert {a.path for a in c.list_artifacts(root.info.run_id, "report")} >= {"report/report.html", "report/summary.json"}


@pytest.mark.slow
def test_trial_params_are_the_keys_that_apply_and_the_elbo_parts_are_logged(smoke_comparison):
    """Acceptance of issue #17: a tabular AWNN trial run has no Transformer or
    GNN key and no `width` among its params; a fixed one has its width and no
    AWNN key; every trial logs train_nll, AWNN trials train_prior too."""
    from mlflow.tracking import MlflowClient

    from awnn.config import AWNN_KEYS, DOMAIN_KEYS, TrainConfig

    c = MlflowClient(smoke_comparison["tracking_uri"])
    exp = c.get_experiment_by_name("awnn-doublemoon")
    trials = c.search_runs([exp.experiment_id], filter_string=C.tag_equals((C.Tag.KIND, "trial")), max_results=1000)
    other_domains = {k for kind in ("image", "graph", "text") for k in DOMAIN_KEYS[kind]}
    awnn = [r for r in trials if r.data.params["model"] == "awnn"]
    fixed = [r for r in trials if r.data.params["model"] == "fixed"]
    assert awnn and fixed
    for r in awnn:
        p = r.data.params
        assert "width" not in p and not other_domains & set(p) and "momentum" not in p, sorted(p)
        assert {"rate", "sigma_theta", "quantile_k", "awnn_profile"} <= set(p)
        # the full config, every default filled in, is the awnn.config tag through TrainConfig
        full = TrainConfig.from_dict(json.loads(r.data.tags[C.Tag.CONFIG]))
        assert full.d_model == 512 and str(full.rate) == p["rate"]
        m = c.get_metric_history(r.info.run_id, "train_nll")
        prior = {x.step: x.value for x in c.get_metric_history(r.info.run_id, "train_prior")}
        loss = {x.step: x.value for x in c.get_metric_history(r.info.run_id, "train_loss")}
        assert m and all(x.value + prior[x.step] == pytest.approx(loss[x.step]) for x in m)
    for r in fixed:
        p = r.data.params
        assert "width" in p and not set(AWNN_KEYS) & set(p) and not other_domains & set(p), sorted(p)
        assert c.get_metric_history(r.info.run_id, "train_nll") and not c.get_metric_history(r.info.run_id, "train_prior")


@pytest.mark.slow
def test_every_run_carries_mlflows_context_tags(smoke_comparison):
    import subprocess
    from pathlib import Path

    from mlflow.tracking import MlflowClient

    c = MlflowClient(smoke_comparison["tracking_uri"])
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], max_results=1000)
    head = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[2]), "rev-parse", "HEAD"], capture_output=True, text=True)
    for r in runs:
        t = r.data.tags
        assert t[C.MlflowTag.SOURCE_TYPE] == "LOCAL" and t[C.MlflowTag.SOURCE_NAME].startswith("awnn compare")
        assert t.get(C.MlflowTag.USER)
        if head.returncode == 0:  # a git checkout: the commit of the code that ran
            assert t[C.MlflowTag.GIT_COMMIT] == head.stdout.strip()


@pytest.mark.slow
def test_retraining_runs_keep_their_model_and_it_scores_the_logged_test_accuracy(smoke_comparison, tmp_path):
    """Issue #17: every re-training run keeps its model (artifact `model/model.pt`);
    `awnn.models.load_model` builds it without data, and on the task's test
    part it scores exactly the run's test_acc (it is the selected epoch's model)."""
    import torch
    from mlflow.tracking import MlflowClient

    from awnn.data import load_task
    from awnn.models import load_model
    from awnn.train import evaluate

    c = MlflowClient(smoke_comparison["tracking_uri"])
    exp = c.get_experiment_by_name("awnn-doublemoon")
    trials = c.search_runs([exp.experiment_id], filter_string=C.tag_equals((C.Tag.KIND, "trial")), max_results=1000)
    retrain = [r for r in trials if r.data.tags[C.Tag.PHASE] == "assessment"]
    selection = [r for r in trials if r.data.tags[C.Tag.PHASE] == "selection"]
    assert retrain and all(not c.list_artifacts(r.info.run_id, C.MODEL_ARTIFACT) for r in selection)  # selection trials keep none
    task = load_task("doublemoon")
    for r in retrain:
        assert [a.path for a in c.list_artifacts(r.info.run_id, C.MODEL_ARTIFACT)] == [f"{C.MODEL_ARTIFACT}/{C.MODEL_FILE}"]
        path = c.download_artifacts(r.info.run_id, f"{C.MODEL_ARTIFACT}/{C.MODEL_FILE}", str(tmp_path))
        model = load_model(path)
        _, acc = evaluate(model, task, "outer", "test", torch.device("cpu"))
        assert acc == pytest.approx(r.data.metrics["test_acc"], abs=1e-9), r.info.run_name
