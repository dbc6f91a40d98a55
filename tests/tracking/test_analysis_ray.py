"""tracking.analysis on a real smoke comparison (the session's
`smoke_comparison`, real Ray + MLflow on SQLite), checked against values read
from MLflow independently.  The exact checks on small hand-made tables are in
tests/tracking/test_analysis.py."""
from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from tracking import analysis as A
from tracking import tables

pytestmark = pytest.mark.slow


# -------------------------------------------------- a real smoke comparison
@pytest.fixture(scope="module")
def smoke(smoke_comparison):
    uri = smoke_comparison["tracking_uri"]
    data = A.load_comparison(uri)
    return {"uri": uri, "data": data, "analysis": A.analyze(data), "mlflow": _independent_read(uri, data.comparison["id"])}


def _independent_read(uri, comparison):
    """The trial runs read straight from MLflow, without tracking.analysis."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    runs = client.search_runs([exp.experiment_id], f"tags.`awnn.comparison` = '{comparison}'", max_results=5000)
    return [r for r in runs if r.data.tags.get("awnn.kind") in ("trial", "sweep")]


def _mlflow_hours(smoke, strategy, phase):
    return sum(r.data.metrics["device_hours"] for r in smoke["mlflow"]
               if r.data.tags["awnn.kind"] == "trial" and r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == phase)


def test_analysis_totals_equal_the_sum_of_the_trials_recorded_device_hours(smoke):
    costs = smoke["analysis"].costs.set_index(["strategy", "phase"])
    summary = smoke["analysis"].summary()
    for s in ("fixed", "awnn"):
        for ph in ("selection", "assessment"):
            expected = _mlflow_hours(smoke, s, ph)
            assert expected > 0
            assert costs.loc[(s, ph), "device_hours"] == pytest.approx(expected, rel=1e-12)
            assert summary["device_hours"][s][ph] == pytest.approx(expected, rel=1e-12)
            # ... and equal the driver's own total on the sweep run
            sweep = next(r for r in smoke["mlflow"] if r.data.tags["awnn.kind"] == "sweep" and r.data.tags["awnn.strategy"] == s and r.data.tags["awnn.phase"] == ph)
            assert sweep.data.metrics["device_hours"] == pytest.approx(expected, rel=1e-9)
        total = _mlflow_hours(smoke, s, "selection") + _mlflow_hours(smoke, s, "assessment")
        assert summary["device_hours"][s]["total"] == pytest.approx(total, rel=1e-12)
        assert summary["gpu_hours"][s]["total"] == 0.0  # CPU-only machine


def test_analysis_counts_every_config_and_trial_of_the_grids(smoke):
    from search.budget import resolve_budget
    from search.grid import find_grid

    costs = smoke["analysis"].costs.set_index(["strategy", "phase"])
    budget = resolve_budget("smoke")
    for s in ("fixed", "awnn"):
        grid = find_grid("doublemoon", s)
        assert costs.loc[(s, "selection"), "configs"] == grid.size
        assert costs.loc[(s, "selection"), "trials"] == grid.size == costs.loc[(s, "selection"), "trials_declared"]
        assert costs.loc[(s, "assessment"), "trials"] == budget.runs(grid)
        assert costs.loc[(s, "total"), "runs"] == grid.size + budget.runs(grid)
        assert costs.loc[(s, "selection"), "wall_seconds"] > 0


def test_savings_match_a_hand_computation_on_the_same_runs(smoke):
    sel = {s: _mlflow_hours(smoke, s, "selection") for s in ("fixed", "awnn")}
    tot = {s: sel[s] + _mlflow_hours(smoke, s, "assessment") for s in ("fixed", "awnn")}
    sv = smoke["analysis"].savings.set_index("strategy").loc["awnn"]  # unrounded; summary.json rounds to 3 digits
    assert sv["baseline"] == "fixed"
    assert sv["selection"] == pytest.approx(sel["fixed"] / sel["awnn"], rel=1e-12)
    assert sv["total"] == pytest.approx(tot["fixed"] / tot["awnn"], rel=1e-12)
    lo, hi = sv["selection_lo"], sv["selection_hi"]
    assert lo <= sv["selection"] <= hi
    assert smoke["analysis"].summary()["savings"]["awnn"]["selection"] == float(f"{sel['fixed'] / sel['awnn']:.3g}")
    # the bootstrap by hand, as documented: seed 0, 2000 resamples of each phase's trials (ordered by trial key),
    # drawn baseline first (selection, re-training), then the other arm (selection, ...)
    rng = np.random.default_rng(0)
    draw = lambda c: c[rng.integers(0, len(c), (2000, len(c)))].sum(axis=1)  # noqa: E731
    base = draw(_trial_costs(smoke, "fixed", "selection"))
    draw(_trial_costs(smoke, "fixed", "assessment"))
    ratios = base / draw(_trial_costs(smoke, "awnn", "selection"))
    assert (lo, hi) == pytest.approx((np.quantile(ratios, 0.025), np.quantile(ratios, 0.975)), rel=1e-12)


def _trial_costs(smoke, strategy, phase):
    return np.array([m for _, m in sorted((r.data.tags["awnn.trial_key"], r.data.metrics["device_hours"]) for r in smoke["mlflow"]
                                          if r.data.tags["awnn.kind"] == "trial" and r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == phase)])


def test_analysis_selected_config_and_test_accuracy_follow_the_protocol(smoke):
    st = smoke["analysis"].strategies.set_index("strategy")
    for s in ("fixed", "awnn"):
        sweep = next(r for r in smoke["mlflow"] if r.data.tags["awnn.kind"] == "sweep" and r.data.tags["awnn.strategy"] == s and r.data.tags["awnn.phase"] == "selection")
        assert st.loc[s, "selected_key"] == sweep.data.tags["awnn.selected_key"]
        assert st.loc[s, "selected_config"] == json.loads(sweep.data.tags["awnn.selected_config"])
        accs = [r.data.metrics["test_acc"] for r in smoke["mlflow"] if r.data.tags["awnn.kind"] == "trial" and r.data.tags["awnn.strategy"] == s
                and r.data.tags["awnn.phase"] == "assessment" and r.data.tags["awnn.status"] == "ok"]
        assert st.loc[s, "test_runs"] == len(accs) == 2
        assert st.loc[s, "test_acc_mean"] == pytest.approx(statistics.fmean(accs))
        assert st.loc[s, "test_acc_std"] == pytest.approx(statistics.stdev(accs))
        assessment = next(r for r in smoke["mlflow"] if r.data.tags["awnn.kind"] == "sweep" and r.data.tags["awnn.strategy"] == s and r.data.tags["awnn.phase"] == "assessment")
        assert st.loc[s, "test_acc_mean"] == pytest.approx(assessment.data.metrics["test_acc_mean"])


def test_width_table_puts_the_grids_width_next_to_the_learned_one(smoke):
    w = smoke["analysis"].widths.set_index("strategy")
    cfg = smoke["analysis"].strategies.set_index("strategy").loc["fixed", "selected_config"]
    assert w.loc["fixed", "total_mean"] == cfg["width"] * cfg["hidden_layers"]
    learned = [sum(json.loads(r.data.tags["awnn.widths_at_best"])) for r in smoke["mlflow"] if r.data.tags["awnn.kind"] == "trial"
               and r.data.tags["awnn.strategy"] == "awnn" and r.data.tags["awnn.phase"] == "assessment"]
    assert w.loc["awnn", "kind"].startswith("learned") and w.loc["awnn", "n"] == len(learned)
    assert w.loc["awnn", "total_mean"] == pytest.approx(statistics.fmean(learned))
    assert w.loc["awnn", "total_std"] == pytest.approx(statistics.stdev(learned))


def test_anytime_curve_is_monotone_and_ends_at_the_grids_best(smoke):
    a = smoke["analysis"]
    for s in ("fixed", "awnn"):
        c = a.anytime[(a.anytime["strategy"] == s) & np.isfinite(a.anytime["mean"])]
        assert len(c) and (np.diff(c["mean"].to_numpy()) >= -1e-12).all()
        assert c["mean"].iloc[-1] == pytest.approx(a.strategies.set_index("strategy").loc[s, "best_val_acc"])


def test_overhead_matches_every_awnn_run_with_fixed_runs(smoke):
    a = smoke["analysis"]
    awnn_runs = a.data.runs[(a.data.runs["model"] == "awnn") & (a.data.runs["status"] == "ok")]
    assert len(a.overhead) == len(awnn_runs)
    assert np.isfinite(a.overhead["ratio"].astype(float)).all()
    assert a.overhead_summary["n"] == len(awnn_runs) and a.overhead_summary["ratio_median"] > 0
    assert (a.overhead["cost"] > 0).all()
    # the fixed grid's selection trials ran fused (the CPU default), its re-training runs one per trial: an AWNN
    # selection run has only fused fixed runs on its split, and its match says so; a re-training run is matched alone
    runs = a.data.runs
    fixed_sel = runs[(runs["model"] == "fixed") & (runs["phase"] == "selection")]
    assert len(fixed_sel) and fixed_sel["group"].astype(str).str.len().gt(0).all()
    fused = a.overhead["match"].str.endswith(tables.FUSED_MATCH)
    assert (fused == (a.overhead["phase"] == "selection")).all(), a.overhead[["phase", "match"]]
    assert a.overhead_summary["fused_matches"] == int((a.overhead["phase"] == "selection").sum()) > 0


def test_load_histories_reads_in_bulk_what_get_metric_history_returns(smoke):
    from mlflow.tracking import MlflowClient

    data = smoke["data"]
    run_ids = data.runs.loc[data.runs["model"] == "awnn", "run_id"].tolist()
    h = A.load_histories(smoke["uri"], run_ids, ["width_total", "val_acc"])
    client = MlflowClient(smoke["uri"])
    for rid in run_ids:
        for key in ("width_total", "val_acc"):
            expected = sorted((m.step, m.value) for m in client.get_metric_history(rid, key))
            got = h[(h["run_id"] == rid) & (h["key"] == key)]
            assert list(zip(got["step"], got["value"])) == expected
    # the learned-width history the report plots was read with the comparison
    assert set(data.histories["run_id"]) == set(run_ids)


def test_find_comparison_errors_name_what_exists(smoke):
    cid = smoke["data"].comparison["id"]
    with pytest.raises(A.AnalysisError, match=rf"--comparison nope: not found in the tracking store; newest comparisons there: \['{cid}'"):
        A.find_comparison(smoke["uri"], comparison="nope")
    with pytest.raises(A.AnalysisError, match=r"--experiment awnn-nope: no such experiment .*'awnn-doublemoon'"):
        A.find_comparison(smoke["uri"], experiment="awnn-nope")
    root, others = A.find_comparison(smoke["uri"], experiment="awnn-doublemoon")
    assert root.data.tags["awnn.comparison"] == cid and others == []
