"""The searcher that feeds Ray Tune a comparison's trials, phase by phase.

For each arm in order: its selection trials; when all have ended, the
selected config's re-training trials (search/protocol.py); then the next
arm.  The next phase starts only when every trial of the current one is in
the outcome record (search/record.py): Ray calls `suggest` again after its
callbacks ran, so one Tuner, with its warm actors, serves the whole
comparison.

The searcher knows nothing of MLflow or of the Comparison that runs it: it
reads the outcome record and calls small hooks (`PhaseHooks`) when a sweep
starts or ends, when a config is selected, and to record wall time; the
Comparison's `SweepRuns` (search/sweep_runs.py) implements them.  So it can
be driven without Ray by a loop that calls `suggest` and fills the record
(tests/search/test_phases.py).
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Mapping, Protocol, TextIO

from .budget import Budget
from .errors import TrialsNotRun
from .progress import ProgressLine, flight, fmt_seconds
from .protocol import TrialSpec, fold_assessment_specs, most_selected, select_by_fold, summarize_assessment
from .record import OutcomeRecord, PhaseResult, StrategyResult
from .resume import PriorAttempts
from .fixedplus import fixedplus_config
from .fusion import fuse_specs, member_keys
from .strategies import REGISTRY, Arm
from .tpe import TpeSource

try:  # Ray is a hard dependency; the alias keeps the class definition readable
    from ray.tune.search import Searcher as _SearcherBase
except ImportError:  # pragma: no cover
    _SearcherBase = object

__all__ = ["PhaseHooks", "PhasedSearcher", "WALL_RECORD_SECONDS"]

WALL_RECORD_SECONDS = 5.0  # how often the running wall time is recorded


class PhaseHooks(Protocol):
    """What the searcher tells the outside world (search/sweep_runs.py writes it to MLflow)."""

    def sweep_started(self, arm: Arm, phase: str, specs: list[TrialSpec], selected: Mapping[str, Any] | None) -> None: ...

    def config_selected(self, arm: Arm, best: Mapping[str, Any], by_fold: Mapping[int, Mapping[str, Any]] | None = None) -> None: ...

    def sweep_ended(self, result: PhaseResult, summary: Mapping[str, Any] | None) -> None: ...

    def wall(self, sweep: str | None, seconds: float) -> None: ...

    def log(self, text: str) -> None: ...


class PhasedSearcher(_SearcherBase):
    """Ray Tune searcher over the phases of `arms`.

    `record` holds the finished trials (earlier drivers' included); `prior`
    what a re-run of an interrupted trial needs and the earlier drivers'
    wall time; `make_tpe(arm)` opens a tpe arm's Optuna study;
    `trial_settings` is handed to every trial with its spec."""

    def __init__(self, arms: list[Arm], budget: Budget, record: OutcomeRecord, hooks: PhaseHooks, *,
                 prior: PriorAttempts | None = None, make_tpe: Callable[[Arm], TpeSource] | None = None,
                 trial_settings: Mapping[str, Any] | None = None, stream: TextIO | None = None, fuse: int = 1):
        super().__init__(metric="best_val_acc", mode="max")
        self.arms = {a.name: a for a in arms}
        self.budget = budget
        self.record = record
        self.hooks = hooks
        self.prior = prior or PriorAttempts()
        self.make_tpe = make_tpe
        self.trial_settings = dict(trial_settings or {})
        self.fuse = int(fuse)  # --fuse: selection configs per Ray trial (search/fusion.py); 1: one config per trial
        self.stream = stream or sys.stderr
        self.record.listener = self.on_update
        self.results: list[StrategyResult] = []
        self.last_wall_record = 0.0
        self.phases = [(a.name, ph) for a in arms for ph in ("selection", "assessment")]
        self.tpe: dict[str, TpeSource] = {}  # arm -> its Optuna study
        self.tpe_trials: dict[str, TpeSource] = {}  # Ray trial id -> the study that suggested it
        self.current = -1
        self.queue: list[TrialSpec] = []
        self.keys: set[str] = set()
        self.started: set[str] = set()  # trials that have reported: running, not waiting for a slot (progress.flight)
        self.result: PhaseResult | None = None
        self.strategy_result: StrategyResult | None = None
        self.progress: ProgressLine | None = None
        self.t0 = 0.0
        self.started_at: float | None = None  # this driver's first phase start (the overall eta)
        self.runs_here = False
        self.finished = False

    def __getstate__(self):
        # Ray pickles the Tuner (search algorithm included) for Tuner.restore;
        # we resume from MLflow instead, so the live objects stay behind.
        return {"metric": "best_val_acc", "mode": "max"}

    # --- sizes, for num_samples and the progress line
    def max_trials(self) -> int:
        return sum((a.trials + self.budget.runs(a.grid)) * self.budget.folds_for(a.grid) for a in self.arms.values())

    def pending_trials(self) -> bool:
        return len(self.record.earlier) < self.max_trials()

    # --- Searcher API
    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    def save_to_dir(self, *args, **kwargs) -> None:  # resuming is done from MLflow, not from Ray's state
        pass

    def on_trial_complete(self, trial_id, result=None, error=False) -> None:
        source = self.tpe_trials.pop(trial_id, None)
        if source is not None:
            final = _final_of(result)
            status = "failed" if error else (final.get("status") if final else "stopped")
            source.complete(trial_id, status, final.get(source.metric) if final else None)

    def suggest(self, trial_id):
        while True:
            if self.finished:
                return _SearcherBase.FINISHED
            if self.current < 0:
                self._start_next()
                continue
            if self.queue:
                spec = self.queue.pop(0)
                source = self.tpe.get(spec.strategy) if spec.phase == "selection" else None
                if source is not None:
                    if spec.config:  # re-run of a trial an earlier driver started
                        source.told_later(spec, trial_id)
                    else:
                        source.fill(spec, trial_id)
                    self.tpe_trials[trial_id] = source
                return {"spec": spec.to_dict(), "settings": self.trial_settings}
            if self.keys <= self.record.done():
                self._end_phase()
                self._start_next()
                continue
            return None

    def finish_all(self) -> None:
        """After Ray returns: close the phases it never got to that have
        nothing left to run (every trial finished by an earlier driver, when
        resuming).  A phase with trials Ray never ran (Tune ended early, for
        whatever reason) is not closed as if they had failed: `TrialsNotRun`
        names them, the driver closes its runs as failed, and `--resume`
        runs them."""
        guard = 0
        while not self.finished and guard < 4 * len(self.phases) + 4:
            guard += 1
            if self.current < 0:
                self._start_next()
                continue
            missing = self.keys - self.record.done()
            if missing:
                names = sorted(k.split("/", 2)[2] for k in missing)
                shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                raise TrialsNotRun(f"Ray Tune ended before {len(names)} trial(s) of {self.result.sweep} ran ({shown}); "
                                   f"no result was recorded for them: run the same command with --resume to run them")
            self.queue.clear()
            self._end_phase()
            self._start_next()

    def on_update(self, key: str) -> None:
        """The record changed (a report or a finished trial): redraw the progress line, record wall time."""
        if key and key not in self.record.done():
            self.started.add(key)
        if self.progress is None or self.result is None:
            return
        r = self.result
        done = self.record.done()
        n = len(self.keys & done)
        new = len(self.keys & set(self.record.here))
        todo = len(self.keys - set(self.record.earlier))
        now = time.monotonic()
        elapsed = now - self.t0
        eta = elapsed / new * (todo - new) if new else math.nan
        best = self.record.best_val_acc.get(r.sweep, math.nan)
        queued = {f"{r.sweep}/{k}" for sp in self.queue for k in member_keys(sp)}
        in_flight = self.keys - done - queued  # handed to Ray, not finished: running, or waiting for a slot
        stopped = sum(1 for k in self.keys & done if (self.record.here.get(k) or self.record.earlier.get(k) or {}).get("status") == "stopped")
        text = (f"{r.strategy} {r.phase}: {n}/{len(self.keys)} trials" + (f" ({stopped} stopped)" if stopped else "")
                + f", {flight(in_flight, self.started)}  elapsed {fmt_seconds(elapsed)}  eta {fmt_seconds(eta)}  phase {self.current + 1}/{len(self.phases)}"
                + f"  all phases eta ~{fmt_seconds(self._overall_eta(now, eta))}")
        if best == best:
            text += f"  best val_acc {best:.4f}"
        inside = [p for k, p in sorted(self.record.in_epoch.items()) if k in self.keys and p.get("batches")]
        if inside:  # trials in a long epoch: how far each is
            text += "  in epoch: " + ", ".join(f"{p['epoch']}:{100 * p['batch'] // p['batches']}%" for p in inside[:4])
        self.progress.update(text)
        now = time.monotonic()
        if self.record.is_new(key) or now - self.last_wall_record >= WALL_RECORD_SECONDS:
            self.last_wall_record = now
            self.hooks.wall(r.sweep, self.sweep_wall())

    def sweep_wall(self) -> float:
        """Wall time of the phase in progress: earlier drivers' and this one's."""
        before = self.prior.wall(self.result.sweep)
        return before + (time.monotonic() - self.t0 if self.runs_here else 0.0)

    def _overall_eta(self, now: float, phase_eta: float) -> float:
        """The whole comparison's remaining time: the current phase's own eta,
        plus its later phases' trials at this driver's mean time per finished
        trial (trials of all arms alike: a rough figure, `~` on the line)."""
        here = len(self.record.here)
        if not here or self.started_at is None or phase_eta != phase_eta:
            return math.nan
        later = max(0, self.max_trials() - len(self.record.done()) - len(self.keys - self.record.done()))
        return phase_eta + (now - self.started_at) / here * later

    def current_sweep(self) -> tuple[str | None, float]:
        if self.result is None:
            return None, 0.0
        return self.result.sweep, self.sweep_wall()

    # --- phases
    def _start_next(self) -> None:
        while True:
            self.current += 1
            if self.current >= len(self.phases):
                self.finished = True
                return
            strategy, phase = self.phases[self.current]
            arm = self.arms[strategy]
            specs = self._phase_specs(arm, phase)
            if specs is None:
                continue
            selected = self.strategy_result.selected if phase == "assessment" else None
            self.hooks.sweep_started(arm, phase, specs, selected)
            self.result = PhaseResult(strategy, phase)
            if phase == "assessment":
                self.strategy_result.assessment = self.result
            else:
                self.strategy_result.selection = self.result
            self.keys = {f"{self.result.sweep}/{sp.key}" for sp in specs}
            self.result.outcomes = [self.record.earlier[k] for k in sorted(self.keys & set(self.record.earlier))]
            done = {sp.key for sp in specs if f"{self.result.sweep}/{sp.key}" in self.record.earlier}
            fuse = self.fuse if phase == "selection" and REGISTRY[arm.family].fuses else 1
            self.queue = [self._prepare(sp) for sp in fuse_specs(specs, fuse, done)]
            groups = [sp for sp in self.queue if sp.members]
            if groups:
                self.hooks.log(f"{arm.name} {phase}: {sum(len(g.members) - len(g.done) for g in groups)} configs fused in {len(groups)} "
                               f"Ray trials (--fuse {fuse}), {len(self.queue) - len(groups)} trials of one config")
            self.t0 = time.monotonic()
            self.started_at = self.t0 if self.started_at is None else self.started_at
            self.runs_here = bool(self.queue)  # has this driver anything to run in this phase?
            self.progress = ProgressLine(self.stream)
            self.on_update("")
            return

    def _phase_specs(self, arm: Arm, phase: str) -> list[TrialSpec] | None:
        """The phase's trials; None when the phase has nothing to run (no selection trial finished with a score)."""
        if phase == "selection":
            self.strategy_result = StrategyResult(arm.name, arm.grid, PhaseResult(arm.name, phase), family=arm.family)
            self.results.append(self.strategy_result)
            if REGISTRY[arm.family].derived_from:  # no selection of its own (fixedplus)
                return None
            if arm.family == "tpe" and arm.name not in self.tpe:
                self.tpe[arm.name] = self.make_tpe(arm)
            specs = arm.selection_specs(self.budget)
        else:
            source = REGISTRY[arm.family].derived_from
            chosen = self._derived_choice(arm, source) if source else select_by_fold(self.strategy_result.selection.outcomes)
            if not chosen:
                self.hooks.log(f"{arm.name}: " + (f"the {source} arm has no finished re-training run with learned widths" if source else
                                                  "no selection trial finished with a validation score") + "; no re-training")
                return None
            folds = self.budget.folds_for(arm.grid)
            by_fold = {f: dict(o) for f, o in chosen.items() if f is not None}
            if folds > 1 and len(by_fold) < folds:
                missing = sorted(set(range(folds)) - set(by_fold))
                self.hooks.log(f"{arm.name}: no selection trial of fold(s) {', '.join(map(str, missing))} finished with a validation score; "
                               f"those folds are not re-trained")
            best = most_selected(chosen)
            if arm.name in self.tpe:  # the study records the protocol's choice (its own best_trial ignores the tie-breaks)
                self.tpe[arm.name].record_selection(best)
            self.strategy_result.selected = dict(best)
            self.strategy_result.selected_by_fold = by_fold
            self.hooks.config_selected(arm, best, by_fold or None)
            specs = fold_assessment_specs(chosen, arm.grid, self.budget)
        for sp in specs:
            sp.strategy, sp.family, sp.repeat = arm.name, arm.family, arm.repeat
        return specs

    def _derived_choice(self, arm: Arm, source: str) -> dict[int | None, dict[str, Any]]:
        """fixedplus: per outer fold, the fixed config at the width the `source`
        arm learned there (search/strategies.py, fixedplus_config)."""
        src = next((r for r in self.results if r.family == source), None)
        outcomes = src.assessment.outcomes if src is not None and src.assessment else []
        return fixedplus_config(arm, src.selected if src else None, outcomes, self.budget)

    def _prepare(self, spec: TrialSpec) -> TrialSpec:
        """A trial an earlier driver left unfinished resumes from its checkpoint, with its config (an interrupted TPE trial);
        a fused group from its group's checkpoint (the same for each of its unfinished members)."""
        if spec.members:
            found = [r.checkpoint for m in spec.members if (r := self.prior.reruns.get(f"{spec.sweep}/{m.key}")) and r.checkpoint]
            if found:
                spec.resume_from = max(found)
                for m in spec.members:
                    m.resume_from = spec.resume_from
            return spec
        rerun = self.prior.reruns.get(f"{spec.sweep}/{spec.key}")
        if rerun is not None and rerun.checkpoint:
            spec.resume_from = rerun.checkpoint
        if rerun is not None and rerun.config and not spec.config:
            spec.config, spec.index = rerun.config, rerun.index
        return spec

    def _end_phase(self) -> None:
        r = self.result
        if r is None:
            return
        r.outcomes += [self.record.here[k] for k in sorted(self.keys & set(self.record.here))]
        r.wall_seconds = self.sweep_wall()
        self.progress.close(
            f"{r.strategy} {r.phase}: {len(r.outcomes)}/{len(self.keys)} trials in {fmt_seconds(r.wall_seconds)}  "
            f"({r.count('ok')} ok, " + (f"{r.count('stopped')} stopped, " if r.count("stopped") else "")
            + f"{r.count('diverged')} diverged, {r.count('failed')} failed)  "
            f"{r.total('device_hours'):.4f} device-h"
        )
        summary = None
        if r.phase == "assessment":
            summary = self.strategy_result.summary = summarize_assessment(r.outcomes)
        self.hooks.sweep_ended(r, summary)
        self.result = None


def _final_of(result: dict | None) -> dict | None:
    """The trial's final summary from its last result (Tune may hand the
    searcher the flattened form, `final/<name>`)."""
    if not result:
        return None
    if isinstance(result.get("final"), dict):
        return result["final"]
    flat = {k.split("/", 1)[1]: v for k, v in result.items() if k.startswith("final/")}
    return flat or None
