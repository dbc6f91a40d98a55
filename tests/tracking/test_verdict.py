"""The verdict (issue #32 item 2), tracking/verdict.py, on summary.json-shaped
data built here: the cheapest arm within 1 point of the best test accuracy,
its savings against the baseline with the interval, how sure; a comparison
without a fixed arm, one without a baseline, arms that failed or are missing.
And the savings' wording and rounding (tracking/savings.py)."""
from __future__ import annotations

import math

import pytest

from tracking.savings import baseline_of, fsavings, fx, rounded
from tracking.verdict import brief_summary, verdict


def _arm(acc, std, total, runs=3):
    return {"test_acc_mean": acc, "test_acc_std": std, "test_runs": runs if acc is not None else 0,
            "device_hours": {"selection": total * 0.8, "total": total}}


def _summary(arms, savings, baseline="fixed", **extra):
    return {"budget": "quick", "baseline": baseline, "strategies": arms, "savings": savings, "budget_still_moving": None, **extra}


def _sv(total, ci, selection=None, baseline="fixed"):
    return {"baseline": baseline, "selection": selection or total, "selection_ci": list(ci), "total": total, "total_ci": list(ci)}


def test_the_cheapest_arm_within_one_point_of_the_best_wins():
    arms = {"fixed": _arm(0.9893, 0.0129, 10.0), "awnn": _arm(0.9800, 0.0100, 2.0), "tpe": _arm(0.9700, 0.0200, 1.0)}
    v = verdict(_summary(arms, {"awnn": _sv(5.0, (4.1, 7.9), 8.1), "tpe": _sv(10.0, (8.0, 12.0))}))
    # tpe is the cheapest but 1.93 points below the best; awnn is 0.93 below: within 1 point
    assert (v["arm"], v["best_arm"], v["baseline"], v["within_points"]) == ("awnn", "fixed", "fixed", 1.0)
    assert v["text"].startswith("**Verdict:** `awnn` is the cheapest arm to a model within 1 point of the best test accuracy "
                                "(the best: `fixed`, 98.93%): 98.00% +- 1.00% (n=3), 5.00x cheaper than `fixed` in total device-hours "
                                "(95% CI 4.10x to 7.90x; model selection alone 8.10x cheaper).")
    assert "How sure: its accuracy's +-1 std range overlaps that of `fixed`, 98.93% +- 1.29% (n=3); the whole 95% CI is above 1: cheaper." in v["text"]
    # a looser tolerance takes the cheaper tpe
    assert verdict(_summary(arms, {"awnn": _sv(5.0, (4.1, 7.9)), "tpe": _sv(10.0, (8.0, 12.0))}), points=2.0)["arm"] == "tpe"


def test_the_best_arm_when_no_cheaper_arm_is_close_and_the_baseline_itself():
    arms = {"fixed": _arm(0.99, 0.001, 10.0), "awnn": _arm(0.90, 0.001, 2.0)}
    v = verdict(_summary(arms, {"awnn": _sv(5.0, (4.0, 6.0))}))
    assert v["arm"] == "fixed" and "it is the baseline, and every cheaper arm tested more than 1 point below the best (`awnn` 90.00%, 5.00x cheaper)" in v["text"]
    assert "does not overlap that of `awnn`" in v["text"]
    # the best arm is also the cheapest: "it has the best test accuracy itself", overlap judged against the baseline
    arms = {"fixed": _arm(0.95, 0.02, 10.0), "awnn": _arm(0.96, 0.01, 2.0)}
    v = verdict(_summary(arms, {"awnn": _sv(0.8, (0.6, 1.2))}))
    assert v["arm"] == v["best_arm"] == "awnn" and "(it has the best test accuracy itself)" in v["text"]
    assert "0.800x, i.e. 1.25x dearer than `fixed`" in v["text"] and "the 95% CI includes 1: not clearly cheaper" in v["text"]


def test_without_a_fixed_arm_the_savings_are_against_awnn():
    arms = {"awnn": _arm(0.95, 0.01, 4.0), "tpe.r1": _arm(0.948, 0.01, 2.0), "random.r1": _arm(0.80, 0.05, 1.0)}
    s = _summary(arms, {"tpe.r1": _sv(2.0, (1.5, 2.5), baseline="awnn"), "random.r1": _sv(4.0, (3.0, 5.0), baseline="awnn")},
                 baseline="awnn", budget_still_moving=True)
    v = verdict(s)
    assert v["arm"] == "tpe.r1" and "2.00x cheaper than `awnn` in total device-hours (95% CI 1.50x to 2.50x" in v["text"]
    assert "the selection is still moving between half and all of the epochs: a larger budget may change the verdict" in v["text"]


def test_failed_and_missing_arms_are_named_not_ranked():
    arms = {"fixed": _arm(0.97, 0.01, 10.0), "awnn": _arm(None, None, 2.0), "tpe": _arm(math.nan, math.nan, 1.0)}
    v = verdict(_summary(arms, {"awnn": _sv(5.0, (4.0, 6.0)), "tpe": _sv(10.0, (9.0, 11.0))}, budget="smoke"))
    assert v["arm"] == "fixed" and v["missing"] == ["awnn", "tpe"]
    assert "it is the baseline, and no arm was cheaper." in v["text"]
    assert "no test accuracy for `awnn`, `tpe` (no re-training run finished ok): not ranked" in v["text"]
    assert "**smoke budget: the numbers only check the pipeline**" in v["text"]
    none = verdict(_summary({"fixed": _arm(None, None, 1.0)}, {}))
    assert none["arm"] is None and none["text"] == "**Verdict:** none: no arm has a test accuracy (none of `fixed` has a re-training run that finished ok)."
    nobase = verdict(_summary({"tpe": _arm(0.9, 0.0, 1.0, runs=1), "random": _arm(0.85, 0.0, 0.5, runs=1)}, {}, baseline=None))
    assert nobase["arm"] == "tpe" and "no savings to give: the comparison ran neither `fixed` nor `awnn` as a baseline" in nobase["text"]
    assert "one re-training run on one side" in nobase["text"]


def test_brief_summary_gives_the_savings_from_totals_without_intervals():
    s = brief_summary("quick", {"awnn": _arm(0.95, 0.01, 0.13), "tpe": _arm(0.949, 0.01, 0.10)})
    assert s["baseline"] == "awnn" and s["savings"]["tpe"]["total"] == 1.3 and s["savings"]["tpe"]["total_ci"] == [None, None]
    assert s["verdict"]["arm"] == "tpe" and "1.30x cheaper than `awnn` in total device-hours (model selection alone 1.30x cheaper)" in s["verdict"]["text"]


def test_savings_wording_and_rounding():
    assert baseline_of(["awnn", "tpe", "fixed"]) == "fixed" and baseline_of(["tpe", "awnn"]) == "awnn" and baseline_of(["tpe"]) is None
    assert [fx(x) for x in (11.26, 5.843, 0.5812, 1234.0, 8.0, math.nan)] == ["11.3x", "5.84x", "0.581x", "1230x", "8.00x", "n/a"]
    assert rounded(0.004236) == 0.00424 and math.isnan(rounded(None))
    assert fsavings(5.843) == "5.84x cheaper" and fsavings(0.58) == "0.580x, i.e. 1.72x dearer" and fsavings(1.0) == "1.00x (the same cost)"


@pytest.mark.parametrize("acc,expected", [(0.9805, "awnn"), (0.9790, "tpe")])
def test_the_one_point_edge(acc, expected):
    """Within 1 point means at most 1 point below the best, boundary included."""
    arms = {"fixed": _arm(0.9900, 0.0, 10.0), "tpe": _arm(0.9800, 0.0, 3.0), "awnn": _arm(acc, 0.0, 2.0)}
    assert verdict(_summary(arms, {"tpe": _sv(3.3, (3, 4)), "awnn": _sv(5.0, (4, 6))}))["arm"] == expected
