"""The answer in one line (issue #32): which arm is cheapest to a model within
VERDICT_POINTS points of the best arm's test accuracy, at what accuracy, at
what savings against the baseline (tracking/savings.py) with its interval,
and how sure that is.  Built from summary.json's numbers alone, so the
terminal summary (search/summary.py), report.md and the comparison run's
MLflow description (`mlflow.note.content`) say the same words.

* Candidates: the arms with a test accuracy (a re-training run that ended ok
  or width_capped) whose mean is at most VERDICT_POINTS below the best arm's.
* The verdict's arm: the candidate with the least total device-hours
  (selection + re-training; an arm derived from another counts that arm's
  search), ties by the higher accuracy, then run order.
* How sure: whether its accuracy's +-1 std range overlaps the best arm's
  (or, when it is the best, the baseline's or the runner-up's), whether the
  savings interval stays clear of 1, whether the verdict against the budget
  is still moving, the smoke budget, and the arms without a test accuracy.
"""
from __future__ import annotations

import math
from typing import Any

from .caveats import SATURATED
from .fmt import _finite, fpct
from .savings import baseline_of, fsavings, fx, rounded

__all__ = ["VERDICT_POINTS", "verdict", "brief_summary"]

VERDICT_POINTS = 1.0  # percentage points of test accuracy within which a cheaper arm counts as good as the best


def _acc(s: dict[str, Any]) -> str:
    return f"{fpct(s['test_acc_mean'])} +- {fpct(s.get('test_acc_std'))} (n={s.get('test_runs')})"


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    sa, sb = (float(x.get("test_acc_std")) if _finite(x.get("test_acc_std")) else 0.0 for x in (a, b))
    return abs(float(a["test_acc_mean"]) - float(b["test_acc_mean"])) <= sa + sb


def _points(p: float) -> str:
    return f"{p:g} point" + ("" if p == 1 else "s")


def verdict(summary: dict[str, Any], points: float = VERDICT_POINTS) -> dict[str, Any]:
    """summary.json's `verdict`: `text` (one or two sentences, Markdown) and the
    numbers behind it (`arm`, `baseline`, `within_points`, `best_arm`, ...)."""
    arms: dict[str, dict[str, Any]] = summary.get("strategies") or {}
    baseline = summary.get("baseline")
    sv = summary.get("savings") or {}
    scored = {a: s for a, s in arms.items() if s.get("test_runs") and _finite(s.get("test_acc_mean"))}
    missing = [a for a in arms if a not in scored]
    out: dict[str, Any] = {"within_points": points, "baseline": baseline, "arm": None, "best_arm": None, "missing": missing}
    smoke = summary.get("budget") == "smoke"
    if not scored:
        why = f"none of {', '.join(f'`{a}`' for a in arms)} has a re-training run that finished ok" if arms else "the comparison has no arm"
        out["text"] = f"**Verdict:** none: no arm has a test accuracy ({why})." + (" Smoke budget: the numbers only check the pipeline." if smoke else "")
        return out
    order = list(arms)
    best = max(scored, key=lambda a: (float(scored[a]["test_acc_mean"]), -order.index(a)))
    best_acc = float(scored[best]["test_acc_mean"])

    def cost(a: str) -> float:
        h = (scored[a].get("device_hours") or {}).get("total")
        return float(h) if _finite(h) else math.inf

    within = [a for a in scored if float(scored[a]["test_acc_mean"]) >= best_acc - points / 100 - 1e-12]
    arm = min(within, key=lambda a: (cost(a), -float(scored[a]["test_acc_mean"]), order.index(a)))
    s = scored[arm]
    if float(s["test_acc_mean"]) >= best_acc:  # tied with the best: it is one of the best
        best = arm
    out.update(arm=arm, best_arm=best, best_acc=best_acc, acc=float(s["test_acc_mean"]), acc_std=s.get("test_acc_std"), runs=s.get("test_runs"),
               total_device_hours=cost(arm) if math.isfinite(cost(arm)) else None)
    of_best = "it has the best test accuracy itself" if arm == best else f"the best: `{best}`, {fpct(best_acc)}"
    head = f"**Verdict:** `{arm}` is the cheapest arm to a model within {_points(points)} of the best test accuracy ({of_best}): {_acc(s)}"
    mine = sv.get(arm) or {}
    if baseline is None:
        tail = ", with no savings to give: the comparison ran neither `fixed` nor `awnn` as a baseline."
    elif arm == baseline:
        cheaper = [a for a in scored if a != arm and cost(a) < cost(arm)]
        tail = (f"; it is the baseline, and every cheaper arm tested more than {_points(points)} below the best ("
                + ", ".join(f"`{a}` {fpct(scored[a]['test_acc_mean'])}, {fsavings((sv.get(a) or {}).get('total'))}" for a in cheaper) + ")."
                if cheaper else "; it is the baseline, and no arm was cheaper.")
    elif _finite(mine.get("total")):
        lo, hi = (mine.get("total_ci") or [None, None])[:2]
        out.update(savings=mine["total"], savings_ci=[lo, hi], selection_savings=mine.get("selection"), selection_savings_ci=mine.get("selection_ci"))
        ci = f"95% CI {fx(lo)} to {fx(hi)}; " if _finite(lo) and _finite(hi) else ""
        tail = (f", {fsavings(mine['total'])} than `{baseline}` in total device-hours ({ci}"
                f"model selection alone {fsavings(mine.get('selection'))}).")
    else:
        tail = f"; its savings against `{baseline}` could not be computed (no device-hours recorded on one side)."
    sure = []
    other = best if arm != best else (baseline if baseline in scored and baseline != arm else
                                      next((a for a in sorted(scored, key=lambda a: -float(scored[a]["test_acc_mean"])) if a != arm), None))
    if other is not None:
        if min(int(s.get("test_runs") or 0), int(scored[other].get("test_runs") or 0)) < 2:
            sure.append(f"one re-training run on one side (`{arm}` or `{other}`): no spread to compare accuracies with")
        else:
            ov = _overlap(s, scored[other])
            out["overlaps"] = {"arm": other, "overlap": ov}
            sure.append(f"its accuracy's +-1 std range {'overlaps' if ov else 'does not overlap'} that of `{other}`, {_acc(scored[other])}")
    ci = out.get("savings_ci")
    if ci and all(_finite(x) for x in ci):
        sure.append("the whole 95% CI is above 1: cheaper" if ci[0] > 1 else "the whole 95% CI is below 1: dearer" if ci[1] < 1
                    else "the 95% CI includes 1: not clearly cheaper")
    moving = summary.get("budget_still_moving")
    if moving is True:
        sure.append("the selection is still moving between half and all of the epochs: a larger budget may change the verdict")
    elif moving is False:
        sure.append("the selection is stable between half and all of the epochs")
    if len(scored) > 1 and all(float(x["test_acc_mean"]) >= SATURATED for x in scored.values()):
        sure.append(f"every arm tested at {100 * SATURATED:.1f}% or more: the task is saturated, accuracy cannot rank the arms")
    if smoke:
        sure.append("**smoke budget: the numbers only check the pipeline**")
    if missing:
        sure.append("no test accuracy for " + ", ".join(f"`{a}`" for a in missing) + " (no re-training run finished ok): not ranked")
    out["text"] = head + tail + (" How sure: " + "; ".join(sure) + "." if sure else "")
    return out


def brief_summary(budget: str | None, arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A summary.json-shaped dict from each arm's totals alone (`arms`: arm ->
    `test_acc_mean`, `test_acc_std`, `test_runs`, `device_hours` {`selection`,
    `total`}), for a display that cannot read MLflow: the baseline, the
    savings without their intervals (null) and the verdict on them."""
    baseline = baseline_of(arms)
    sv = {}
    if baseline is not None:
        b = arms[baseline].get("device_hours") or {}
        for arm, s in arms.items():
            h = s.get("device_hours") or {}
            if arm != baseline:
                sv[arm] = {"baseline": baseline, **{k: rounded(b.get(k, 0.0) / h[k]) if _finite(h.get(k)) and h[k] > 0 else math.nan
                                                    for k in ("selection", "total")}, "selection_ci": [None, None], "total_ci": [None, None]}
    out = {"budget": budget, "baseline": baseline, "strategies": arms, "savings": sv, "budget_still_moving": None}
    out["verdict"] = verdict(out)
    return out
