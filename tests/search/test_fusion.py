"""Fused trials without Ray (issue #20): which trials share a Ray trial
(search/fusion.py), and the phased searcher with `--fuse` played by a fake
trial loop that finishes each member of a group as the tracking callback would."""
from __future__ import annotations

import io

import pytest

from awnn.config import TrainConfig
from awnn.stacked import group_key
from search.budget import resolve_budget
from search.fusion import GROUP_PREFIX, fuse_specs, member_keys
from search.phases import PhasedSearcher
from search.record import OutcomeRecord
from search.resume import PriorAttempts, Rerun
from search.strategies import REGISTRY, StrategyOptions, make_arms

from searcher_helpers import Hooks
from searcher_helpers import drive as play


@pytest.fixture(scope="module")
def budget():
    return resolve_budget("smoke")


def specs_of(family: str, budget, task: str = "spiralhard"):
    arm = make_arms(task, [family], StrategyOptions(), budget)[0]
    specs = arm.selection_specs(budget)
    for s in specs:
        s.strategy, s.family = arm.name, arm.family
    return arm, specs


def test_groups_cover_the_plan_once_with_one_shape_each(budget):
    _, specs = specs_of("fixed", budget)
    assert len(specs) > 8
    trials = fuse_specs(specs, 8)
    keys = [k for t in trials for k in member_keys(t)]
    assert sorted(keys) == sorted(s.key for s in specs)  # every config once
    groups = [t for t in trials if t.members]
    assert groups and all(2 <= len(t.members) <= 8 for t in groups)
    for t in groups:
        assert t.key == GROUP_PREFIX + t.members[0].key and not t.config and t.done == []
        assert len({group_key(TrainConfig.from_dict(m.config)) for m in t.members}) == 1  # one shape, batch, epochs, ...
        assert {m.strategy for m in t.members} == {t.strategy} and t.phase == "selection"
    # what differs inside a group is only what a slice trains on its own
    assert any(len({m.config["lr"] for m in t.members}) > 1 for t in groups)


def test_fuse_one_and_unfusable_configs_run_alone(budget):
    _, specs = specs_of("fixed", budget)
    assert fuse_specs(specs, 1) == specs
    _, awnn = specs_of("awnn", budget)
    assert fuse_specs(awnn, 8) == awnn  # AWNN slices are not stacked: one Trainer per trial
    sgd = [s for s in specs[:3]]
    for s in sgd:
        s.config = {**s.config, "optimizer": "sgd"}
    assert [t.key for t in fuse_specs(sgd, 8)] == [s.key for s in sgd]


def test_finished_members_are_listed_and_groups_stay_the_same(budget):
    """A resumed phase forms the same groups (so an interrupted group's checkpoint fits) and skips what finished."""
    _, specs = specs_of("fixed", budget)
    first = fuse_specs(specs, 4)
    g0, g1 = first[0], first[1]
    done = {g0.members[0].key} | {m.key for m in g1.members}
    again = fuse_specs(specs, 4, done)
    assert g1.key not in [t.key for t in again]  # every member finished: nothing to run
    resumed = next(t for t in again if t.key == g0.key)
    assert [m.key for m in resumed.members] == [m.key for m in g0.members] and resumed.done == [g0.members[0].key]
    assert [t.key for t in again] == [t.key for t in first if t.key != g1.key]


def test_only_whole_grid_families_without_a_scheduler_fuse():
    assert {f for f, fam in REGISTRY.items() if fam.fuses} == {"fixed", "awnn"}  # awnn: its configs are never fusable


# ------------------------------------------------------------ the searcher
def score(spec: dict) -> dict:
    i = spec["index"]
    acc = 0.9 if i == 5 else 0.5 + 0.001 * i
    return {"key": spec["key"], "config": spec["config"], "index": i, "status": "ok", "error": None, "best_val_loss": 1.0,
            "best_val_acc": acc, "test_acc": 0.8, "device_hours": 0.001, "compute_seconds": 3.6, "gpu_hours": 0.0}


def drive(searcher, record) -> list[dict]:
    return play(searcher, record, score, concurrency=2)


def make(budget, fuse: int, prior=None):
    arms = make_arms("spiralhard", ["fixed", "awnn"], StrategyOptions(), budget)
    record = OutcomeRecord(earlier=(prior or PriorAttempts()).finished)
    searcher = PhasedSearcher(arms, budget, record, Hooks(), prior=prior, stream=io.StringIO(), trial_settings={}, fuse=fuse)
    return arms, record, searcher


def test_fused_searcher_runs_every_config_and_selects_as_without_fusion(budget):
    arms, record, plain = make(budget, 1)
    drive(plain, record)
    arms, record, fused = make(budget, 8)
    suggested = drive(fused, record)
    groups = [s for s in suggested if s["members"]]
    assert groups and all(s["strategy"] == "fixed" and s["phase"] == "selection" for s in groups)
    assert not any(s["members"] for s in suggested if s["phase"] == "assessment" or s["strategy"] == "awnn")
    # every config has its own outcome, once; the protocol sees the same trials and selects the same configs
    assert [sorted(o["key"] for o in r.selection.outcomes) for r in fused.results] == [sorted(o["key"] for o in r.selection.outcomes) for r in plain.results]
    assert [r.selected["key"] for r in fused.results] == [r.selected["key"] for r in plain.results]
    assert [len(r.assessment.outcomes) for r in fused.results] == [len(r.assessment.outcomes) for r in plain.results]
    assert len(suggested) < fused.max_trials()  # fewer Ray trials than configs
    n_fixed = len(fused.results[0].selection.outcomes)
    assert [line for line in fused.hooks.logs if "fused" in line] == [
        f"fixed selection: {sum(len(s['members']) for s in groups)} configs fused in {len(groups)} Ray trials (--fuse 8), "
        f"{n_fixed - sum(len(s['members']) for s in groups)} trials of one config"]


def test_resumed_group_skips_finished_members_and_continues_from_its_checkpoint(budget, tmp_path):
    arms, specs = specs_of("fixed", budget)
    g = fuse_specs(specs, 8)[0]
    sweep = "fixed/selection"
    first = g.members[0]
    prior = PriorAttempts(finished={f"{sweep}/{first.key}": score(first.to_dict())},
                          reruns={f"{sweep}/{m.key}": Rerun(config=m.config, index=m.index, checkpoint=str(tmp_path / "ckpt"))
                                  for m in g.members[1:]})
    _, record, searcher = make(budget, 8, prior)
    suggested = drive(searcher, record)
    resumed = next(s for s in suggested if s["key"] == g.key)
    assert resumed["done"] == [first.key] and resumed["resume_from"] == str(tmp_path / "ckpt")
    assert all(m["resume_from"] == str(tmp_path / "ckpt") for m in resumed["members"])
    assert record.earlier[f"{sweep}/{first.key}"] and f"{sweep}/{first.key}" not in record.here
    assert {f"{sweep}/{m.key}" for m in g.members[1:]} <= set(record.here)
