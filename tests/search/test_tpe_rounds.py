"""TPE asks in rounds (search/tpe.py, "Rounds"): the same configs whatever runs
beside the arm and however its trials' ends interleave.  The searcher is played
without Ray (tests/searcher_helpers.py); tests/search/test_strategies_ray.py
checks the rounds under Ray Tune itself."""
from __future__ import annotations

import io

import pytest

from search.budget import resolve_budget
from search.errors import StudyUnwritable
from search.phases import PhasedSearcher
from search.protocol import TrialSpec
from search.record import OutcomeRecord
from search.strategies import StrategyOptions, make_arms
from search.tpe import ROUND_ATTR, TpeSource

from searcher_helpers import Hooks, drive

TPE_TRIALS = 16  # more than TPE's 10 random start-up trials: the later asks depend on the scores told


def score(spec: dict) -> dict:
    """Scores that differ from config to config, so that TPE's model depends on which trials it was told."""
    i = spec["index"]
    return {"key": spec["key"], "config": spec["config"], "index": i, "status": "ok", "error": None, "best_val_loss": 1.0,
            "device_hours": 0.001, "compute_seconds": 3.6, "gpu_hours": 0.0, "best_val_acc": 0.5 + (i * 37 % 101) / 250,
            **({"test_acc": 0.8} if spec["phase"] == "assessment" else {})}


@pytest.fixture
def budget():
    return resolve_budget("smoke")


def run(families, budget, tmp_path, name: str, round_size: int, **drive_kw):
    """One comparison of `families` played to its end: (its tpe selection's configs by trial key, the study)."""
    arms = make_arms("spiral", families, StrategyOptions(seed=7, tpe_trials=TPE_TRIALS), budget)
    storage = f"sqlite:///{tmp_path / f'{name}.db'}"
    searcher = PhasedSearcher(arms, budget, OutcomeRecord(), Hooks(), stream=io.StringIO(),
                              make_tpe=lambda arm: TpeSource(arm, budget, storage, f"study-{arm.name}", round_size=round_size))
    suggested = drive(searcher, searcher.record, score, **drive_kw)
    asked = {s["key"]: s["config"] for s in suggested if s["strategy"] == "tpe" and s["phase"] == "selection"}
    return asked, searcher.tpe["tpe"].study


def rounds_kept(study, round_size: int) -> bool:
    """Was each study trial asked only once every trial of the rounds before it had been told?"""
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    return all(all(e.datetime_complete is not None and e.datetime_complete <= t.datetime_start for e in trials[:t.number // round_size * round_size])
               for t in trials)


def test_tpe_asks_the_same_configs_whatever_runs_beside_it(budget, tmp_path):
    """`--strategies tpe` alone and beside other arms, trials ending oldest or newest first, more or fewer at once:
    the same config for every trial key.  Before the rounds, each ask saw whichever trials had ended: with these
    first two scenarios 5 of the 16 keys got other configs than alone (the code before the change, 2026-12-06)."""
    alone, study = run(["tpe"], budget, tmp_path, "alone", 2, concurrency=2)
    assert len(alone) == TPE_TRIALS and rounds_kept(study, 2)
    for name, families, kw in [("fixed", ["fixed", "tpe"], {"concurrency": 2, "order": "newest"}),
                               ("busy", ["awnn", "random", "tpe", "asha"], {"concurrency": 3}),
                               ("newest", ["tpe"], {"concurrency": 2, "order": "newest"})]:
        beside, study = run(families, budget, tmp_path, name, 2, **kw)
        assert beside == alone, name
        assert rounds_kept(study, 2), name
        assert study.user_attrs[ROUND_ATTR] == 2


def test_a_running_round_gives_its_free_slots_to_the_next_arm(budget, tmp_path):
    """While a round runs, a free slot gets another arm's trial (not nothing), and the tpe arm never has more
    than one round asked and untold."""
    arms = make_arms("spiral", ["tpe", "fixed"], StrategyOptions(seed=7, tpe_trials=TPE_TRIALS), budget)
    searcher = PhasedSearcher(arms, budget, OutcomeRecord(), Hooks(), stream=io.StringIO(),
                              make_tpe=lambda arm: TpeSource(arm, budget, f"sqlite:///{tmp_path / 'o.db'}", "s", round_size=2))
    first = [searcher.suggest(f"t{i}")["spec"] for i in range(3)]
    assert [(s["strategy"], s["key"]) for s in first] == [("tpe", "sel-0000"), ("tpe", "sel-0001"), ("fixed", first[2]["key"])]
    source = searcher.tpe["tpe"]
    assert not source.can_fill() and len(source.study.get_trials(deepcopy=False)) == 2
    # one of the round ends: the round is not over, the next slot still goes to the fixed grid
    searcher.record.finished("tpe/selection/sel-0000", score(first[0]))
    searcher.on_trial_complete("t0", {"final": score(first[0])})
    assert searcher.suggest("t3")["spec"]["strategy"] == "fixed"
    searcher.record.finished("tpe/selection/sel-0001", score(first[1]))
    searcher.on_trial_complete("t1", {"final": score(first[1])})
    assert source.can_fill()
    nxt = searcher.suggest("t4")["spec"]
    assert (nxt["strategy"], nxt["key"]) == ("tpe", "sel-0002") and len(source.study.get_trials(deepcopy=False)) == 4


def test_a_round_asks_no_more_than_the_trials_left(budget, tmp_path):
    arms = make_arms("spiral", ["tpe"], StrategyOptions(seed=7, tpe_trials=5), budget)
    searcher = PhasedSearcher(arms, budget, OutcomeRecord(), Hooks(), stream=io.StringIO(),
                              make_tpe=lambda arm: TpeSource(arm, budget, f"sqlite:///{tmp_path / 'o.db'}", "s", round_size=4))
    suggested = drive(searcher, searcher.record, score, concurrency=4)
    study = searcher.tpe["tpe"].study
    assert len([s for s in suggested if s["phase"] == "selection"]) == 5 == len(study.get_trials(deepcopy=False))
    assert rounds_kept(study, 4)


def test_a_reopened_study_keeps_its_round_size(budget, tmp_path):
    """A resumed driver on another cluster asks in the rounds the study began with."""
    arm = make_arms("spiral", ["tpe"], StrategyOptions(seed=7), budget)[0]
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    assert TpeSource(arm, budget, storage, "s", round_size=3).round_size == 3
    again = TpeSource(arm, budget, storage, "s", round_size=8)
    assert again.round_size == 3 and again.study.user_attrs[ROUND_ATTR] == 3
    assert TpeSource(arm, budget, storage, "other", round_size=0).round_size == 1  # at least one a round


def test_a_broken_study_is_said_at_the_next_hand_out_not_waited_for(budget, tmp_path):
    """A study whose write failed while a round ran (kept in `broken`, as `complete` does inside Tune's loop)
    lets the searcher hand out, so that `fill` raises it: no wait for a round that can never be told."""
    arm = make_arms("spiral", ["tpe"], StrategyOptions(seed=7), budget)[0]
    source = TpeSource(arm, budget, f"sqlite:///{tmp_path / 'o.db'}", "s", round_size=2)
    specs = [TrialSpec(key=f"sel-{i:04d}", phase="selection", index=-1, config={}) for i in range(3)]
    source.fill(specs[0], "a", left=3)
    source.fill(specs[1], "b", left=2)
    assert specs[0].config and specs[1].config and not source.can_fill()
    with pytest.raises(RuntimeError, match="round is running"):
        source.fill(specs[2], "c", left=1)
    source.broken = StudyUnwritable("--optuna-storage x: TPE's study s could not be written")
    assert source.can_fill()
    with pytest.raises(StudyUnwritable):
        source.fill(specs[2], "c", left=1)
