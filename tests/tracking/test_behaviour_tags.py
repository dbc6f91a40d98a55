"""The analysis reads how to treat an arm's trials from tags its sweep runs
carry (awnn.order, awnn.stops_early, written from the strategy registry at
sweep time), not from family names; stores written before the tags are read
as before (by family).  That a real comparison's sweep runs carry the tags
is checked in tests/tracking/test_behaviour_tags_ray.py."""
from __future__ import annotations

import math

import pandas as pd

from search.strategies import REGISTRY
from tracking import analysis as A
from tracking_helpers import comparison_data as _data
from tracking_helpers import trial_row as _run


def _sweeps(arms_tags: dict[str, dict[str, str]]) -> list[dict]:
    return [{"strategy": s, "phase": "selection", "run_id": f"sw-{s}", "state": "finished", "trials_declared": 2.0, "configs_declared": 2.0,
             "selected_key": "sel-0", "selected_config": None, "wall_seconds": 1.0, **tags} for s, tags in arms_tags.items()]


def test_registry_writes_each_familys_behaviour():
    assert {f: REGISTRY[f].tags() for f in REGISTRY} == {
        "fixed": {"awnn.order": "random", "awnn.stops_early": "false"},
        "awnn": {"awnn.order": "random", "awnn.stops_early": "false"},
        "tpe": {"awnn.order": "actual", "awnn.stops_early": "false"},
        "random": {"awnn.order": "actual", "awnn.stops_early": "false"},
        "asha": {"awnn.order": "actual", "awnn.stops_early": "true"},
        "awnn-asha": {"awnn.order": "actual", "awnn.stops_early": "true"},
        "fixedplus": {"awnn.order": "actual", "awnn.stops_early": "false", "awnn.depends_on": "awnn"},
    }


def test_tags_win_over_family_names():
    rows = [_run("fixed", "selection", "sel-0", 0.1, best_val_acc=0.9, start_time=1), _run("fixed", "selection", "sel-1", 0.2, best_val_acc=0.8, start_time=2),
            _run("awnn", "selection", "sel-0", 0.1, best_val_acc=0.9, status="stopped", start_time=3)]
    # a fixed-family arm whose sweep says its trials ran in a meaningful order, an awnn arm that stops early
    d = _data(rows, sweeps=_sweeps({"fixed": {"order": "actual", "stops_early": "false"}, "awnn": {"order": "random", "stops_early": "true"}}))
    assert d.order_of("fixed") == "actual" and A.ordering(d, "fixed") == "actual"
    assert d.stops_early("awnn") and not d.stops_early("fixed")
    curve = A.anytime(d, n_orders=20)
    assert set(curve.loc[curve["strategy"] == "fixed", "order"]) == {"actual"}
    # the stopped awnn trial is an early stop by design, not a problem
    assert not any("awnn" in p and "stopped" in p for p in A.problems(d))


def test_stores_without_the_tags_are_read_by_family():
    rows = [_run("fixed", "selection", "sel-0", 0.1, best_val_acc=0.9), _run("awnn", "selection", "sel-0", 0.1, best_val_acc=0.9)]
    d = _data(rows)  # sweeps without order / stops_early columns
    assert (d.order_of("fixed"), d.order_of("awnn")) == ("random", "random")
    assert not d.stops_early("fixed")
    d2 = _data(rows, sweeps=_sweeps({"fixed": {"order": None, "stops_early": None}, "awnn": {"order": math.nan, "stops_early": math.nan}}))
    assert d2.order_of("fixed") == "random" and not d2.stops_early("awnn")
    assert isinstance(d2.sweeps, pd.DataFrame)
