"""A comparison's phases in plan order, and what each waits for.

Each arm has two phases, in arm order: its selection trials, then the
selected config's re-training trials (search/protocol.py).  A phase is
`waiting` (not opened), `open` (its sweep started: trials queued or in
flight) or `closed` (ended, or nothing to run).  It may open once every
phase it depends on is closed (`depends_on`):

* an arm's re-training waits for its own selection (the selected config is
  the protocol's choice over all of its trials);
* an arm whose config derives from another family's (`Family.derived_from`:
  fixedplus re-trains at the widths the awnn arm learned) waits for every
  phase of that family's arms;
* nothing else: arms are independent of each other.  A sequential or
  adaptive search (a tpe arm's Optuna study, an asha arm's bracket) belongs
  to one arm and sees only that arm's trials.

Dependencies always point to earlier phases (search/strategies.py,
make_arms, puts a derived family after its source), so one pass in plan
order can close, open and serve phases (search/phases.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from .protocol import TrialSpec
from .record import PhaseResult
from .strategies import REGISTRY, Arm

__all__ = ["Phase", "PhasePlan", "most_at_once"]


@dataclass(eq=False)
class Phase:
    """One arm's phase and, once open, its trials."""

    arm: Arm
    name: str  # selection | assessment
    state: str = "waiting"  # waiting | open | closed
    result: PhaseResult | None = None
    keys: set[str] = field(default_factory=set)  # writer keys of its trials
    # writer key -> the epochs it trains at most and the epochs a scheduler may stop it at (ASHA's rungs), for etas
    ends: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    queue: list[TrialSpec] = field(default_factory=list)  # trials not handed to Ray yet
    t0: float = 0.0  # when this driver opened it
    runs_here: bool = False  # has this driver anything to run in it?

    @property
    def sweep(self) -> str:
        return f"{self.arm.name}/{self.name}"


def most_at_once(arms: list[Arm], budget) -> int:
    """The most trials the phases of `arms` can have in flight at once, fused or not: an arm's re-training waits
    for its selection, so at most the larger of the two per fold; the arms' phases (and a cross-validated arm's
    folds) may all be open together.  An upper bound (fusion and a resume only make fewer): the local Ray warms no
    more workers than this (search/tune.py, init_ray)."""
    return sum(max(a.trials, budget.runs(a.grid)) * budget.folds_for(a.grid) for a in arms)


class PhasePlan:
    """The phases of `arms`, in plan order."""

    def __init__(self, arms: list[Arm]):
        self.phases = [Phase(a, ph) for a in arms for ph in ("selection", "assessment")]

    def __iter__(self) -> Iterator[Phase]:
        return iter(self.phases)

    def __len__(self) -> int:
        return len(self.phases)

    def number(self, ph: Phase) -> int:
        """1-based position in the plan (the progress line's `phase i/n`)."""
        return self.phases.index(ph) + 1

    def find(self, arm: str, name: str) -> Phase:
        return next(p for p in self.phases if p.arm.name == arm and p.name == name)

    def depends_on(self, ph: Phase) -> list[Phase]:
        """The phases `ph` waits for (module docstring)."""
        if ph.name == "selection":
            return []
        source = REGISTRY[ph.arm.family].derived_from
        return [self.find(ph.arm.name, "selection")] + [p for p in self.phases if source and p.arm.family == source]

    def ready(self, ph: Phase) -> bool:
        return all(p.state == "closed" for p in self.depends_on(ph))

    def open(self) -> list[Phase]:
        """The open phases, in plan order (the first one leads the progress line)."""
        return [p for p in self.phases if p.state == "open"]

    def all_closed(self) -> bool:
        return all(p.state == "closed" for p in self.phases)
