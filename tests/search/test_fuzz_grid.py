"""Fuzzing the grid loader: whatever the file holds, `load_grid` either
returns a valid grid or raises the documented `GridError` (one line),
never anything else (no TypeError, KeyError, yaml errors, ...)."""
from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awnn.config import TrainConfig
from awnn.data import task_kind
from search.grid import TOP_KEYS, Grid, GridError, load_grid

CONFIG_KEYS = sorted(TrainConfig.keys())
KEYS = st.sampled_from(sorted(TOP_KEYS) + CONFIG_KEYS + ["widht", "epoch", "", "grid ", "0"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 300), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["doublemoon", "spiral", "fixed", "awnn", "relu", "adam", "sgd", "gaussian", "x", "", "1e-3"]),
    st.text(max_size=8),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)

# mostly well-formed grids with one thing off, so the fuzzer gets past the first check
NEAR_VALID = st.fixed_dictionaries(
    {
        "task": st.one_of(st.just("doublemoon"), SCALARS),
        "strategy": st.one_of(st.sampled_from(["fixed", "awnn"]), SCALARS),
        "epochs": st.one_of(st.integers(-2, 20), SCALARS),
        "fixed": st.one_of(st.dictionaries(st.sampled_from(CONFIG_KEYS), SCALARS, max_size=3), VALUES),
        "grid": st.one_of(st.dictionaries(st.sampled_from(CONFIG_KEYS), st.lists(SCALARS, max_size=3), max_size=2), VALUES),
    },
    optional={"patience": VALUES, "retrain_runs": VALUES, "description": VALUES},
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _load(tmp_path, text: str):
    p = tmp_path / "fuzz-grid.yaml"
    p.write_text(text)
    try:
        g = load_grid(p)
    except GridError as e:
        msg = str(e)
        assert msg and "\n" not in msg, msg
        assert str(p) in msg or "fuzz-grid.yaml" in msg, msg
        return None
    assert isinstance(g, Grid) and g.size >= 1
    configs = g.configs()
    assert len(configs) == g.size
    trains = [repr(sorted(TrainConfig.from_dict(cfg).applicable(task_kind(g.task)).items())) for cfg in configs]  # (valid configs)
    assert len(set(trains)) == len(trains), "two points of a loaded grid train the same network"  # (search/grid.py _twins)
    return g


@FUZZ
@given(data=st.one_of(NEAR_VALID, st.dictionaries(KEYS, VALUES, max_size=6), VALUES))
def test_fuzz_grid_structures_load_or_raise_grid_error(tmp_path, data):
    _load(tmp_path, yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.text(alphabet="{}[]:,- \n\t'\"#&*!|>%@`abc01", max_size=120)))
def test_fuzz_grid_arbitrary_text_loads_or_raises_grid_error(tmp_path, text):
    _load(tmp_path, text)


@FUZZ
@given(raw=st.binary(max_size=120))
def test_fuzz_grid_arbitrary_bytes_load_or_raise_grid_error(tmp_path, raw):
    p = tmp_path / "fuzz-grid.yaml"
    p.write_bytes(b"task: doublemoon\nstrategy: fixed\n" + raw)
    try:
        load_grid(p)
    except GridError as e:
        assert "\n" not in str(e) and "fuzz-grid.yaml" in str(e)
