"""The comparison run carries the report's headline numbers as metrics
(part of issue #17): per arm `<arm>.total_device_hours`,
`<arm>.test_acc_mean`, `<arm>.savings_vs_reference`, ... and the headline
`savings_ratio` with its interval, so MLflow's runs table answers "fixed vs
AWNN" without opening the report; the report folder is its artifact."""
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
    assert m["fixed.total_device_hours"] == summary["device_hours"]["fixed"]["total"]
    assert m["awnn.selection_device_hours"] == summary["device_hours"]["awnn"]["selection"]
    assert m["awnn.test_acc_mean"] == summary["test_acc_mean"]["awnn"] and m["awnn.test_runs"] == 2
    assert m["awnn.width_total"] == summary["strategies"]["awnn"]["width"]["total_mean"]
    assert m["fixed.trials"] == 30 and m["awnn.trials"] == 6
    assert m["savings_ratio"] == summary["savings_ratio"]
    assert (m["savings_ratio_lo"], m["savings_ratio_hi"]) == tuple(summary["savings_ratio_ci"])
    assert m["fixed.savings_vs_reference"] == summary["savings"]["fixed"]["selection"]
    assert "awnn.savings_vs_reference" not in m  # the reference arm has no ratio against itself
    assert not C.is_metric("fixed.no_such_number")


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
    assert "savings_ratio" in metrics and metrics["savings_ratio_lo"] <= metrics["savings_ratio"] <= metrics["savings_ratio_hi"]
    assert {a.path for a in c.list_artifacts(root.info.run_id, "report")} >= {"report/report.html", "report/summary.json"}
