"""search/strategies.py's registry: one entry per family, and the plans each
makes, without Ray or MLflow."""
from __future__ import annotations

import re

import pytest

from search.budget import resolve_budget
from search.errors import OptionError
from search.grid import find_grid
from search.strategies import FAMILIES, GRID_OF, REGISTRY, STOCHASTIC, StrategyOptions, asha_milestones, make_arms

SMOKE, QUICK = resolve_budget("smoke"), resolve_budget("quick")


def test_registry_is_the_one_list_of_families():
    assert set(REGISTRY) == set(FAMILIES) == {"fixed", "awnn", "tpe", "asha", "random", "awnn-asha", "fixedplus"}
    assert STOCHASTIC == ("tpe", "asha", "random", "awnn-asha")
    assert GRID_OF == {"fixed": "fixed", "awnn": "awnn", "tpe": "fixed", "asha": "fixed", "random": "fixed", "awnn-asha": "awnn",
                       "fixedplus": "fixed"}


def test_each_family_plans_its_selection():
    arms = {a.name: a for a in make_arms("doublemoon", list(FAMILIES), StrategyOptions(seed=4, repeats=1), QUICK)}
    fixed_size, awnn_size = find_grid("doublemoon", "fixed").size, find_grid("doublemoon", "awnn").size
    grid = [sp.index for sp in arms["fixed"].selection_specs(QUICK)]
    assert grid == list(range(fixed_size))  # the whole grid, in grid order
    assert [sp.index for sp in arms["awnn"].selection_specs(QUICK)] == list(range(awnn_size))
    asha = arms["asha"].selection_specs(QUICK)
    assert sorted(sp.index for sp in asha) == grid and [sp.index for sp in asha] != grid  # a seeded permutation
    rungs = asha_milestones(arms["asha"].grace_period(QUICK), 3.0, QUICK.epochs(arms["asha"].grid))
    assert rungs and all(sp.report_at == rungs for sp in asha)
    rnd = [sp.index for sp in arms["random"].selection_specs(QUICK)]
    assert len(rnd) == len(set(rnd)) == awnn_size and set(rnd) <= set(grid)
    tpe = arms["tpe"].selection_specs(QUICK)
    assert [sp.key for sp in tpe] == [f"sel-{n:04d}" for n in range(awnn_size)] and all(sp.config == {} and sp.index == -1 for sp in tpe)
    for a in arms.values():
        assert all((sp.strategy, sp.family, sp.repeat) == (a.name, a.family, a.repeat) for sp in a.selection_specs(QUICK))
    # the sweep params each family adds
    assert set(arms["asha"].describe(QUICK)) >= {"asha_grace_period", "asha_reduction_factor", "asha_max_t", "asha_rungs"}
    assert arms["tpe"].describe(QUICK)["tpe_trials"] == arms["random"].describe(QUICK)["random_trials"] == awnn_size
    assert arms["fixed"].describe(QUICK) == {"family": "fixed", "repeat": 0, "search_seed": 4}


def test_repeats_make_one_arm_per_seed_for_stochastic_families_only():
    arms = make_arms("doublemoon", ["fixed", "random", "asha"], StrategyOptions(seed=10, repeats=3), SMOKE)
    assert [(a.name, a.seed) for a in arms] == [("fixed", 10), ("random.r1", 10), ("random.r2", 11), ("random.r3", 12),
                                                ("asha.r1", 10), ("asha.r2", 11), ("asha.r3", 12)]


@pytest.mark.parametrize("families,options,message", [
    (["tpe", "random"], dict(tpe_trials=0, random_trials=0), "--tpe-trials"),  # options checked in registry order
    (["random", "asha"], dict(random_trials=999, asha_reduction_factor=1), "--random-trials: expected at most"),
    (["asha"], dict(asha_grace_period=2), "--asha-grace-period: expected an integer from 1 to 1 (the budget's 2 epochs)"),
])
def test_bad_options_name_the_flag(families, options, message):
    budget = SMOKE if "asha" in families and "grace" in str(options) else QUICK
    with pytest.raises(OptionError, match=re.escape(message)):
        make_arms("doublemoon", families, StrategyOptions(**options), budget)


@pytest.mark.parametrize("family,flag", [("tpe", "--tpe-trials"), ("random", "--random-trials")])
def test_a_default_trial_count_above_the_fixed_grid_says_it_is_the_default(tmp_path, family, flag):
    """tpe and random train each config once (search/tpe.py, "Repeats"), so their trials are at most the fixed grid's
    configs; their default, the AWNN grid's size, can exceed it in a user's grid folder: the line says where the
    number came from and what to give."""
    import yaml

    from search.grid import find_grid

    fixed = yaml.safe_load(find_grid("doublemoon", "fixed").path.read_text())
    fixed["grid"] = {"width": [8, 16], "lr": [0.01, 0.1]}  # 4 configs
    awnn = yaml.safe_load(find_grid("doublemoon", "awnn").path.read_text())  # 6 configs
    (tmp_path / "doublemoon-fixed.yaml").write_text(yaml.safe_dump(fixed))
    (tmp_path / "doublemoon-awnn.yaml").write_text(yaml.safe_dump(awnn))
    with pytest.raises(OptionError) as e:
        make_arms("doublemoon", [family], StrategyOptions(), QUICK, grid_dir=str(tmp_path))
    assert str(e.value) == (f"{flag} (its default: the AWNN grid's 6 configs): expected at most the fixed grid's 4 configs "
                            f"({tmp_path / 'doublemoon-fixed.yaml'}), found 6; give {flag} 4 or fewer")
    assert [a.trials for a in make_arms("doublemoon", [family], StrategyOptions(**{f"{family}_trials": 4}), QUICK, grid_dir=str(tmp_path))] == [4]
