"""The search strategies without Ray: ASHA's rungs against Ray Tune's own
brackets, and bad strategy options refused before anything runs.  The
strategies on a real local Ray are in tests/search/test_strategies_ray.py."""
from __future__ import annotations

import math

import pytest

from search.strategies import asha_milestones


def test_asha_milestones_match_ray_brackets():
    from ray.tune.schedulers.async_hyperband import _Bracket

    for grace, rf, max_t in [(1, 3, 2), (12, 3, 120), (1, 4, 100), (5, 2, 81), (3, 3, 3), (2, 2.5, 50)]:
        rungs = sorted(m for m, _ in _Bracket(grace, max_t, rf, 0)._rungs if m < max_t)
        assert asha_milestones(grace, rf, max_t) == sorted({math.ceil(m) for m in rungs}), (grace, rf, max_t)


@pytest.mark.parametrize("extra, key, expected", [
    (["--strategies", "fixed,grid"], "--strategies", "subset of"),
    (["--strategies", "tpe", "--repeats", "0"], "--repeats", "integer >= 1"),
    (["--strategies", "tpe", "--tpe-trials", "0"], "--tpe-trials", "integer >= 1"),
    (["--strategies", "tpe", "--tpe-window", "0"], "--tpe-window", "integer >= 1"),
    (["--strategies", "random", "--random-trials", "31"], "--random-trials", "at most the fixed grid's 30"),
    (["--strategies", "asha", "--asha-grace-period", "2"], "--asha-grace-period", "from 1 to 1"),
    (["--strategies", "asha", "--asha-reduction-factor", "1"], "--asha-reduction-factor", "number > 1"),
    (["--strategies", "tpe", "--optuna-storage", "nosuchdb://x"], "--optuna-storage", "cannot open"),
    # a seed TPE's numpy seeding refuses (before: its traceback, exit 1), for every strategy alike
    (["--strategies", "tpe", "--seed", "-5"], "--seed", "integer from 0 to 4294967295, found -5"),
    (["--strategies", "random", "--seed", str(2**32)], "--seed", "integer from 0 to 4294967295, found 4294967296"),
    (["--strategies", "asha", "--seed", "4294967294", "--repeats", "3"], "--seed", "from 0 to 4294967293 (with --repeats 3"),
    # a comparison too large to plan (before: the driver grew by gigabytes planning it), named by what makes it up
    (["--strategies", "random", "--repeats", "100000"], "the comparison: expected at most 250,000 trials",
     "found 800,000 (random: 100,000 repeats x (6 selection + 2 re-training))"),
    # TPE trains distinct configs (search/tpe.py, "Repeats"): at most the fixed grid's, as random
    (["--strategies", "fixed,tpe", "--tpe-trials", "31"], "--tpe-trials", "expected at most the fixed grid's 30 configs ("),
])
def test_bad_strategy_options_exit_2_before_anything_runs(tmp_path, monkeypatch, capsys, extra, key, expected):
    """In-process (nothing is launched before validation, so no Ray is needed)."""
    import signal

    from search.cli import main

    monkeypatch.chdir(tmp_path)
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "1", *extra])
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and expected in err[0], err
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())  # no mlflow.db, no results folder, no optuna.db
