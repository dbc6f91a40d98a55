"""The draw of a comparison's training (`--train-seed S`, a budget file's
`train_seed`): every selection trial trains with seed 1000 S, re-training
run r with 1000 S + r, on the same data split, so no two draws share a seed;
0 (the default) keeps the protocol's seeds 0 and 1..R and the --resume key
of comparisons made before it.  The
real comparison that records it in MLflow is in test_train_seed_ray.py."""
from __future__ import annotations

import dataclasses

import pytest

from search.budget import BUDGETS, SEED_STRIDE, TRAIN_SEED_MAX, Budget, resolve_budget
from search.errors import BudgetError
from search.grid import find_grid
from search.protocol import assessment_specs, selection_specs
from search.strategies import StrategyOptions, make_arms


@pytest.mark.parametrize("seed", [0, 1, 7, TRAIN_SEED_MAX])
def test_every_trial_of_every_phase_and_grid_takes_its_seed_from_the_budget(seed):
    budget = BUDGETS["smoke"].with_train_seed(seed)
    for strategy in ("fixed", "awnn"):
        grid = find_grid("doublemoon", strategy)
        specs = selection_specs(grid, budget)
        assert specs and {sp.config["seed"] for sp in specs} == {1000 * seed}
        assert {sp.config["data_seed"] for sp in specs} == {0}  # the data split never moves with it
        retrain = assessment_specs(specs[0].config, grid, budget)
        assert [sp.config["seed"] for sp in retrain] == [1000 * seed + r for r in range(1, budget.runs(grid) + 1)]
        assert max(sp.config["seed"] for sp in retrain) <= 2**32 - 1  # awnn.config.MAX_SEED
        assert {sp.config["data_seed"] for sp in retrain} == {0}
        # everything but the seed is the default's
        plain = selection_specs(grid, BUDGETS["smoke"])
        assert [{**sp.config, "seed": 0} for sp in specs] == [sp.config for sp in plain]


def test_the_stochastic_strategies_plans_take_it_too():
    budget = BUDGETS["smoke"].with_train_seed(5)
    arms = make_arms("doublemoon", ["random", "asha"], StrategyOptions(seed=3), budget)
    for arm in arms:
        specs = arm.selection_specs(budget)
        assert specs and {sp.config["seed"] for sp in specs} == {5000}, arm.name


def test_the_default_seed_leaves_the_resume_key_and_budget_param_as_before():
    for name, budget in BUDGETS.items():
        assert "train_seed" not in budget.to_dict(), name
        assert budget.with_train_seed(None) is budget
        assert budget.with_train_seed(0).to_dict() == budget.to_dict()
    assert BUDGETS["quick"].with_train_seed(3).to_dict()["train_seed"] == 3  # another seed: another comparison to resume


@pytest.mark.parametrize("bad", [-1, TRAIN_SEED_MAX + 1, 1.5, True, "1"])
def test_a_bad_train_seed_names_the_flag_and_the_range(bad):
    with pytest.raises(BudgetError, match=rf"--train-seed: expected an integer from 0 to {TRAIN_SEED_MAX}, found"):
        BUDGETS["quick"].with_train_seed(bad)


def test_a_budget_file_sets_the_seed_and_checks_it(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text("epoch_scale: 0.1\ntrain_seed: 0\n")
    assert resolve_budget(str(f)).train_seed == 0  # 0 is allowed, unlike the other integer keys' lowest 1
    f.write_text("epoch_scale: 0.1\ntrain_seed: 12\n")
    b = resolve_budget(str(f))
    assert b.train_seed == 12 and b.seed(0) == 12000 and b.seed(3) == 12003
    assert b.with_train_seed(2).train_seed == 2  # the command line wins over the file
    for value in ("-1", "2.5", "true", f"{TRAIN_SEED_MAX + 1}", ".nan"):
        f.write_text(f"train_seed: {value}\n")
        with pytest.raises(BudgetError, match=rf"b.yaml: key 'train_seed': expected an integer from 0 to {TRAIN_SEED_MAX}"):
            resolve_budget(str(f))


def test_draws_share_no_seed_and_a_draw_with_too_many_retrainings_is_refused_before_it_runs():
    grid = find_grid("doublemoon", "awnn")
    seeds = {s: {BUDGETS["quick"].with_train_seed(s).seed(r) for r in range(0, SEED_STRIDE)} for s in range(4)}
    assert all(not (seeds[a] & seeds[b]) for a in seeds for b in seeds if a < b)
    many = Budget("many", retrain_runs=SEED_STRIDE)
    many.check_seeds(grid)  # draw 0: the protocol's seeds 0 and 1..R, however many
    with pytest.raises(BudgetError, match=rf"budget many: with train_seed 2, at most {SEED_STRIDE - 1} re-training runs"):
        many.with_train_seed(2).check_seeds(grid)
    Budget("fine", retrain_runs=SEED_STRIDE - 1).with_train_seed(TRAIN_SEED_MAX).check_seeds(grid)


def test_the_cli_refuses_a_bad_seed_in_one_line_before_anything_starts(tmp_path):
    from conftest import run_awnn

    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--train-seed", "-3"], cwd=tmp_path, timeout=120)
    assert p.returncode == 2
    assert f"--train-seed: expected an integer from 0 to {TRAIN_SEED_MAX}, found -3" in p.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "awnn-results").exists()  # nothing started


def test_the_report_states_a_seed_other_than_the_default():
    from tracking import header

    class D:  # the parts of an Analysis _budget_text reads
        strategies: list = []

    import pandas as pd

    d = D()
    d.sweeps = pd.DataFrame()
    d.runs = pd.DataFrame({"strategy": ["x"] * 3, "phase": ["selection", "assessment", "assessment"],
                           "config": [{"seed": 4000, "epochs": 2}, {"seed": 4001, "epochs": 2}, {"seed": 4002, "epochs": 2}]})
    base = {"budget": "smoke", "budget_params": {"epoch_scale": 0.0, "min_epochs": 2, "max_epochs": 2, "retrain_runs": 2}, "folds": 1}
    for seed, said in ((0, False), (4, True)):
        d.comparison = {**base, "train_seed": seed}
        text = header._budget_text(dataclasses.make_dataclass("A", [("data", object)])(d))
        assert ("Training draw `--train-seed 4` (selection seed 4000; assessment seeds 4001, 4002)" in text) is said, text
        assert ("Training draw" in text) is said
