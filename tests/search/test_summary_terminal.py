"""The terminal summary of `awnn compare` (issues #17, #32): every line fits
100 columns whatever the arms, configs and problems; it opens with the
verdict; the savings against the baseline (the fixed grid's device-hours /
the arm's, the baseline named) and AWNN's learned width as mean +- std
(min..max).  Here MLflow cannot be read (the store does not exist), so the
numbers come from the arms' totals (tests/tracking/test_ratios_one_definition.py
checks a real comparison's terminal against its report and MLflow)."""
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


def test_summary_fits_100_columns_and_shows_ratio_and_width_spread(tmp_path):
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
    assert "baseline" in rows["fixed"] and "8.00x" in rows["awnn"]  # the fixed grid's selection device-hours / the arm's
    assert any(line.startswith("arm ") and "sel vs fixed" in line for line in text.splitlines())  # the baseline named in the header
    assert "313 +- 51 (270..370)" in rows["awnn"]  # learned totals 300, 370, 270: mean +- std (min..max)
    assert "256 x 4" in rows["fixed"]
    assert "selected configs:" in text and "warning: the smoke budget" in text
    # the verdict comes first: random.r1 is within 1 point of the best (98.5%) and cheapest in total (0.23 dev-h)
    first = " ".join(text.strip().split("\n\n")[0].splitlines()[1:])  # the lines between the title and the table
    first = " ".join(first.split())
    assert first.startswith("Verdict: random.r1 is the cheapest arm to a model within 1 point of the best test accuracy"), first
    assert "3.61x cheaper than fixed in total device-hours" in first  # 0.83 / 0.23, 3 significant digits
    assert "awnn      selection 8.00x cheaper; with re-training 6.38x cheaper" in text  # 0.83 / 0.13


def test_summary_without_a_fixed_arm_names_awnn_as_the_baseline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative store that does not exist: never created by the summary
    budget = resolve_budget("smoke")
    arms = make_arms("spiralhard", ["awnn", "tpe"], StrategyOptions(), budget)
    results = [_result(a, 0.1 if a.family == "awnn" else 0.07, 18 if a.family == "awnn" else 6, [0.95, 0.97, 0.96]) for a in arms]
    comparison = SimpleNamespace(id="spiralhard-x", task="spiralhard", budget=budget, protocol="holdout", tracking_uri="sqlite:///m.db")
    buf = io.StringIO()
    print_summary(comparison, results, stream=buf)
    text = buf.getvalue()
    assert "sel vs awnn" in text and "savings vs awnn = awnn's device-hours / the arm's" in text
    tpe = next(line for line in text.splitlines() if line.startswith("tpe "))
    assert "1.43x" in tpe  # 0.1 / 0.07
    assert "tpe is the cheapest arm" in text and "1.30x cheaper than awnn in total device-hours" in " ".join(text.split())  # 0.13 / 0.10
    assert not (tmp_path / "m.db").exists()


def test_a_long_learned_width_is_shown_whole_within_100_columns():
    """SpiralHard at the standard budget: AWNN learned 883..1723 neurons; the
    row once ended "(883..172", cut at 100 columns."""
    budget = resolve_budget("smoke")
    arms = make_arms("spiralhard", ["fixed", "awnn"], StrategyOptions(), budget)
    results = [_result(a, 0.5 if a.family == "fixed" else 0.2, a.trials, [0.9993, 0.9987, 0.9999] if a.family == "fixed" else [0.998, 0.9975, 0.9985],
                       widths=[[883], [1723], [1177]] if a.family == "awnn" else None) for a in arms]
    comparison = SimpleNamespace(id="spiralhard-20261125-172340-8113", task="spiralhard", budget=budget, protocol="holdout",
                                 tracking_uri="sqlite:////tmp/nowhere/mlflow.db")
    buf = io.StringIO()
    print_summary(comparison, results, stream=buf)
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= WIDTH for line in lines), [line for line in lines if len(line) > WIDTH]
    assert any(line.strip() == "1261 +- 426 (883..1723)" for line in lines), "\n".join(lines)  # learned 883, 1723, 1177
