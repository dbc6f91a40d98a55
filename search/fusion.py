"""Fused trials (`--fuse N`, issue #20): which of a phase's trials share one Ray trial.

With `--fuse N` (N > 1), the selection trials of an arm whose family fuses
(search/strategies.py, `Family.fuses`: a whole grid with no launch order and
no scheduler, i.e. `fixed`) are put in groups of at most N configs that
awnn.stacked can train as one stacked model (equal awnn.fusable.GROUP_KEYS,
awnn.fusable.check_fusable).  A group is one Ray trial (search/
fused_trial.py); each of its configs keeps its own trial key, MLflow run,
outcome and place in the protocol, and the run is tagged with the group
(tracking.contract.Tag.GROUP).  A config that cannot be fused (an AWNN
config, SGD, an lr schedule, a non-tabular task) and a group of one run as
without fusion: one config per trial (in the lean loop, awnn/lean.py, when
it fuses; else `awnn.train.Trainer`, the reference path).
Re-training runs are not fused: there are R of them per arm, and each keeps
its model file (search/trial.py).

Groups are formed over the phase's whole plan in plan order, before the
trials an earlier driver finished are taken out, so that `--resume` forms
the same groups and an interrupted group continues from its checkpoint; the
members an earlier driver finished are listed in the group's `done` (the
trial takes them out of the stack without reporting them).
"""
from __future__ import annotations

from typing import Iterable

from .protocol import TrialSpec

__all__ = ["GROUP_PREFIX", "fuse_specs", "is_group", "member_keys"]

GROUP_PREFIX = "fuse-"  # a group's trial key: this + its first member's key (`fuse-sel-0000`, `fuse-f3-sel-0012`)


def is_group(spec: TrialSpec | dict) -> bool:
    members = spec.get("members") if isinstance(spec, dict) else spec.members
    return bool(members)


def member_keys(spec: TrialSpec) -> list[str]:
    """The trial keys a spec stands for: its members' for a group, else its own."""
    return [m.key for m in spec.members] if spec.members else [spec.key]


def _group_key(spec: TrialSpec):
    """awnn.stacked's group key of a trial's config, or None when it cannot be fused."""
    from awnn.config import TrainConfig
    from awnn.fusable import group_key

    try:
        return group_key(TrainConfig.from_dict(spec.config))
    except ValueError:  # check_fusable: a key the stack does not train (the reason is in awnn/stacked.py)
        return None


def fuse_specs(specs: list[TrialSpec], fuse: int, done: Iterable[str] = ()) -> list[TrialSpec]:
    """The trials to run for a phase's `specs` (in plan order) with groups of at
    most `fuse` configs; `done`: the keys of trials already finished (not run again).

    A group takes its members' strategy, family, repeat and phase, the first
    member's index, and `resume_from` is left to the searcher.  Specs that
    cannot be fused, and groups left with one member, are returned as they are."""
    done = set(done)
    if fuse < 2:
        return [s for s in specs if s.key not in done]
    buckets: dict[object, list[TrialSpec]] = {}
    order: list[object] = []  # a bucket per group key (or per unfusable spec), in order of first appearance
    for s in specs:
        k = _group_key(s)
        k = ("single", s.key) if k is None else k
        if k not in buckets:
            buckets[k] = []
            order.append(k)
        buckets[k].append(s)
    out: list[TrialSpec] = []
    for k in order:
        members = sorted(buckets[k], key=lambda m: str(m.config.get("activation", "")))  # (stable) one activation run per group
        for start in range(0, len(members), fuse):
            chunk = members[start:start + fuse]
            todo = [m for m in chunk if m.key not in done]
            if not todo:
                continue
            if len(chunk) == 1:
                out.append(chunk[0])
                continue
            first = chunk[0]
            out.append(TrialSpec(key=GROUP_PREFIX + first.key, phase=first.phase, index=first.index, config={}, strategy=first.strategy,
                                 family=first.family, repeat=first.repeat, members=chunk, done=[m.key for m in chunk if m.key in done]))
    return out
