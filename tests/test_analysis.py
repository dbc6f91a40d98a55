"""tracking.analysis: the numbers of the cost report.

Exact checks on small hand-made tables (bootstrap, any-time curve, cost to
target, interrupted runs), then the same functions on a real smoke
comparison (the session's `smoke_comparison`, real Ray + MLflow on SQLite),
checked against values read from MLflow independently."""
from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest

from tracking import analysis as A


# ----------------------------------------------------------- hand-made data
def _run(strategy, phase, key, device_hours, status="ok", best_val_acc=math.nan, test_acc=math.nan, model=None, width=16.0,
         hidden_layers=1.0, train_seconds=None, epochs_run=2.0, widths_at_best=None, start_time=0, split=None):
    model = model or ("awnn" if strategy == "awnn" else "fixed")
    row = {c: None for c in A.RUN_COLUMNS}
    row.update(run_id=f"{strategy}-{phase}-{key}-{start_time}", strategy=strategy, phase=phase, trial_key=key, status=status,
               run_status="FINISHED", model=model, hidden_layers=hidden_layers, width=width, batch_size=32.0,
               split=split or ("inner" if phase == "selection" else "outer"), seed=0.0, grid_index=0.0, device_hours=device_hours,
               gpu_hours=0.0, compute_seconds=device_hours * 3600, train_seconds=device_hours * 3600 if train_seconds is None else train_seconds,
               epochs_run=epochs_run, best_val_acc=best_val_acc, best_val_loss=0.1, best_epoch=1.0, test_acc=test_acc,
               final_width_total=width * hidden_layers, widths=widths_at_best, widths_at_best=widths_at_best, n_train=math.nan,
               attempts=1.0, retries=0.0, cost_estimated=False, error="", start_time=start_time, end_time=start_time + 1,
               config={"model": model, "width": width, "hidden_layers": hidden_layers})
    return row


def _data(rows, strategies=("fixed", "awnn"), sweeps=None, state="finished"):
    runs = pd.DataFrame(rows, columns=A.RUN_COLUMNS)
    info = {"id": "cmp-test", "run_id": "r", "experiment": "awnn-test", "experiment_id": "1", "task": "doublemoon", "budget": "smoke",
            "budget_params": {}, "state": state, "run_status": "FINISHED", "strategies": list(strategies), "command": "compare",
            "cpus_per_trial": 1.0, "gpus_per_trial": 0.0, "wall_seconds": 10.0, "start_time": 0, "end_time": 1}
    if sweeps is None:
        sweeps = []
        for s in strategies:
            for ph in A.PHASES:
                n = sum(1 for r in rows if r["strategy"] == s and r["phase"] == ph)
                if n:
                    sweeps.append({"strategy": s, "phase": ph, "run_id": f"sw-{s}-{ph}", "state": "finished", "trials_declared": float(n),
                                   "configs_declared": float(n), "selected_key": "sel-0" if ph == "selection" else None,
                                   "selected_config": None, "wall_seconds": 1.0})
    return A.ComparisonData("sqlite:///none", info, pd.DataFrame(sweeps), A._run_frame([], list(strategies), info) if not rows else runs)


def test_savings_ratio_is_ratio_of_summed_device_hours_with_a_degenerate_ci_for_equal_costs():
    rows = [_run("fixed", "selection", f"sel-{i}", 1.0, best_val_acc=0.9) for i in range(4)]
    rows += [_run("awnn", "selection", f"sel-{i}", 1.0, best_val_acc=0.9) for i in range(2)]
    rows += [_run(s, "assessment", "ass-01", 2.0, test_acc=0.9) for s in ("fixed", "awnn")]
    sv = A.savings(_data(rows), n_boot=200).iloc[0]
    assert sv["selection_ratio"] == pytest.approx(2.0)
    assert sv["total_ratio"] == pytest.approx(6.0 / 4.0)
    # every trial costs the same: every resample gives the same sums, so the interval is a point
    assert (sv["selection_lo"], sv["selection_hi"]) == pytest.approx((2.0, 2.0))
    assert (sv["total_lo"], sv["total_hi"]) == pytest.approx((1.5, 1.5))


def test_savings_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(3)
    rows = [_run("fixed", "selection", f"sel-{i}", float(c)) for i, c in enumerate(rng.uniform(0.5, 2.0, 20))]
    rows += [_run("awnn", "selection", f"sel-{i}", float(c)) for i, c in enumerate(rng.uniform(1.0, 4.0, 5))]
    d = _data(rows)
    a, b = A.savings(d, seed=7), A.savings(d, seed=7)
    pd.testing.assert_frame_equal(a, b)
    sv = a.iloc[0]
    assert sv["selection_lo"] < sv["selection_ratio"] < sv["selection_hi"]
    assert sv["selection_ratio"] == pytest.approx(sum(r["device_hours"] for r in rows[:20]) / sum(r["device_hours"] for r in rows[20:]))


def test_savings_without_the_reference_strategy_is_empty():
    d = _data([_run("fixed", "selection", "sel-0", 1.0)], strategies=("fixed",))
    assert A.savings(d).empty
    assert A.summarize(A.analyze(d, n_boot=10, n_orders=10))["savings_ratio"] is None


def test_anytime_curve_averages_the_best_so_far_over_orders():
    # two trials of one device-hour each: after 1 h half the orders found 0.5, half 0.9
    rows = [_run("fixed", "selection", "sel-0", 1.0, best_val_acc=0.5), _run("fixed", "selection", "sel-1", 1.0, best_val_acc=0.9)]
    curve = A.anytime(_data(rows, strategies=("fixed",)), n_orders=4000, points=3)
    assert curve["device_hours"].tolist() == pytest.approx([1.0, 2 ** 0.5, 2.0])  # cheapest trial to whole grid, geometric
    by_x = dict(zip(curve["device_hours"], curve["mean"]))
    assert by_x[1.0] == pytest.approx(0.7, abs=0.03)
    assert by_x[2.0] == pytest.approx(0.9)


def test_anytime_diverged_trials_cost_but_find_nothing():
    rows = [_run("fixed", "selection", "sel-0", 1.0, status="diverged", best_val_acc=0.99),
            _run("fixed", "selection", "sel-1", 1.0, best_val_acc=0.6)]
    curve = A.anytime(_data(rows, strategies=("fixed",)), n_orders=100, points=3)
    assert curve["mean"].iloc[-1] == pytest.approx(0.6)  # the diverged score is never used
    assert math.isnan(curve["mean"].iloc[0])  # after 1 h some orders ran only the diverged trial


def test_cost_to_target_counts_orders_that_reach_it():
    rows = [_run("fixed", "selection", f"sel-{i}", 1.0, best_val_acc=v) for i, v in enumerate([0.5, 0.95, 1.0])]
    rows += [_run("awnn", "selection", "sel-0", 5.0, best_val_acc=0.8)]
    table, info = A.cost_to_target(_data(rows), margin=0.01, n_orders=3000)
    assert info["target"] == pytest.approx(0.99)
    fixed = table.set_index("strategy").loc["fixed"]
    awnn = table.set_index("strategy").loc["awnn"]
    assert fixed["reached"] == 1.0
    assert fixed["hours_mean"] == pytest.approx(2.0, abs=0.1)  # the target trial sits at position 1, 2 or 3 with equal odds
    assert awnn["reached"] == 0.0 and math.isnan(awnn["hours_mean"])


def test_interrupted_runs_add_compute_but_not_configs():
    rows = [_run("fixed", "selection", "sel-0", 0.5, status="interrupted", start_time=1),
            _run("fixed", "selection", "sel-0", 1.0, best_val_acc=0.9, start_time=2),
            _run("fixed", "selection", "sel-1", 1.0, best_val_acc=0.8, start_time=3)]
    d = _data(rows, strategies=("fixed",))
    costs = A.cost_table(d).set_index("phase")
    assert costs.loc["selection", "configs"] == 2 and costs.loc["selection", "runs"] == 3
    assert costs.loc["selection", "interrupted_runs"] == 1 and costs.loc["selection", "ok"] == 2
    assert costs.loc["selection", "device_hours"] == pytest.approx(2.5)
    trials = d.trials().set_index("trial_key")
    assert trials.loc["sel-0", "status"] == "ok" and trials.loc["sel-0", "device_hours"] == pytest.approx(1.5)
    assert any("interrupted" in p for p in A.problems(d))


def test_projection_grows_as_w_to_the_l_for_the_fixed_grid_only():
    rows = [_run("fixed", "selection", f"sel-{i}", 1.0, width=w) for i, w in enumerate([8.0, 16.0, 32.0, 8.0, 16.0, 32.0])]
    rows += [_run("awnn", "selection", f"sel-{i}", 2.0) for i in range(2)]
    table, info = A.projection(_data(rows), max_layers=3)
    assert info["W"] == 3 and info["fixed_other_configs"] == 2
    assert table["fixed_configs_per_layer_width"].tolist() == [6, 18, 54]
    assert table["fixed_hours"].tolist() == pytest.approx([6, 18, 54])
    assert table["awnn_hours"].tolist() == pytest.approx([4, 4, 4])
    assert table["fixed_per_trial_measured"].tolist() == [True, False, False]


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


def test_savings_ratio_matches_a_hand_computation_on_the_same_runs(smoke):
    sel = {s: _mlflow_hours(smoke, s, "selection") for s in ("fixed", "awnn")}
    tot = {s: sel[s] + _mlflow_hours(smoke, s, "assessment") for s in ("fixed", "awnn")}
    summary = smoke["analysis"].summary()
    assert summary["savings_ratio"] == pytest.approx(sel["fixed"] / sel["awnn"], rel=1e-12)
    assert summary["savings_ratio_total"] == pytest.approx(tot["fixed"] / tot["awnn"], rel=1e-12)
    lo, hi = summary["savings_ratio_ci"]
    assert lo <= summary["savings_ratio"] <= hi
    # the bootstrap by hand, as documented: seed 0, 2000 resamples of each phase's trials (ordered by trial key),
    # drawn reference first (selection, re-training), then the other strategy (selection, ...)
    rng = np.random.default_rng(0)
    draw = lambda c: c[rng.integers(0, len(c), (2000, len(c)))].sum(axis=1)  # noqa: E731
    ref = draw(_trial_costs(smoke, "awnn", "selection"))
    draw(_trial_costs(smoke, "awnn", "assessment"))
    ratios = draw(_trial_costs(smoke, "fixed", "selection")) / ref
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
