"""Post-hoc truncation in the report (issue #18): the re-training runs'
trunc_* metrics (step = % of neurons kept) aggregated per arm, the largest
cut within 1 point, the report's section, summary.json and the headline
metric.  Hand-built comparisons, no Ray or MLflow."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from tracking import analysis as A
from tracking.contract import Metric, arm_metric
from tracking.document import build_document
from tracking.plots import PLOTS, plot_truncation
from tracking.render import render_markdown
from tracking.summary import headline_metrics
from tracking.truncation import curve_rows, truncation_summary
from tracking_helpers import comparison_data, trial_row

# run -> % kept -> test accuracy: the first run loses 0.5 point at 70%, 3 points at 60%; the second 0.5 / 1.5
ACC = {0: {100: 0.96, 90: 0.96, 80: 0.96, 70: 0.955, 60: 0.93, 50: 0.8},
       1: {100: 0.94, 90: 0.94, 80: 0.94, 70: 0.935, 60: 0.925, 50: 0.7}}


def _data():
    rows = [trial_row("awnn", "selection", "k0", 0.01, best_val_acc=0.9, widths_at_best=[40])]
    rows += [trial_row("awnn", "assessment", f"r{i}", 0.01, test_acc=ACC[i][100], widths_at_best=[40]) for i in ACC]
    rows += [trial_row("awnn", "assessment", "r9", 0.01, status="diverged", widths_at_best=[40])]  # not a selectable run: left out
    data = comparison_data(rows, strategies=("awnn",))
    hist = []
    for i, curve in ACC.items():
        for pct, acc in curve.items():
            hist += [(f"awnn-assessment-r{i}-0", Metric.TRUNC_TEST_ACC, pct, acc), (f"awnn-assessment-r{i}-0", Metric.TRUNC_WIDTH_TOTAL, pct, 0.4 * pct),
                     (f"awnn-assessment-r{i}-0", Metric.TRUNC_PARAMS, pct, 10 * pct), (f"awnn-assessment-r{i}-0", Metric.TRUNC_INFER_US, pct, 0.01 * pct)]
    hist += [("awnn-assessment-r9-0", Metric.TRUNC_TEST_ACC, 100, 0.1)]
    data.histories = pd.DataFrame(hist, columns=["run_id", "key", "step", "value"])
    return data


def test_truncation_table_aggregates_the_runs_per_share_kept():
    a = A.analyze(_data(), n_boot=20, n_orders=10)
    t = a.truncation.set_index("kept_pct")
    assert list(t.index) == [100, 90, 80, 70, 60, 50] and (t["n"] == 2).all()
    assert t.loc[100, "acc_mean"] == pytest.approx(0.95) and t.loc[60, "acc_min"] == pytest.approx(0.925)
    assert t.loc[70, "acc_std"] == pytest.approx(pd.Series([0.955, 0.935]).std())
    assert t.loc[70, "width_total_mean"] == pytest.approx(28) and t.loc[50, "params_mean"] == pytest.approx(500)
    info = a.truncation_info["awnn"]
    # mean at 70%: 0.945 (within 1 point of 0.95); at 60%: 0.9275 (not)
    assert (info["largest_cut_pct"], info["kept_pct"]) == (30, 70) and info["acc_at_cut"] == pytest.approx(0.945)
    assert info["full_params"] == pytest.approx(1000) and info["params_at_cut"] == pytest.approx(700)
    summary = a.summary()
    assert summary["truncation"]["awnn"]["largest_cut_pct"] == 30
    assert (arm_metric("awnn", "truncation_cut_pct"), 30.0) in headline_metrics(summary)
    md = render_markdown(build_document(a, summary), PLOTS)
    assert "## Post-hoc truncation (paper 5.4)" in md and "removing 30% of each adaptive layer's neurons keeps" in md


def test_no_cut_within_the_tolerance_is_said_and_no_curves_are_said():
    point = lambda f, acc, w, n: {"fraction": f, Metric.TRUNC_TEST_ACC: acc, Metric.TRUNC_WIDTH_TOTAL: w, Metric.TRUNC_PARAMS: n,  # noqa: E731
                                  Metric.TRUNC_INFER_US: 1.0}
    rows = curve_rows("awnn", [[point(1.0, 0.9, 10, 5), point(0.9, 0.85, 9, 4)]])
    info = truncation_summary(pd.DataFrame(rows))["awnn"]
    assert info["largest_cut_pct"] == 0 and info["kept_pct"] == 100 and math.isnan(rows[0]["acc_std"])
    a = A.analyze(comparison_data([trial_row("fixed", "selection", "k0", 0.01, best_val_acc=0.9)], strategies=("fixed",)), n_boot=10, n_orders=5)
    assert not len(a.truncation) and a.truncation_info == {}
    assert "No truncation curves" in render_markdown(build_document(a, a.summary()), PLOTS)


def test_truncation_plot_is_written(tmp_path):
    for data in (_data(), comparison_data([trial_row("fixed", "selection", "k0", 0.01, best_val_acc=0.9)], strategies=("fixed",))):
        a = A.analyze(data, n_boot=10, n_orders=5)
        out = tmp_path / f"{len(a.truncation)}.png"
        plot_truncation(a, out)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("runs,says", [(1, "one model)"), (2, "mean of 2 models)")])
def test_the_terminals_truncation_line_counts_its_models(runs, says):
    """(2026-12-07: one re-training run read "mean of 1 models")"""
    from types import SimpleNamespace

    from search.summary import _truncation_line

    curves = [[{"fraction": pct / 100, Metric.TRUNC_TEST_ACC: ACC[i][pct], Metric.TRUNC_WIDTH_TOTAL: 0.4 * pct} for pct in ACC[i]]
              for i in list(ACC)[:runs]]
    r = SimpleNamespace(strategy="awnn", assessment=SimpleNamespace(outcomes=[{"truncation": c} for c in curves]))
    line = _truncation_line(r)
    assert line.startswith("awnn: truncation after training keeps test acc within 1 point down to ") and line.endswith(says), line
