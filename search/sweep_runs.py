"""A comparison's sweep runs in MLflow and the wall time of the drivers,
written through the driver's one TrackingWriter (tracking/store.py).

`SweepRuns` implements the searcher's hooks (search/phases.py): it opens a
sweep run when a phase starts, tags the selected config, closes the sweep
run with its counts, costs and (assessment) test-accuracy summary, and logs
the running `wall_seconds` of the sweep in progress and of the comparison.
Wall time is the time the drivers spent, summed over their attempts: each
driver logs its running total as it goes, so a killed one loses at most the
seconds since its last record (search/phases.py, WALL_RECORD_SECONDS).

Writer keys: `cmp` (the comparison run), `<arm>/<phase>` (a sweep run).
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping

from tracking.contract import STATUS_COUNTS, Metric, Param, Tag, redact_uri
from tracking.store import TrackingWriter

from .budget import Budget
from .protocol import TrialSpec
from .record import PhaseResult
from .strategies import REGISTRY, Arm

__all__ = ["SweepRuns"]


class SweepRuns:
    """The comparison run `cmp` and its sweep runs, for comparison `comparison` (set once it is known)."""

    def __init__(self, writer: TrackingWriter, task: str, budget: Budget, log: Callable[[str], None],
                 optuna_storage: str | None = None, t_attempt: float | None = None):
        self.writer = writer
        self.task = task
        self.budget = budget
        self.log = log
        self.optuna_storage = optuna_storage
        self.comparison: str | None = None
        self.open: set[str] = set()  # sweep runs this driver opened or reopened and has not closed
        self.opened_at: dict[str, float] = {}  # sweep runs this driver started -> when (time.monotonic())
        self.pending_tags: dict[str, dict[str, str]] = {}  # arm -> selection tags for its re-training sweep (no selection sweep)
        self.tpe_windows: dict[str, int] = {}  # tpe arm -> its study's ask window (the Comparison sets it as it opens the study)
        self.wall_before = 0.0  # the earlier drivers' wall time on the comparison
        self.t_attempt = time.monotonic() if t_attempt is None else t_attempt  # this driver's share starts here

    def study_name(self, arm: Arm) -> str:
        """The Optuna study of a tpe arm."""
        return f"{self.comparison}-{arm.name}"

    # ------------------------------------------------------- the searcher's hooks
    def sweep_started(self, arm: Arm, phase: str, specs: list[TrialSpec], selected: Mapping[str, Any] | None) -> None:
        sweep = f"{arm.name}/{phase}"
        if sweep in self.writer.run_ids:  # reopened by --resume
            return
        self.open.add(sweep)
        self.opened_at[sweep] = time.monotonic()
        grid = arm.grid
        tags = {Tag.KIND: "sweep", Tag.STRATEGY: arm.family, Tag.ARM: arm.name, Tag.REPEAT: str(arm.repeat),
                Tag.PHASE: phase, Tag.COMPARISON: self.comparison, Tag.TASK: self.task, Tag.STATE: "running",
                **REGISTRY[arm.family].tags()}
        params = {Param.GRID_FILE: str(grid.path), Param.GRID_DIGEST: grid.digest(), Param.BUDGET: self.budget.name,
                  Param.EPOCHS: self.budget.epochs(grid), Param.RETRAIN_RUNS: self.budget.runs(grid), Param.CONFIGS: grid.size,
                  Param.TRIALS: len(specs)}
        cpu = self.budget.cpu_values(grid)
        if cpu:  # what this CPU budget changed in the grid's configs (the report's header states it)
            params[Param.CPU] = json.dumps(cpu, sort_keys=True)
        folds = self.budget.folds_for(grid)
        if folds > 1:
            params[Param.FOLDS] = folds
        if phase == "selection":
            params.update(arm.describe(self.budget))
            if arm.family == "tpe":
                params.update({Param.OPTUNA_STORAGE: redact_uri(self.optuna_storage), Param.OPTUNA_STUDY: self.study_name(arm)})
                if arm.name in self.tpe_windows:
                    params[Param.TPE_ASK_WINDOW] = self.tpe_windows[arm.name]
        if selected is not None:
            params[Param.SELECTED_KEY] = selected["key"]
        tags.update(self.pending_tags.pop(arm.name, {}) if phase == "assessment" else {})
        self.writer.start_run(sweep, name=f"{arm.name}-{phase}", parent="cmp", tags=tags, params=params)

    def config_selected(self, arm: Arm, best: Mapping[str, Any], by_fold: Mapping[int, Mapping[str, Any]] | None = None) -> None:
        tags = {Tag.SELECTED_KEY: best["key"], Tag.SELECTED_CONFIG: json.dumps(best["config"], sort_keys=True)}
        if by_fold:  # cross-validated: every fold's selected trial
            tags[Tag.SELECTED_BY_FOLD] = json.dumps({str(f): o["key"] for f, o in sorted(by_fold.items())})
        if REGISTRY[arm.family].derived_from:  # no selection sweep (fixedplus): its re-training sweep, when it starts, carries them
            self.pending_tags[arm.name] = tags
        else:
            self.writer.set_tags(f"{arm.name}/selection", tags)

    def sweep_ended(self, result: PhaseResult, summary: Mapping[str, Any] | None) -> None:
        sweep = result.sweep
        self.writer.log_metrics(sweep, [
            (Metric.N_TRIALS, len(result.outcomes), 0), *((name, result.count(status), 0) for status, name in STATUS_COUNTS.items()),
            (Metric.WALL_SECONDS, result.wall_seconds, 0),
            *((name, result.total(name), 0) for name in (Metric.DEVICE_HOURS, Metric.GPU_HOURS, Metric.COMPUTE_SECONDS)),
        ])
        if summary is not None:
            self.writer.log_metrics(sweep, [(k, v, 0) for k, v in summary.items()])
        self.writer.set_tags(sweep, {Tag.STATE: "finished"})
        self.writer.end_run(sweep)
        self.open.discard(sweep)

    def wall(self, sweep: str | None, seconds: float) -> None:
        """Log the running wall time of the sweep in progress and of the comparison."""
        if sweep is not None and sweep in self.open:
            self.writer.log_metrics(sweep, [(Metric.WALL_SECONDS, seconds, 0)])
        self.writer.log_metrics("cmp", [(Metric.WALL_SECONDS, self.wall_seconds(), 0)])

    # ------------------------------------------------------- the comparison run
    def wall_seconds(self) -> float:
        """The comparison's wall time: every driver's time on it, this one's included."""
        return self.wall_before + time.monotonic() - self.t_attempt

    def finish(self) -> None:
        self.writer.log_metrics("cmp", [(Metric.WALL_SECONDS, self.wall_seconds(), 0)])
        self.writer.set_tags("cmp", {Tag.STATE: "finished"})
        self.writer.end_run("cmp")

    def close_open(self, state: str, status: str, walls: Mapping[str, float]) -> None:
        """After an interrupt (`interrupted`, KILLED) or an error (`failed`,
        FAILED): close the open sweeps, each with its wall time so far, and the
        comparison.  `--resume` reopens them.

        `walls`: the wall time of each sweep whose phase the searcher has open
        (phases overlap: several).  A sweep this driver started but whose phase
        the searcher did not yet count as open (the interrupt came while it
        queued the phase's trials) records the seconds since it started: it had
        no wall time at all (the long fault matrix: an `asha` re-training sweep,
        KILLED with none)."""
        for sweep in sorted(self.open):
            seconds = walls.get(sweep)
            if seconds is None and sweep in self.opened_at:
                seconds = time.monotonic() - self.opened_at[sweep]
            if seconds is not None:
                self.writer.log_metrics(sweep, [(Metric.WALL_SECONDS, seconds, 0)])
            self.writer.set_tags(sweep, {Tag.STATE: state})
            self.writer.end_run(sweep, status)
        self.open.clear()
        self.writer.log_metrics("cmp", [(Metric.WALL_SECONDS, self.wall_seconds(), 0)])
        self.writer.set_tags("cmp", {Tag.STATE: state})
        self.writer.end_run("cmp", status)
