"""tracking.analysis: the numbers of the cost report.

Exact checks on small hand-made tables (bootstrap, any-time curve, cost to
target, interrupted runs); the same functions on a real smoke comparison are
in tests/tracking/test_analysis_ray.py."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tracking import analysis as A
from tracking_helpers import comparison_data as _data
from tracking_helpers import trial_row as _run


def test_savings_are_the_baselines_summed_device_hours_over_the_arms_with_a_degenerate_ci_for_equal_costs():
    rows = [_run("fixed", "selection", f"sel-{i}", 1.0, best_val_acc=0.9) for i in range(4)]
    rows += [_run("awnn", "selection", f"sel-{i}", 1.0, best_val_acc=0.9) for i in range(2)]
    rows += [_run(s, "assessment", "ass-01", 2.0, test_acc=0.9) for s in ("fixed", "awnn")]
    sv = A.savings(_data(rows), n_boot=200).iloc[0]
    # against the baseline, fixed: its device-hours / the arm's (awnn: 2x cheaper in selection)
    assert (sv["strategy"], sv["baseline"]) == ("awnn", "fixed")
    assert sv["selection"] == pytest.approx(2.0)
    assert sv["total"] == pytest.approx(6.0 / 4.0)
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
    assert sv["selection_lo"] < sv["selection"] < sv["selection_hi"]
    assert sv["selection"] == pytest.approx(sum(r["device_hours"] for r in rows[:20]) / sum(r["device_hours"] for r in rows[20:]))


def test_savings_without_another_arm_or_a_baseline_are_empty_and_say_why():
    d = _data([_run("fixed", "selection", "sel-0", 1.0)], strategies=("fixed",))
    assert A.savings(d).empty
    s = A.summarize(A.analyze(d, n_boot=10, n_orders=10))
    assert s["savings"] == {} and s["baseline"] == "fixed" and s["savings_notes"] == ["No savings: the comparison has no arm besides the baseline `fixed`."]
    d = _data([_run(a, "selection", "sel-0", 1.0) for a in ("tpe", "random")], strategies=("tpe", "random"))
    s = A.summarize(A.analyze(d, n_boot=10, n_orders=10))
    assert s["baseline"] is None and s["savings"] == {} and "ran neither (arms: tpe, random)" in s["savings_notes"][0]


def test_without_fixed_the_baseline_is_awnn_in_the_same_direction():
    rows = [_run("awnn", "selection", f"sel-{i}", 1.0) for i in range(4)] + [_run("tpe", "selection", f"sel-{i}", 0.5) for i in range(4)]
    d = _data(rows, strategies=("awnn", "tpe"))
    sv = A.savings(d, n_boot=50).iloc[0]
    assert (sv["strategy"], sv["baseline"], sv["selection"]) == ("tpe", "awnn", pytest.approx(2.0))  # 4 h / 2 h: tpe 2x cheaper
    s = A.summarize(A.analyze(d, n_boot=50, n_orders=10))
    assert s["baseline"] == "awnn" and s["savings"]["tpe"]["selection"] == 2.0
    assert s["savings_notes"] == ["The comparison did not run `fixed` (the full fixed-width grid): savings are against `awnn` "
                                  "(the AWNN grid, the method under test)."]


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


def test_one_trial_a_phase_on_each_side_gives_no_interval_and_no_verdict_on_it():
    """Before (2026-12-07): a one-config comparison (one selection trial and one re-training run an arm) showed
    "0.307x (95% CI 0.307x to 0.307x)" and its verdict read that zero-width interval as "the whole 95% CI is below 1:
    dearer"; one trial resamples to itself, so the interval says nothing."""
    from tracking.report_summary import _savings_items
    from tracking.savings import NO_CI

    rows = [_run(s, "selection", "sel-0", h, best_val_acc=0.9) for s, h in (("fixed", 3.0), ("awnn", 1.0))]
    rows += [_run(s, "assessment", "ass-01", h, test_acc=0.9) for s, h in (("fixed", 2.0), ("awnn", 1.0))]
    sv = A.savings(_data(rows), n_boot=200).iloc[0]
    assert sv["selection"] == pytest.approx(3.0) and sv["total"] == pytest.approx(2.5)
    assert all(math.isnan(sv[k]) for k in ("selection_lo", "selection_hi", "total_lo", "total_hi"))
    s = A.summarize(A.analyze(_data(rows), n_boot=50, n_orders=10))
    assert s["savings"]["awnn"]["selection_ci"] == s["savings"]["awnn"]["total_ci"]
    assert not any(math.isfinite(x) for x in s["savings"]["awnn"]["total_ci"] if x is not None)
    text = s["verdict"]["text"]
    assert "`awnn` is the cheapest arm" in text and "2.50x cheaper than `fixed`" in text and "CI" not in text, text
    items = " ".join(_savings_items(s))
    assert items.count(NO_CI) == 2 and "to n/a" not in items and "n/a to" not in items, items
    assert s["savings_notes"] == []  # (one on each side: NO_CI says it)


@pytest.mark.parametrize("single", ["awnn", "fixed"])
def test_one_selection_trial_on_one_side_keeps_the_interval_and_says_whose_trials_it_resamples(single):
    rng = np.random.default_rng(5)
    rows = []
    for arm in ("fixed", "awnn"):
        n = 1 if arm == single else 6
        rows += [_run(arm, "selection", f"sel-{i}", float(c), best_val_acc=0.9) for i, c in enumerate(rng.uniform(0.5, 2.0, n))]
        rows += [_run(arm, "assessment", f"ass-0{r}", 1.0, test_acc=0.9) for r in (1, 2)]
    d = _data(rows)
    sv = A.savings(d, n_boot=300).iloc[0]
    assert sv["selection_lo"] < sv["selection_hi"] and math.isfinite(sv["total_lo"])
    other = "fixed" if single == "awnn" else "awnn"
    assert A.savings_notes(d) == [f"`{single}`'s model selection is one trial: the selection interval of `awnn` resamples `{other}`'s "
                                  "trials only, taking that one trial's cost as exact (its spread is unknown)."]
