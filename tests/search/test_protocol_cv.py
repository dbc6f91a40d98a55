"""The cross-validated risk assessment of the graph tasks (issue #16: the
protocol of Errica et al. 2020): the folds, the trial plan per fold, the
selection per fold and the summary over folds, without Ray; the budget,
grid and command-line choices of the protocol and their errors."""
from __future__ import annotations

import io
import statistics

import numpy as np
import pytest

from awnn.data.graphs import FOLDS, fold_assignment, folds_digest, tu_fold_splits
from search.budget import BUDGETS, resolve_budget
from search.errors import BudgetError, OptionError
from search.grid import GridError, grid_from_dict
from search.phases import PhasedSearcher
from search.protocol import fold_assessment_specs, most_selected, per_fold, protocol_name, select_by_fold, summarize_assessment
from search.record import OutcomeRecord
from search.strategies import StrategyOptions, make_arms, with_protocol
from tracking.contract import assessment_summary, fold_key, fold_of_key

from test_phases import Hooks, drive


def labels(n=157, classes=2, seed=3):
    return np.random.default_rng(seed).integers(0, classes, n)


@pytest.mark.parametrize("classes", [2, 3])
def test_ten_disjoint_stratified_folds_cover_the_set(classes):
    y = labels(classes=classes)
    a = fold_assignment(y, seed=0)
    assert set(a.tolist()) == set(range(FOLDS))  # every example in exactly one fold
    sizes = np.bincount(a, minlength=FOLDS)
    assert sizes.sum() == len(y) and sizes.max() - sizes.min() <= classes
    for c in range(classes):  # stratified: each fold holds its share of each class (to within one)
        per = np.bincount(a[y == c], minlength=FOLDS)
        assert per.max() - per.min() <= 1
    for k in range(FOLDS):  # the split a trial of fold k trains on
        outer, inner = tu_fold_splits(y, k, seed=0)
        assert sorted(outer.test.tolist()) == np.flatnonzero(a == k).tolist()
        for part in (outer.train, outer.val, inner.train, inner.val):
            assert not set(part.tolist()) & set(outer.test.tolist())
        assert len(set(outer.train.tolist()) | set(outer.val.tolist()) | set(outer.test.tolist())) == len(y)


def test_the_same_folds_are_drawn_again_and_the_digest_says_when_not():
    y = labels()
    assert (fold_assignment(y, 0) == fold_assignment(y.copy(), 0)).all()  # a resumed driver, a trial on another node
    assert folds_digest(y, 0) == folds_digest(y.copy(), 0)
    assert folds_digest(y, 1) != folds_digest(y, 0)  # another data seed
    changed = y.copy()
    changed[[0, 1]] = changed[[1, 0]] if changed[0] != changed[1] else (1 - changed[0], changed[1])
    assert folds_digest(changed, 0) != folds_digest(y, 0)  # other labels or order: other folds


def test_fold_keys_round_trip():
    assert fold_key(None, "sel-0003") == "sel-0003" and fold_of_key("sel-0003") is None
    assert fold_key(7, "ass-02") == "f7-ass-02" and fold_of_key("f7-ass-02") == 7
    assert protocol_name(1) == "holdout" and protocol_name(10) == "cv10"


def test_summary_over_folds_is_the_mean_of_fold_means():
    accs = [0.9, 0.8, 0.7, 0.6, 0.65]
    folds = [0, 0, 1, 2, 2]
    s = assessment_summary(accs, folds=folds)
    means = [0.85, 0.7, 0.625]
    assert s["test_acc_mean"] == pytest.approx(statistics.fmean(means))
    assert s["test_acc_std"] == pytest.approx(statistics.stdev(means))
    assert s["runs_ok"] == 5
    plain = assessment_summary(accs)  # a hold-out: over the runs
    assert plain["test_acc_mean"] == pytest.approx(statistics.fmean(accs)) and plain == assessment_summary(accs, folds=[None] * 5)


def test_budgets_and_protocol_choose_the_folds():
    arms = make_arms("nci1", ["fixed", "awnn"], StrategyOptions(), BUDGETS["paper"])
    assert {a.grid.folds for a in arms} == {10}
    assert BUDGETS["paper"].folds_for(arms[0].grid) == 10  # the paper's protocol
    assert BUDGETS["quick"].folds_for(arms[0].grid) == BUDGETS["smoke"].folds_for(arms[0].grid) == 1  # CPU budgets: a hold-out
    assert with_protocol(BUDGETS["smoke"], "cv10", "nci1").folds_for(arms[0].grid) == 10
    assert with_protocol(BUDGETS["paper"], "holdout", "nci1").folds_for(arms[0].grid) == 1
    assert "folds" not in BUDGETS["paper"].to_dict()  # (the --resume key of hold-out comparisons is as before)
    with pytest.raises(OptionError, match=r"--protocol cv10: task spiralhard has one hold-out split; cv10 applies to nci1, reddit_binary"):
        with_protocol(BUDGETS["smoke"], "cv10", "spiralhard")
    with pytest.raises(OptionError, match=r"--protocol: expected one of \['holdout', 'cv10'\], found 'cv5'"):
        with_protocol(BUDGETS["smoke"], "cv5", "nci1")


@pytest.mark.parametrize("family", ["tpe", "asha"])
def test_sequential_and_early_stopping_searches_are_refused_under_cv10(family):
    budget = with_protocol(BUDGETS["smoke"], "cv10", "nci1")
    with pytest.raises(OptionError, match=rf"--strategies {family}: not available under the cv10 protocol"):
        make_arms("nci1", ["awnn", family], StrategyOptions(), budget)
    make_arms("nci1", ["awnn", family], StrategyOptions(), BUDGETS["smoke"])  # a hold-out takes them


def test_budget_file_and_grid_key_folds(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text("epoch_scale: 0.01\nfolds: 10\n")
    assert resolve_budget(str(f)).folds == 10
    f.write_text("folds: 0\n")
    with pytest.raises(Exception, match=r"key 'folds': expected an integer >= 1, found 0"):
        resolve_budget(str(f))
    base = {"task": "nci1", "strategy": "awnn", "epochs": 4, "fixed": {"model": "awnn"}, "grid": {"pooling": ["sum", "mean"]}}
    assert grid_from_dict({**base, "folds": 10}).folds == 10
    assert grid_from_dict(base).digest() == grid_from_dict({**base, "folds": 1}).digest() != grid_from_dict({**base, "folds": 10}).digest()
    with pytest.raises(GridError, match=r"key 'folds': expected 1 \(a hold-out\) or 10 \(task nci1's outer folds\), found 5"):
        grid_from_dict({**base, "folds": 5})
    with pytest.raises(GridError, match=r"key 'folds': expected 1 \(task doublemoon has one hold-out split\), found 10"):
        grid_from_dict({**base, "task": "doublemoon", "fixed": {"model": "awnn"}, "grid": {"rate": [0.1]}, "folds": 10})
    with pytest.raises(GridError, match=r"key 'fixed.fold': expected no fold: with folds: 10 the protocol trains every fold"):
        grid_from_dict({**base, "folds": 10, "fixed": {"model": "awnn", "fold": 3}})


@pytest.mark.parametrize("task,folds,expected", [
    ("doublemoon", 10, "1 (task doublemoon has one hold-out split)"), ("spiralhard", 2, "1 (task spiralhard has one hold-out split)"),
    ("nci1", 3, "1 (a hold-out) or 10 (task nci1's outer folds)"), ("nci1", 10, None), ("doublemoon", 1, None), ("nci1", 1, None),
])
def test_a_budget_files_folds_are_checked_against_the_task_as_a_grids_are(tmp_path, task, folds, expected):
    """Before (2026-12-07): `folds: 10` in a budget file on a hold-out task ended `awnn compare` in an AttributeError from
    the driver's data check ('TensorTask' object has no attribute 'folds_digest'); a grid's `folds` and --protocol were
    checked, a budget file's were not."""
    f = tmp_path / "b.yaml"
    f.write_text(f"epoch_scale: 0\nmin_epochs: 2\nmax_epochs: 2\nfolds: {folds}\n")
    budget = resolve_budget(str(f))
    if expected is None:
        budget.check_folds(task, str(f))
        return
    with pytest.raises(BudgetError) as e:
        budget.check_folds(task, str(f))
    assert str(e.value) == f"{f}: key 'folds': expected {expected}, found {folds}"


def test_a_budget_files_wrong_folds_end_a_comparison_in_one_line_and_protocol_replaces_them(tmp_path):
    from conftest import run_awnn
    from search.sweep import Comparison
    from search.tune import RunSettings

    f = tmp_path / "b10.yaml"
    f.write_text("epoch_scale: 0\nmin_epochs: 2\nmax_epochs: 2\nretrain_runs: 1\nfolds: 10\n")
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", str(f), "--num-cpus", "2"], cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"awnn compare: error: {f}: key 'folds': expected 1 (task doublemoon has one hold-out split), found 10"], p.stderr[-3000:]
    assert not (tmp_path / "mlflow.db").exists()
    c = Comparison("doublemoon", ["fixed", "awnn"], str(f), RunSettings(storage=str(tmp_path / "results")),
                   tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", protocol="holdout")  # (nothing starts before run())
    assert c.folds == 1


def fold_score(spec: dict) -> dict:
    """Fold k's best selection trial is grid index k % 3 (each fold selects its own);
    re-training run r of fold k scores 0.5 + 0.04 k + 0.01 r."""
    fold = fold_of_key(spec["key"]) or 0
    out = {"key": spec["key"], "config": spec["config"], "index": spec["index"], "status": "ok", "error": None,
           "best_val_loss": 1.0, "device_hours": 0.001, "compute_seconds": 3.6, "gpu_hours": 0.0}
    if spec["phase"] == "assessment":
        return {**out, "best_val_acc": 0.9, "test_acc": 0.5 + 0.04 * fold + 0.01 * spec["index"]}
    return {**out, "best_val_acc": 0.9 if spec["index"] == fold % 3 else 0.6}


def test_searcher_runs_every_folds_selection_then_each_folds_retraining(tmp_path):
    budget = with_protocol(resolve_budget("smoke"), "cv10", "nci1")
    arms = make_arms("nci1", ["fixed", "awnn"], StrategyOptions(), budget)
    record = OutcomeRecord()
    hooks = Hooks()
    selected = {}
    hooks.config_selected = lambda arm, best, by_fold=None: selected.setdefault(arm.name, (best, dict(by_fold or {})))
    searcher = PhasedSearcher(arms, budget, record, hooks, stream=io.StringIO(), trial_settings={})
    suggested = drive(searcher, record, outcome=fold_score, concurrency=4)
    runs = budget.runs(arms[0].grid)
    assert len(suggested) == searcher.max_trials() == sum((a.grid.size + runs) * 10 for a in arms)
    for a, result in zip(arms, searcher.results):
        sel = [s for s in suggested if s["strategy"] == a.name and s["phase"] == "selection"]
        ass = [s for s in suggested if s["strategy"] == a.name and s["phase"] == "assessment"]
        assert len(sel) == 10 * a.grid.size and len(ass) == 10 * runs
        assert {s["key"] for s in sel} == {fold_key(k, f"sel-{i:04d}") for k in range(10) for i in range(a.grid.size)}
        assert all(s["config"]["fold"] == fold_of_key(s["key"]) and s["config"]["split"] == "inner" for s in sel)
        best, by_fold = selected[a.name]
        assert sorted(by_fold) == list(range(10))
        for k in range(10):  # each fold re-trains the config its own selection chose, on its own outer split
            chosen = by_fold[k]
            assert chosen["index"] == k % 3 and chosen["key"] == fold_key(k, f"sel-{k % 3:04d}")
            mine = [s for s in ass if fold_of_key(s["key"]) == k]
            assert sorted(s["key"] for s in mine) == [fold_key(k, f"ass-{r:02d}") for r in range(1, runs + 1)]
            assert all(s["config"]["fold"] == k and s["config"]["split"] == "outer" for s in mine)
            assert all({**s["config"], "split": "inner", "seed": 0} == {**chosen["config"], "epochs": s["config"]["epochs"],
                                                                          "patience": s["config"]["patience"]} for s in mine)
        assert best["index"] == 0  # folds 0, 3, 6, 9 chose index 0: the most often selected config
        means = [statistics.fmean(0.5 + 0.04 * k + 0.01 * r for r in range(1, runs + 1)) for k in range(10)]
        assert result.summary["test_acc_mean"] == pytest.approx(statistics.fmean(means))
        assert result.summary["test_acc_std"] == pytest.approx(statistics.stdev(means))
        assert result.summary["runs_ok"] == 10 * runs


def test_a_fold_without_a_usable_trial_is_not_retrained_and_said(tmp_path):
    budget = with_protocol(resolve_budget("smoke"), "cv10", "nci1")
    arms = make_arms("nci1", ["awnn"], StrategyOptions(), budget)

    def fold3_fails(spec):
        out = fold_score(spec)
        return {**out, "status": "failed", "best_val_acc": float("nan")} if fold_of_key(spec["key"]) == 3 and spec["phase"] == "selection" else out

    record, hooks = OutcomeRecord(), Hooks()
    searcher = PhasedSearcher(arms, budget, record, hooks, stream=io.StringIO(), trial_settings={})
    suggested = drive(searcher, record, outcome=fold3_fails)
    ass = [s for s in suggested if s["phase"] == "assessment"]
    assert {fold_of_key(s["key"]) for s in ass} == set(range(10)) - {3}
    assert any("fold(s) 3" in line for line in hooks.logs)


def test_plan_helpers_leave_a_holdout_unchanged():
    budget = resolve_budget("smoke")
    arms = make_arms("nci1", ["awnn"], StrategyOptions(), budget)
    specs = arms[0].selection_specs(budget)
    assert per_fold(specs, 1) is specs and all(fold_of_key(s.key) is None for s in specs)
    outcomes = [fold_score({**s.to_dict(), "key": s.key}) for s in specs]
    chosen = select_by_fold(outcomes)
    assert list(chosen) == [None]
    assert [s.key for s in fold_assessment_specs(chosen, arms[0].grid, budget)] == ["ass-01", "ass-02"]
    assert most_selected(chosen) is chosen[None]
    assert summarize_assessment([{"key": "ass-01", "status": "ok", "test_acc": 0.5}, {"key": "ass-02", "status": "ok", "test_acc": 0.7}])["test_acc_mean"] == pytest.approx(0.6)
