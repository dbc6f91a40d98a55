"""TPE's ask window (search/tpe.py, "The ask window"): the same configs
whatever runs beside the arm and however its trials' ends interleave.  The
searcher is played without Ray (tests/searcher_helpers.py);
tests/search/test_strategies_ray.py checks the window under Ray Tune itself."""
from __future__ import annotations

import io

import pytest

from search.budget import resolve_budget
from search.errors import StudyUnwritable, TrialsNotRun
from search.phases import PhasedSearcher
from search.protocol import TrialSpec
from search.record import OutcomeRecord
from search.strategies import StrategyOptions, make_arms
from search.tpe import KEY_ATTR, REPEAT_ATTR, WINDOW_ATTR, TpeSource

from searcher_helpers import Hooks, drive, trained_trials

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


def searcher_for(families, budget, storage: str, window: int, **options) -> PhasedSearcher:
    arms = make_arms("spiral", families, StrategyOptions(seed=7, **{"tpe_trials": TPE_TRIALS, **options}), budget)
    return PhasedSearcher(arms, budget, OutcomeRecord(), Hooks(), stream=io.StringIO(),
                          make_tpe=lambda arm: TpeSource(arm, budget, storage, f"study-{arm.name}", window=window))


def run(families, budget, tmp_path, name: str, window: int, **drive_kw):
    """One comparison of `families` played to its end: (its tpe selection's configs by trial key, the study)."""
    searcher = searcher_for(families, budget, f"sqlite:///{tmp_path / f'{name}.db'}", window)
    suggested = drive(searcher, searcher.record, score, **drive_kw)
    asked = {s["key"]: s["config"] for s in suggested if s["strategy"] == "tpe" and s["phase"] == "selection"}
    return asked, searcher.tpe["tpe"].study


def window_kept(study, window: int) -> bool:
    """Was the study, as it asked its k-th trained trial, told exactly the trained trials up to the (k - window)-th
    (the others told after that ask)?  Repeats (search/tpe.py, "Repeats": told failed at their ask, not trained)
    take study numbers but are not counted."""
    trials = [t for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number) if KEY_ATTR in t.user_attrs]
    for k, t in enumerate(trials):
        for j, e in enumerate(trials):
            told_before = e.datetime_complete is not None and e.datetime_complete <= t.datetime_start
            if j != k and told_before != (j <= k - window):
                return False
    return True


def test_tpe_asks_the_same_configs_whatever_runs_beside_it(budget, tmp_path):
    """`--strategies tpe` alone and beside other arms, trials ending oldest or newest first, more or fewer at once:
    the same config for every trial key.  Before the window, each ask saw whichever trials had ended: in the
    first two scenarios 5 of the 16 keys got other configs than alone (the code before the change, 2026-12-06)."""
    alone, study = run(["tpe"], budget, tmp_path, "alone", 2, concurrency=2)
    assert len(alone) == TPE_TRIALS and window_kept(study, 2)
    for name, families, kw in [("fixed", ["fixed", "tpe"], {"concurrency": 2, "order": "newest"}),
                               ("busy", ["awnn", "random", "tpe", "asha"], {"concurrency": 3}),
                               ("newest", ["tpe"], {"concurrency": 2, "order": "newest"})]:
        beside, study = run(families, budget, tmp_path, name, 2, **kw)
        assert beside == alone, name
        assert window_kept(study, 2), name
        assert study.user_attrs[WINDOW_ATTR] == 2
    # every end told by the sweep's end; the repeats told failed at their asks
    assert all(t.state.name == ("FAIL" if REPEAT_ATTR in t.user_attrs else "COMPLETE") for t in study.get_trials(deepcopy=False))
    assert len({tuple(sorted(c.items())) for c in alone.values()}) == TPE_TRIALS  # no config trained twice


def test_a_full_window_gives_its_free_slots_to_the_next_arm(budget, tmp_path):
    """Window 2: the tpe arm's third ask waits for its first trial, not for the second; meanwhile a free slot gets
    the fixed grid's trial (not nothing), and the second trial's end is held from the study until the fourth ask."""
    searcher = searcher_for(["tpe", "fixed"], budget, f"sqlite:///{tmp_path / 'o.db'}", 2)
    first = [searcher.suggest(f"t{i}")["spec"] for i in range(3)]
    assert [(s["strategy"], s["key"]) for s in first] == [("tpe", "sel-0000"), ("tpe", "sel-0001"), ("fixed", first[2]["key"])]
    source = searcher.tpe["tpe"]

    def end(i: int) -> None:
        searcher.record.finished(f"tpe/selection/{first[i]['key']}", score(first[i]))
        searcher.on_trial_complete(f"t{i}", {"final": score(first[i])})

    def states() -> list[str]:
        return [t.state.name for t in trained_trials(source.study)]

    end(1)  # the newer one ends first: held, and the window is still full
    assert not source.can_fill() and searcher.suggest("t3")["spec"]["strategy"] == "fixed"
    assert states() == ["RUNNING", "RUNNING"]
    end(0)
    assert source.can_fill() and states() == ["RUNNING", "RUNNING"]  # (ends are told at the asks they gate)
    assert searcher.suggest("t4")["spec"]["key"] == "sel-0002"
    assert states() == ["COMPLETE", "RUNNING", "RUNNING"]  # trial 2 was asked knowing trial 0 only
    assert source.can_fill()  # trial 1 has ended: the window has room
    assert searcher.suggest("t5")["spec"]["key"] == "sel-0003"
    assert states() == ["COMPLETE", "COMPLETE", "RUNNING", "RUNNING"]


def test_ends_are_told_as_they_come_after_the_last_ask_and_at_the_drivers_end(budget, tmp_path):
    searcher = searcher_for(["tpe"], budget, f"sqlite:///{tmp_path / 'o.db'}", 4, tpe_trials=5)
    suggested = drive(searcher, searcher.record, score, concurrency=4)
    study = searcher.tpe["tpe"].study
    assert len([s for s in suggested if s["phase"] == "selection"]) == 5 == len(trained_trials(study))
    assert window_kept(study, 4) and all(t.state.name == "COMPLETE" for t in trained_trials(study))
    # Tune ends before the last ask (a stop): the held ends are told as the driver finishes, not lost
    searcher = searcher_for(["tpe"], budget, f"sqlite:///{tmp_path / 'p.db'}", 2)
    specs = [searcher.suggest(f"t{i}")["spec"] for i in range(2)]
    for i in (1, 0):
        searcher.record.finished(f"tpe/selection/{specs[i]['key']}", score(specs[i]))
        searcher.on_trial_complete(f"t{i}", {"final": score(specs[i])})
    study = searcher.tpe["tpe"].study
    assert [t.state.name for t in trained_trials(study)] == ["RUNNING", "RUNNING"]
    with pytest.raises(TrialsNotRun):
        searcher.finish_all()
    assert [(t.state.name, t.value) for t in trained_trials(study)] == [("COMPLETE", score(s)["best_val_acc"]) for s in specs]


def test_a_reopened_study_keeps_its_window(budget, tmp_path):
    """A resumed driver on another cluster asks with the window the study began with."""
    arm = make_arms("spiral", ["tpe"], StrategyOptions(seed=7), budget)[0]
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    assert TpeSource(arm, budget, storage, "s", window=3).window == 3
    again = TpeSource(arm, budget, storage, "s", window=8)
    assert again.window == 3 and again.study.user_attrs[WINDOW_ATTR] == 3
    assert TpeSource(arm, budget, storage, "other", window=0).window == 1  # at least one trial in flight


def test_a_broken_study_is_said_at_the_next_hand_out_not_waited_for(budget, tmp_path):
    """A study whose write failed (kept in `broken`, as `complete` does inside Tune's loop) lets the searcher hand
    out, so that `fill` raises it: no wait for an end that can never be told."""
    arm = make_arms("spiral", ["tpe"], StrategyOptions(seed=7), budget)[0]
    source = TpeSource(arm, budget, f"sqlite:///{tmp_path / 'o.db'}", "s", window=2)
    specs = [TrialSpec(key=f"sel-{i:04d}", phase="selection", index=-1, config={}) for i in range(3)]
    source.fill(specs[0], "a", left=3)
    source.fill(specs[1], "b", left=2)
    assert specs[0].config and specs[1].config and not source.can_fill()
    with pytest.raises(RuntimeError, match="can_fill"):
        source.fill(specs[2], "c", left=1)
    source.broken = StudyUnwritable("--optuna-storage x: TPE's study s could not be written")
    assert source.can_fill()
    with pytest.raises(StudyUnwritable):
        source.fill(specs[2], "c", left=1)
