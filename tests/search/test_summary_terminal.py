"""The terminal summary of `awnn compare` (issue #17): every line fits 100
columns whatever the arms, configs and problems; the savings ratio against
the fixed grid and AWNN's learned width as mean +- std (min..max)."""
from __future__ import annotations

import io
from types import SimpleNamespace

from search.budget import resolve_budget
from search.record import PhaseResult, StrategyResult
from search.strategies import StrategyOptions, make_arms
from search.summary import WIDTH, print_summary


def _result(arm, sel_hours, n_sel, acc, widths=None, status="ok"):
    sel = PhaseResult(arm.name, "selection")
    sel.outcomes = [{"key": f"sel-{i:04d}", "status": status if i == 0 else "ok", "device_hours": sel_hours / n_sel} for i in range(n_sel)]
    sel.wall_seconds = 125.0
    ass = PhaseResult(arm.name, "assessment")
    ass.outcomes = [{"key": f"ass-{r:02d}", "status": "ok", "device_hours": 0.01, "test_acc": a,
                     **({"widths_at_best": w} if widths else {})} for r, (a, w) in enumerate(zip(acc, widths or [None] * len(acc)), 1)]
    ass.wall_seconds = 30.0
    cfg = {"model": arm.family if arm.family in ("fixed", "awnn") else "fixed", "hidden_layers": 4, "width": 256,
           "activation": "leaky_relu", "batch_size": 128, "lr": 0.001, "sigma_theta": 100.0}
    import statistics

    summary = {"test_acc_mean": statistics.fmean(acc), "test_acc_std": statistics.stdev(acc), "runs_ok": len(acc)}
    return StrategyResult(arm.name, arm.grid, sel, ass, selected={"key": "sel-0001", "config": cfg}, summary=summary, family=arm.family)


def test_summary_fits_100_columns_and_shows_ratio_and_width_spread():
    budget = resolve_budget("smoke")
    arms = make_arms("spiralhard", ["fixed", "awnn", "random", "asha"], StrategyOptions(repeats=3), budget)
    results = []
    for a in arms:
        if a.family == "awnn":
            results.append(_result(a, 0.1, 18, [0.95, 0.97, 0.96], widths=[[200, 100], [250, 120], [180, 90]]))
        else:
            results.append(_result(a, 0.8 if a.family == "fixed" else 0.2, a.trials, [0.98, 0.99, 0.985], status="diverged"))
    comparison = SimpleNamespace(id="spiralhard-20261124-031500-abcd", task="spiralhard", budget=budget, protocol="holdout",
                                 tracking_uri="sqlite:////a/very/long/path/to/some/folder/where/the/user/keeps/mlflow/stores/mlflow.db")
    buf = io.StringIO()
    print_summary(comparison, results, stream=buf)
    text = buf.getvalue()
    too_long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_long, too_long
    rows = {}
    for line in text.splitlines():  # the table's rows (the selected configs below start with two spaces)
        if line and not line.startswith(" ") and line.split()[0] in {r.strategy for r in results}:
            rows.setdefault(line.split()[0], line)
    assert "1.00x" in rows["fixed"] and "8.00x" in rows["awnn"]  # the fixed grid's selection device-hours / the arm's
    assert "313 +- 51 (270..370)" in rows["awnn"]  # learned totals 300, 370, 270: mean +- std (min..max)
    assert "256 x 4" in rows["fixed"]
    assert "selected configs:" in text and "warning: the smoke budget" in text
