"""A grid whose points would train the same network twice is refused (2026-12-07, found by trying it: a fixed grid that
also listed `rate: [0.1, 0.01, 0.5]`, an AWNN key, loaded as 6 configs and ran 6 trials of 2 networks, tripling the
fixed arm's cost, the baseline of every savings ratio).  Two points train the same network where the keys that apply
to them (TrainConfig.applicable: what a run logs as its params) are equal; the error names the keys that change
nothing in any config, with why, or the two points and what tells them apart."""
from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awnn.config import TrainConfig
from awnn.data import task_kind
from search.grid import GridError, grid_from_dict, load_grid

BASE = {"task": "doublemoon", "epochs": 10, "retrain_runs": 1}


def _grid(strategy: str, fixed: dict, grid: dict) -> dict:
    return {**BASE, "strategy": strategy, "fixed": fixed, "grid": grid}


FIXED = {"model": "fixed", "optimizer": "adam", "width": 8}
AWNN = {"model": "awnn", "optimizer": "adam"}


@pytest.mark.parametrize("strategy,fixed,grid,says", [
    ("fixed", FIXED, {"lr": [0.1, 0.01], "rate": [0.1, 0.01, 0.5]},
     "key 'grid.rate': expected keys that change the network trained, found rate, which changes nothing in any config of this "
     "grid (an AWNN key, and the model is fixed); its 6 configs are 2 different networks, each trained as a trial that costs "
     "as much: remove rate from grid"),
    ("awnn", AWNN, {"width": [8, 16]}, "found width, which changes nothing in any config of this grid (an AWNN model learns its widths)"),
    ("fixed", FIXED, {"momentum": [0.5, 0.9], "sigma_theta": [1.0, 10.0]},
     "found momentum, sigma_theta, which change nothing in any config of this grid (momentum: optimizer adam does not use it; "
     "sigma_theta: an AWNN key, and the model is fixed); its 4 configs are one network"),
    ("fixed", FIXED, {"conv_layers": [2, 3]}, "(task doublemoon (tabular) does not use it)"),
    ("fixed", FIXED, {"lr_gamma": [0.1, 0.5]}, "(lr_schedule none does not use it)"),
    ("awnn", AWNN, {"compress_rate_mean": [0.05, 0.1]}, "(online compression is off (compress_start_epoch 0))"),
    ("fixed", {"model": "fixed", "width": 8}, {"optimizer": ["adam", "sgd"], "momentum": [0.5, 0.9]},
     "key 'grid.momentum': expected values that change the network trained, found grid points 0 and 1 that differ only in "
     "momentum (0.5 and 0.9), which change nothing in them (momentum: optimizer adam does not use it): they would train the "
     "same network twice; the grid's 4 configs are 3 different networks, each trained as a trial that costs as much: split "
     "the grid so that these keys vary only where they apply"),
    ("fixed", FIXED, {"lr": [1, 1.0]}, "differ only in lr (1 and 1.0), the same values once read: they would train the same "
     "network twice; the grid's 2 configs are one network, each trained as a trial that costs as much: write each value once"),
])
def test_a_grid_whose_points_train_the_same_network_is_refused_in_one_line(tmp_path, strategy, fixed, grid, says):
    path = tmp_path / f"doublemoon-{strategy}.yaml"
    path.write_text(yaml.safe_dump(_grid(strategy, fixed, grid), sort_keys=False))
    with pytest.raises(GridError) as e:
        load_grid(path)
    text = str(e.value)
    assert text.startswith(f"{path}: key 'grid.") and "\n" not in text and says in text, text


@pytest.mark.parametrize("strategy,fixed,grid", [
    ("fixed", {"model": "fixed", "width": 8}, {"optimizer": ["sgd"], "momentum": [0.5, 0.9]}),  # momentum applies to sgd
    ("fixed", {"model": "fixed", "optimizer": "adam"}, {"lr": [0.1, 0.01], "width": [8, 16]}),
    ("awnn", AWNN, {"rate": [0.1, 0.01], "sigma_theta": [1.0, 10.0]}),
    ("awnn", {**AWNN, "compress_start_epoch": 2, "compress_end_epoch": 4}, {"compress_rate_mean": [0.05, 0.1]}),
])
def test_a_grid_whose_keys_all_apply_loads(strategy, fixed, grid):
    g = grid_from_dict(_grid(strategy, fixed, grid))
    assert g.size == len(g.configs()) >= 2


KEYS = {"lr": [0.1, 0.01, 1, 1.0], "width": [8, 16], "rate": [0.1, 0.01], "momentum": [0.5, 0.9], "sigma_theta": [1.0, 10.0],
        "optimizer": ["adam", "sgd"], "lr_gamma": [0.1, 0.5], "activation": ["relu", "tanh"], "embed_dim": [16, 32]}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["fixed", "awnn"]),
       picks=st.dictionaries(st.sampled_from(sorted(KEYS)), st.integers(1, 3), min_size=1, max_size=3),
       data=st.data())
def test_a_grid_loads_exactly_when_its_points_train_distinct_networks(model, picks, data):
    grid = {k: data.draw(st.lists(st.sampled_from(KEYS[k]), min_size=1, max_size=n, unique_by=repr)) for k, n in picks.items()}
    spec = _grid(model, {"model": model, **({"width": 8} if model == "fixed" and "width" not in grid else {})}, grid)
    points = [{"task": "doublemoon", **spec["fixed"], **dict(zip(grid, values))} for values in _product(list(grid.values()))]
    trains = [repr(sorted(TrainConfig.from_dict(p).applicable(task_kind("doublemoon")).items())) for p in points]
    try:
        g = grid_from_dict(spec)
    except GridError as e:
        assert len(set(trains)) < len(trains), str(e)  # refused only where two points are twins
        assert f"are {'one network' if len(set(trains)) == 1 else f'{len(set(trains))} different networks'}" in str(e), str(e)
        return
    assert len(set(trains)) == len(trains) == g.size


def _product(lists):
    import itertools

    return list(itertools.product(*lists))


def test_twins_under_the_cpu_budgets_values_are_refused_too():
    """The quick and smoke budgets train a grid's `cpu` values: a grid distinct as written can have twins there."""
    spec = _grid("fixed", {"model": "fixed", "width": 8, "optimizer": "sgd"}, {"momentum": [0.5, 0.9]})
    assert grid_from_dict(spec).size == 2
    with pytest.raises(GridError) as e:
        grid_from_dict({**spec, "cpu": {"optimizer": "adam"}})
    assert ("key 'grid.momentum': expected keys that change the network trained, found momentum, which changes nothing in any "
            "config of this grid with its cpu values (the CPU budgets') (optimizer adam does not use it)") in str(e.value), str(e.value)


def test_a_fixed_or_cpu_key_that_changes_no_config_is_kept_for_the_drivers_note():
    """Harmless (every config has the same value), so a note, not an error: one fixed section shared by a fixed and an
    AWNN grid is a common way to write them (tests/system/test_gpu_ray.py does)."""
    g = grid_from_dict(_grid("awnn", {**AWNN, "width": 16, "momentum": 0.9}, {"activation": ["relu", "tanh"]}))
    assert g.idle == {"fixed.width": "an AWNN model learns its widths", "fixed.momentum": "optimizer adam does not use it"}
    g = grid_from_dict(_grid("fixed", {"model": "fixed", "width": 8}, {"optimizer": ["adam", "sgd"]}) | {"cpu": {"momentum": 0.5}})
    assert g.idle == {}  # momentum applies to the sgd configs
    g = grid_from_dict(_grid("fixed", FIXED, {"lr": [0.1, 0.01]}) | {"cpu": {"rate": 0.5}})
    assert g.idle == {"cpu.rate": "an AWNN key, and the model is fixed"}
    assert grid_from_dict(_grid("fixed", FIXED, {"lr": [0.1, 0.01]})).idle == {}
