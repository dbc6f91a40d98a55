"""The protocol's record of a comparison's trials, owned by `search`.

Trials are named by their writer key `<arm>/<phase>/<trial key>` (the
sweep `<arm>/<phase>` plus the trial's key, e.g. `tpe.r2/selection/sel-0003`).

* `OutcomeRecord`: the finished trials' outcomes - those an earlier driver
  finished (read back by `--resume`, search/resume.py) and those finished by
  this driver, announced by the tracking callback - and the best validation
  accuracy reported so far in each sweep (for the progress line).  The
  searcher (search/phases.py) reads it to know when a phase is complete and
  which config it selects; nothing in `tracking` reads it.
* `PhaseResult` / `StrategyResult`: what one phase and one arm produced, in
  the order the searcher closed them (the summary table and `awnn study`
  read them).

An outcome is the dict the protocol needs of a finished trial: key, status,
config, index, error, the final metrics (best_val_acc, best_val_loss,
test_acc, compute_seconds, device_hours, ...) and widths / widths_at_best.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .grid import Grid

__all__ = ["OutcomeRecord", "PhaseResult", "StrategyResult", "sweep_of"]


def sweep_of(key: str) -> str:
    """`<arm>/<phase>` of a writer key `<arm>/<phase>/<trial key>`."""
    return key.rsplit("/", 1)[0]


class OutcomeRecord:
    """Finished trials by writer key, and each sweep's best reported
    `best_val_acc`.  `listener(key)` is called after every change (a report
    or a finished trial of this driver)."""

    def __init__(self, earlier: Mapping[str, dict[str, Any]] | None = None, listener: Callable[[str], None] | None = None):
        self.earlier: dict[str, dict[str, Any]] = dict(earlier or {})  # finished by earlier drivers (--resume)
        self.here: dict[str, dict[str, Any]] = {}  # finished by this driver
        self.best_val_acc: dict[str, float] = {}  # sweep -> best reported so far by this driver's trials
        self.in_epoch: dict[str, dict[str, int]] = {}  # running trial -> {epoch, batch, batches} inside a long epoch
        # running trial -> (when it first reported an epoch, that epoch, when it last did, that epoch): its own pace
        self.paces: dict[str, tuple[float, int, float, int]] = {}
        self.faults: dict[str, dict[str, Any]] = {}  # trials their environment ended (tracking.contract.FAULT_KINDS), in order
        self.listener = listener

    # --- what the tracking callback announces
    def reported(self, key: str, result: Mapping[str, Any]) -> None:
        """A trial's report (one or more epochs)."""
        self._pace(key, result.get("epochs"))
        progress = result.get("progress")
        if isinstance(progress, dict):
            self.in_epoch[key] = progress
        elif result.get("epochs"):
            self.in_epoch.pop(key, None)
        v = result.get("best_val_acc")
        sweep = sweep_of(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v > self.best_val_acc.get(sweep, -math.inf):
            self.best_val_acc[sweep] = float(v)
        self._changed(key)

    def finished(self, key: str, outcome: dict[str, Any]) -> None:
        """A trial of this driver ended (any terminal status); the first outcome of a key counts."""
        if key in self.here or key in self.earlier:
            return
        self.in_epoch.pop(key, None)
        self.paces.pop(key, None)
        self.here[key] = outcome
        self._changed(key)

    def fault(self, key: str, outcome: dict[str, Any]) -> None:
        """A trial of this driver its environment ended (`error_kind` data or
        storage): not an outcome of its config; the comparison stops."""
        self.faults.setdefault(key, outcome)
        self.in_epoch.pop(key, None)
        self._changed(key)

    def _pace(self, key: str, epochs: Any) -> None:
        """Note the last epoch a report of `key` carries, and when (a retry that
        went back to an earlier checkpoint starts the trial's pace afresh)."""
        if not isinstance(epochs, list) or key in self.here or key in self.earlier:
            return
        numbers = [r["epoch"] for r in epochs if isinstance(r, Mapping) and isinstance(r.get("epoch"), int) and not isinstance(r.get("epoch"), bool)]
        if not numbers:
            return
        last, now = max(numbers), time.monotonic()
        pace = self.paces.get(key)
        self.paces[key] = (now, last, now, last) if pace is None or last < pace[3] else (pace[0], pace[1], now, last)

    def time_left(self, key: str, until_epoch: int) -> float:
        """Seconds `key`, running, needs to reach `until_epoch` at its own pace so
        far (its seconds per epoch between its first and its last report), or
        nan before two reports show a pace."""
        pace = self.paces.get(key)
        if pace is None or pace[3] <= pace[1] or pace[2] <= pace[0]:
            return math.nan
        return max(0, until_epoch - pace[3]) * (pace[2] - pace[0]) / (pace[3] - pace[1])

    # --- what the searcher reads
    def done(self) -> set[str]:
        return set(self.earlier) | set(self.here)

    def stop_reason(self) -> tuple[str, str] | None:
        """(kind, message) of the first trial of this driver its environment
        ended (kind "data": its data cannot be read; "storage": a checkpoint
        cannot be written; "lost": its worker process was lost after its last
        retry), the message the trial and its error line; None
        when there is none.  No retry fixes it: the comparison stops."""
        for key, o in self.faults.items():
            return o.get("error_kind", "data"), f"trial {key}: {o.get('error') or 'error'}"
        return None

    def is_new(self, key: str) -> bool:
        """Did this driver finish `key` (as opposed to an earlier driver, or nobody yet)?"""
        return key in self.here

    def _changed(self, key: str) -> None:
        if self.listener is not None:
            self.listener(key)


@dataclass
class PhaseResult:
    strategy: str  # the arm
    phase: str
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def sweep(self) -> str:
        return f"{self.strategy}/{self.phase}"

    def total(self, name: str) -> float:
        return float(sum(o.get(name) or 0.0 for o in self.outcomes))

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.get("status") == status)


@dataclass
class StrategyResult:
    strategy: str  # the arm (search/strategies.py): "fixed", "tpe", "tpe.r2", ...
    grid: Grid
    selection: PhaseResult
    assessment: PhaseResult | None = None
    selected: dict[str, Any] | None = None  # the selected trial (cross-validated: the config most folds selected)
    summary: dict[str, Any] = field(default_factory=dict)
    family: str = ""
    selected_by_fold: dict[int, dict[str, Any]] = field(default_factory=dict)  # cross-validated: each fold's selected trial

    @property
    def learns_widths(self) -> bool:
        """Whether the arm trains the adaptive model (`model` awnn): its widths are learned, not searched."""
        configs = self.grid.configs()
        return bool(configs) and configs[0].get("model") == "awnn"

    def widths(self) -> str:
        if not self.selected:
            return "-"
        cfg = self.selected["config"]
        if cfg.get("model") == "awnn":
            runs = [o for o in (self.assessment.outcomes if self.assessment else []) if o.get("widths_at_best")]
            totals = [sum(o["widths_at_best"]) for o in runs] or [sum(self.selected.get("widths_at_best") or [])]
            if len(totals) == 1:
                return f"{totals[0]:.0f} learned"
            import statistics

            # learned total over the re-training runs (at their selected epochs): mean +- std (min..max)
            return f"{statistics.fmean(totals):.0f} +- {statistics.stdev(totals):.0f} ({min(totals):.0f}..{max(totals):.0f})"
        if cfg.get("layer_widths"):  # one width per layer (fixedplus per-layer)
            return str(cfg["layer_widths"]).replace(",", "+")
        if cfg.get("width") == 0 or cfg.get("hidden_layers") == 0:
            return "linear"
        # the layers the trainer recorded (the same ones AWNN's total sums, e.g. GIN: every MLP), else hidden_layers
        recorded = [o["widths"] for o in (self.assessment.outcomes if self.assessment else []) if o.get("widths")]
        return f"{cfg.get('width')} x {len(recorded[0]) if recorded else cfg.get('hidden_layers')}"
