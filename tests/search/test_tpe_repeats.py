"""TPE's repeats (search/tpe.py, "Repeats"): an ask of a config another trial
key of the arm trains is told failed and asked again, not trained, so a tpe
arm trains distinct configs, as a random arm does.  Before 2026-12-08 each
repeat was trained: every selection trial trains with the same seed, so the
same network to the same score, at full cost (on doublemoon's 30-config grid,
6 trials asked 9 times).  The searcher is played without Ray
(tests/searcher_helpers.py); tests/search/test_strategies_ray.py checks the
studies of a real comparison."""
from __future__ import annotations

import io

import pytest

import search.tpe as tpe
from search.budget import resolve_budget
from search.phases import PhasedSearcher
from search.protocol import TrialSpec
from search.record import OutcomeRecord
from search.strategies import StrategyOptions, make_arms
from search.tpe import KEY_ATTR, REPEAT_ATTR, TpeSource

from searcher_helpers import Hooks, drive, trained_trials
from test_tpe_window import score, window_kept


@pytest.fixture
def budget():
    return resolve_budget("smoke")


def play(task: str, budget, storage: str, trials: int, seed: int = 7, window: int = 2):
    """A tpe arm of `trials` played to its end: (its selection specs in hand-out order, its study, its source)."""
    arms = make_arms(task, ["tpe"], StrategyOptions(seed=seed, tpe_trials=trials), budget)
    searcher = PhasedSearcher(arms, budget, OutcomeRecord(), Hooks(), stream=io.StringIO(),
                              make_tpe=lambda arm: TpeSource(arm, budget, storage, f"study-{arm.name}", window=window))
    suggested = drive(searcher, searcher.record, score, concurrency=window)
    sel = [s for s in suggested if s["phase"] == "selection"]
    source = searcher.tpe["tpe"]
    return sel, source.study, source


def point(config: dict, keys) -> tuple:
    return tuple(config[k] for k in keys)


def test_every_config_is_trained_once_and_each_repeat_names_the_key_that_trains_it(budget, tmp_path):
    arms = make_arms("doublemoon", ["tpe"], StrategyOptions(seed=7), budget)
    grid = arms[0].grid
    keys = list(grid.grid)
    sel, study, source = play("doublemoon", budget, f"sqlite:///{tmp_path / 'o.db'}", grid.size)
    configs = [point(s["config"], keys) for s in sel]
    # --tpe-trials as large as the grid: the whole grid, each config once (the code before trained repeats instead)
    assert sorted(configs) == sorted(point(c, keys) for c in grid.configs())
    assert sorted(s["index"] for s in sel) == list(range(grid.size))
    trained = {t.user_attrs[KEY_ATTR]: point(t.params, keys) for t in trained_trials(study)}
    assert trained == {s["key"]: point(s["config"], keys) for s in sel}
    repeats = [t for t in study.get_trials(deepcopy=False) if REPEAT_ATTR in t.user_attrs]
    assert repeats and source.repeats == len(repeats)
    for t in repeats:  # told failed at its ask (TPE models only completed trials), naming the key that trains its config
        assert t.state.name == "FAIL" and t.value is None
        assert trained[t.user_attrs[REPEAT_ATTR]] == point(t.params, keys)
    assert window_kept(study, 2)
    line = source.repeats_line()
    assert line.startswith(f"tpe: TPE asked {len(repeats)} config") and "not trained" in line


def test_a_few_trials_ask_the_same_configs_as_before_less_the_repeats(budget, tmp_path):
    """The same seed asks the same configs (whatever the storage), and the configs trained are the asks in order
    with each repeat left out."""
    a, study, _ = play("doublemoon", budget, f"sqlite:///{tmp_path / 'a.db'}", 8)
    b, _, _ = play("doublemoon", budget, f"sqlite:///{tmp_path / 'b.db'}", 8)
    keys = list(make_arms("doublemoon", ["tpe"], StrategyOptions(seed=7), budget)[0].grid.grid)
    assert [s["config"] for s in a] == [s["config"] for s in b]
    asked = [point(t.params, keys) for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)]
    assert [point(s["config"], keys) for s in a] == list(dict.fromkeys(asked))


def test_a_resumed_driver_does_not_ask_for_its_predecessors_configs(budget, tmp_path):
    """A second source on the same study (a driver resumed after the first died) reads the configs the first
    trained from the study, so its asks repeat none of them."""
    arm = make_arms("doublemoon", ["tpe"], StrategyOptions(seed=3, tpe_trials=16), budget)[0]
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    keys = list(arm.grid.grid)
    configs: dict[str, tuple] = {}

    def ask_and_end(source: TpeSource, n: int, left: int) -> None:
        spec = TrialSpec(key=f"sel-{n:04d}", phase="selection", index=-1, config={})
        source.fill(spec, f"t{n}", left=left)
        configs[spec.key] = point(spec.config, keys)
        source.complete(f"t{n}", "ok", 0.5 + (spec.index * 37 % 101) / 250)

    first = TpeSource(arm, budget, storage, "s", window=1)
    for n in range(8):
        ask_and_end(first, n, 16 - n)
    second = TpeSource(arm, budget, storage, "s", window=1)
    for n in range(8, 16):
        ask_and_end(second, n, 16 - n)
    assert len(set(configs.values())) == 16  # none twice
    assert second.repeats  # (the second asked for some of the first's configs)
    assert first.repeats + second.repeats == sum(REPEAT_ATTR in t.user_attrs for t in second.study.get_trials(deepcopy=False))


def test_after_max_repeats_in_a_row_an_untried_config_chosen_by_the_seed_is_asked(budget, tmp_path, monkeypatch):
    """TPE that keeps to configs trained already: after MAX_REPEATS repeats in a row (here 0: at every ask) an
    untried config is enqueued and asked, chosen by the arm's seed (the same on every run), no two the same."""
    monkeypatch.setattr(tpe, "MAX_REPEATS", 0)
    keys = list(make_arms("doublemoon", ["tpe"], StrategyOptions(seed=7), budget)[0].grid.grid)
    runs = []
    for name in ("a", "b"):
        sel, study, source = play("doublemoon", budget, f"sqlite:///{tmp_path / f'{name}.db'}", 12)
        runs.append([point(s["config"], keys) for s in sel])
        assert source.repeats == 0 and len(study.get_trials(deepcopy=False)) == 12
    assert runs[0] == runs[1] and len(set(runs[0])) == 12
    other, _, _ = play("doublemoon", budget, f"sqlite:///{tmp_path / 'c.db'}", 12, seed=8)
    assert [point(s["config"], keys) for s in other] != runs[0]


def test_the_benchmark_compares_both_policies_in_one_json_line():
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "tpe_repeats.py"), "--objectives", "2", "--grids", "doublemoon:12"],
                       capture_output=True, text=True, timeout=120, check=True)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    row = out["grids"]["doublemoon"]
    assert row["configs_in_grid"] == 30 and out["max_repeats"] == tpe.MAX_REPEATS
    assert row["trained"]["asks"] == 12 >= row["trained"]["configs_trained"]
    assert row["skipped"]["configs_trained"] == 12 <= row["skipped"]["asks"]
