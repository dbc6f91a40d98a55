"""The searcher that feeds Ray Tune a comparison's trials, phase by phase.

Phases overlap (search/phase_plan.py says what each waits for): when a slot
asks for work and no open phase has a trial left to hand out (only trials in
flight: a phase's tail; or a tpe selection waiting for its oldest trial in
flight to end, search/tpe.py "The ask window"), the next phase in plan order whose dependencies are
met opens and hands out its trials, so the tail's idle slots keep working.
An earlier phase with trials left is always served first, and each arm's
trials are handed out in its own plan order (a tpe study, an asha bracket
sees its trials as before).

A phase closes once every trial of it is in the outcome record
(search/record.py): at the tracking callback's report of its last trial, or
at the next `suggest` (Ray calls it after its callbacks ran); so one Tuner,
with its warm actors, serves the whole comparison.  A sweep's wall time runs
from its opening to its closing (summed over the drivers of a resumed
comparison): overlapping sweeps add up to more than the comparison's wall
time; an arm's own phases never overlap.

The searcher knows nothing of MLflow or of the Comparison that runs it: it
reads the outcome record and calls small hooks (`PhaseHooks`) when a sweep
starts or ends, when a config is selected, and to record wall time; the
Comparison's `SweepRuns` (search/sweep_runs.py) implements them.  So it can
be driven without Ray by a loop that calls `suggest` and fills the record
(tests/search/test_phases.py, test_phase_overlap.py).
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Mapping, Protocol, TextIO

from tracking.contract import Metric
from tracking.hooks import past_tune

from .budget import Budget
from .errors import TrialsNotRun
from .progress import ProgressLine, flight, fmt_seconds
from .protocol import TrialSpec, fold_assessment_specs, most_selected, select_by_fold, summarize_assessment
from .record import OutcomeRecord, PhaseResult, StrategyResult, sweep_of
from .resume import PriorAttempts
from .fixedplus import fixedplus_config
from .fusion import fuse_specs, member_keys
from .phase_plan import Phase, PhasePlan
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
        self.results: list[StrategyResult] = []  # in arm order (selections open in plan order)
        self.by_arm: dict[str, StrategyResult] = {}
        self.last_wall_record = -math.inf  # never: the first update records (monotonic() counts from boot)
        self.plan = PhasePlan(arms)
        self.phases = [(p.arm.name, p.name) for p in self.plan]
        self.tpe: dict[str, TpeSource] = {}  # arm -> its Optuna study
        self.tpe_trials: dict[str, TpeSource] = {}  # Ray trial id -> the study that suggested it
        self.started: set[str] = set()  # trials that have reported: running, not waiting for a slot (progress.flight)
        self.progress = ProgressLine(self.stream)
        self.started_at: float | None = None  # this driver's first phase start (the overall eta)
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

    @past_tune  # (Tune would swallow its error: tracking/hooks.py)
    def on_trial_complete(self, trial_id, result=None, error=False) -> None:
        source = self.tpe_trials.pop(trial_id, None)
        if source is not None:
            final = _final_of(result)
            status = "failed" if error else (final.get("status") if final else "stopped")
            source.complete(trial_id, status, final.get(source.metric) if final else None)

    def suggest(self, trial_id):
        """The next trial: of the earliest open phase with one left to hand
        out, else of the next phase (plan order) whose dependencies are met;
        None while every open phase only has trials in flight."""
        if self.finished:
            return _SearcherBase.FINISHED
        done = self.record.done()
        for ph in self.plan:
            if ph.state == "open" and ph.keys <= done:
                self._close(ph)
            if ph.state == "waiting" and self.plan.ready(ph):
                self._open(ph)
                done = self.record.done()
            if ph.state == "open" and ph.queue and self._may_hand_out(ph):
                return self._hand_out(ph, trial_id)
        if self.plan.all_closed():
            self.finished = True
            return _SearcherBase.FINISHED
        return None

    def _tpe_of(self, ph: Phase) -> TpeSource | None:
        """The Optuna study that fills `ph`'s trials (a tpe arm's selection), else None."""
        return self.tpe.get(ph.arm.name) if ph.name == "selection" else None

    def _may_hand_out(self, ph: Phase) -> bool:
        """Has `ph` a trial to hand out now?  A tpe selection waits while its
        study's ask window is full (search/tpe.py, "The ask window"), unless it
        has a re-run of an earlier driver's trial, whose config is known; the
        slot goes to the next phase meanwhile, as in any phase's tail."""
        source = self._tpe_of(ph)
        return source is None or source.can_fill() or any(sp.config for sp in ph.queue)

    def _hand_out(self, ph: Phase, trial_id: str) -> dict:
        source = self._tpe_of(ph)
        if source is None:
            spec = ph.queue.pop(0)
        else:
            # re-runs of trials an earlier driver started first (the study's next asks wait for their ends), then
            # the study's asks in plan order
            rerun = next((i for i, sp in enumerate(ph.queue) if sp.config), None)
            spec = ph.queue.pop(0 if rerun is None else rerun)
            if spec.config:
                source.told_later(spec, trial_id)
            else:
                source.fill(spec, trial_id, left=1 + sum(1 for sp in ph.queue if not sp.config))
            self.tpe_trials[trial_id] = source
        return {"spec": spec.to_dict(), "settings": self.trial_settings}

    def finish_all(self) -> None:
        """After Ray returns: close the phases it never got to that have
        nothing left to run (every trial finished by an earlier driver, when
        resuming).  A phase with trials Ray never ran (Tune ended early, for
        whatever reason) is not closed as if they had failed: `TrialsNotRun`
        names them, the driver closes its runs as failed, and `--resume`
        runs them.  No phase opens once one is found with trials missing."""
        for source in self.tpe.values():  # ends a study still holds (Tune ended before its last ask)
            source.flush()
        missing: list[tuple[str, list[str]]] = []
        for ph in self.plan:
            if ph.state == "waiting" and not missing and self.plan.ready(ph):
                self._open(ph)
            if ph.state != "open":
                continue
            left = ph.keys - self.record.done()
            if left:
                missing.append((ph.sweep, sorted(k.split("/", 2)[2] for k in left)))
            else:
                self._close(ph)
        if missing:
            def shown(names: list[str]) -> str:
                return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            (sweep, names), rest = missing[0], missing[1:]
            raise TrialsNotRun(f"Ray Tune ended before {len(names)} trial(s) of {sweep} ran ({shown(names)})"
                               + "".join(f", {len(n)} of {s} ({shown(n)})" for s, n in rest)
                               + "; no result was recorded for them: run the same command with --resume to run them")
        self.finished = self.plan.all_closed()

    def on_update(self, key: str) -> None:
        """The record changed (a report or a finished trial): redraw the progress
        line, record wall time, close the phases whose trials have all ended."""
        if key and key not in self.record.done():
            self.started.add(key)
        open_ = self.plan.open()
        if open_:
            if self.progress.due():  # (the text reads every open trial: built at each report of a 99,000-config grid, it
                self.progress.update(self._progress_text(open_[0], open_[1:]))  # took most of the driver's CPU)
            now = time.monotonic()
            if now - self.last_wall_record >= WALL_RECORD_SECONDS:
                self.last_wall_record = now
                self.record_walls()
            elif self.record.is_new(key):
                for ph in open_:
                    if ph.sweep == sweep_of(key):
                        self.hooks.wall(ph.sweep, self.sweep_wall(ph))
        if key and self.record.is_new(key):
            done = self.record.done()
            for ph in open_:
                if ph.keys <= done:
                    self._close(ph)

    def record_walls(self) -> None:
        """Record the running wall time of every open sweep (and of the comparison)."""
        for ph in self.plan:
            if ph.state == "open":
                self.hooks.wall(ph.sweep, self.sweep_wall(ph))

    def sweep_wall(self, ph: Phase) -> float:
        """Wall time of a phase: earlier drivers' and, while it has run here, this one's since it opened."""
        return self.prior.wall(ph.sweep) + (time.monotonic() - ph.t0 if ph.runs_here else 0.0)

    def open_walls(self) -> dict[str, float]:
        """Every open sweep and its wall time so far (a stopping driver closes them with it)."""
        return {ph.sweep: self.sweep_wall(ph) for ph in self.plan if ph.state == "open"}

    def _progress_text(self, ph: Phase, others: list[Phase]) -> str:
        """The earliest open phase's counts and etas; the other open phases' counts after `also:`."""
        r, done, now = ph.result, self.record.done(), time.monotonic()
        n = len(ph.keys & done)
        new = len(ph.keys & set(self.record.here))
        todo = len(ph.keys - set(self.record.earlier))
        elapsed = now - ph.t0
        eta = elapsed / new * (todo - new) if new else math.nan
        if eta == eta:  # never less than its slowest running trial needs at that trial's own pace
            eta = max(eta, self._running_left(ph, done))
        best = self.record.best_val_acc.get(r.sweep, math.nan)
        stopped = sum(1 for k in ph.keys & done if (self.record.here.get(k) or self.record.earlier.get(k) or {}).get("status") == "stopped")
        text = (f"{r.strategy} {r.phase}: {n}/{len(ph.keys)} trials" + (f" ({stopped} stopped)" if stopped else "")
                + f", {self._flight(ph, done)}  elapsed {fmt_seconds(elapsed)}  eta {fmt_seconds(eta)}  phase {self.plan.number(ph)}/{len(self.plan)}"
                + f"  all phases eta {self._overall_text(now, eta, ph)}")
        if best == best:
            text += f"  best val_acc {best:.4f}"
        inside = [p for k, p in sorted(self.record.in_epoch.items()) if k in ph.keys and p.get("batches")]
        if inside:  # trials in a long epoch: how far each is ("epoch 872 at 31%": 31% of its batches done)
            text += "  inside epochs: " + ", ".join(f"epoch {p['epoch']} at {100 * p['batch'] // p['batches']}%" for p in inside[:4])
            if len(inside) > 4:
                text += f" (+{len(inside) - 4} more)"
        if others:  # phases opened in the tail of the earlier ones
            text += "  also: " + "; ".join(f"{o.arm.name} {o.name} {len(o.keys & done)}/{len(o.keys)}, {self._flight(o, done)}" for o in others)
        return text

    def _flight(self, ph: Phase, done: set[str]) -> str:
        queued = {f"{ph.sweep}/{k}" for sp in ph.queue for k in member_keys(sp)}
        return flight(ph.keys - done - queued, self.started)  # handed to Ray, not finished: running, or waiting for a slot

    def _overall_text(self, now: float, phase_eta: float, ph: Phase) -> str:
        """`~<eta>` of the whole comparison, or `><eta>` (a lower bound) while a
        phase still to run has no measured cost per epoch."""
        seconds, measured = self._overall_eta(now, phase_eta, ph)
        return ("~" if measured or seconds != seconds else ">") + fmt_seconds(seconds)

    def _overall_eta(self, now: float, phase_eta: float, ph: Phase) -> tuple[float, bool]:
        """The whole comparison's remaining time, and whether every phase in it
        was estimated from a measured cost.

        Every unfinished phase's config-epochs still to train (open phases:
        their trials' epochs not yet reported; phases still waiting: their
        planned trials at their epochs) at its measured device-seconds per
        config-epoch (`_cost_per_epoch`), spread over the devices this driver
        has kept busy (`_devices_busy`: device-seconds of its finished and
        running trials per wall second since its first phase opened, at least
        one trial's devices); never less than a running trial still
        needs at its own pace.  The phase on the line without a measured cost
        counts at its own eta; any other at this driver's mean wall time per
        finished trial, and the result is then a lower bound.  The mean alone, as this once was, read
        2-4x too low: the fused grid's cheap configs finish first and an AWNN
        epoch costs several times a small fixed net's (a standard SpiralHard
        run said ~52 s with 4 min left)."""
        here = len(self.record.here)
        if not here or self.started_at is None or phase_eta != phase_eta:
            return math.nan, True
        done = self.record.done()
        elapsed = max(1e-9, now - self.started_at)
        busy = self._devices_busy(elapsed)
        left, unmeasured = 0.0, 0
        for p in self.plan:
            if p.state == "closed":
                continue
            epochs, trials = self._epochs_left(p, done)
            cost = self._cost_per_epoch(p)
            if cost is not None and busy > 0:
                left += epochs * cost / busy
            elif p is ph:
                left += phase_eta
            else:
                unmeasured += trials
        measured = unmeasured == 0
        left += elapsed / here * unmeasured
        running = max((self._running_left(p, done) for p in self.plan.open()), default=0.0)
        # never less than the phase on the line: where each trial's start and end (a Ray actor, MLflow runs) cost
        # far more wall time than its training (2-epoch smoke trials of a tiny MLP: ~0.6 s a trial for milliseconds
        # of device time) the device-seconds above miss it (a 99,000-config grid: `eta 17h29m  ...  all phases eta ~7m04s`)
        return max(left, running, phase_eta), measured

    def _devices(self) -> float:
        """The devices one trial holds (its GPU share on GPUs, else its CPUs)."""
        return float(self.trial_settings.get("gpus_per_trial") or self.trial_settings.get("cpus_per_trial") or 1)

    def _devices_busy(self, elapsed: float) -> float:
        """The devices this driver has kept busy: the device-seconds of its
        finished trials and of its running ones so far (between their first and
        last report) per wall second, never less than one trial's devices.
        Finished trials alone read near 0 when those were short - configs that
        diverged or hit max_width after an epoch - while a slow one ran: the
        line said `all phases eta ~8h19m` beside a phase eta of 33 s."""
        finished = sum(_device_seconds(o) for o in self.record.here.values())
        running = sum(p[2] - p[0] for k, p in self.record.paces.items() if k not in self.record.here) * self._devices()
        return max((finished + running) / elapsed, self._devices())

    def _cost_per_epoch(self, ph: Phase) -> float | None:
        """Device-seconds per config-epoch of `ph`'s finished trials (this
        driver's and earlier ones'; an assessment phase without any: its arm's
        selection's), or None where none has finished with a cost; never less
        than its running one-config trials show at their own pace (the cheap
        configs of a grid finish first: an AWNN grid's 1-layer nets)."""
        finished = self._finished_cost(ph)
        if finished is None:
            return None
        return max(finished, self._running_cost(ph))

    def _running_cost(self, ph: Phase) -> float:
        """The median device-seconds per epoch of `ph`'s running one-config
        trials at their own pace (wall seconds per epoch x the devices a trial
        holds), 0 where none shows a pace."""
        fused = self.__dict__.get("_fused", set())
        per = [self.record.time_left(k, self.record.paces[k][3] + 1) for k in ph.keys
               if k in self.record.paces and k not in fused]
        per = sorted(v for v in per if v == v and v > 0)
        if not per:
            return 0.0
        return per[len(per) // 2] * self._devices()

    def _finished_cost(self, ph: Phase) -> float | None:
        for sweep in (ph.sweep, f"{ph.arm.name}/selection"):
            seconds = epochs = 0.0
            for outcomes in (self.record.here, self.record.earlier):
                for key, o in outcomes.items():
                    if sweep_of(key) != sweep:
                        continue
                    e, d = o.get("epochs_run"), _device_seconds(o)
                    if isinstance(e, (int, float)) and not isinstance(e, bool) and e > 0 and d > 0:
                        seconds += d
                        epochs += e
            if epochs > 0:
                return seconds / epochs
        return None

    def _epochs_left(self, ph: Phase, done: set[str]) -> tuple[float, int]:
        """(config-epochs `ph` has still to train, its trials not finished): an
        open phase's unfinished trials less the epochs they reported; a waiting
        phase's planned trials at their epochs (re-training runs at the mean
        epochs of the arm's selection trials)."""
        if ph.state == "open":
            keys = ph.keys - done
            paces = self.record.paces
            return float(sum(max(0, ph.ends.get(k, (0,))[0] - (paces[k][3] if k in paces else 0)) for k in keys)), len(keys)
        planned = self._planned_epochs(ph.arm)
        if ph.name == "selection":
            left = [e for k, e in planned.items() if f"{ph.sweep}/{k}" not in done]
            return float(sum(left)), len(left)
        grid = ph.arm.grid
        runs = self.budget.runs(grid) * self.budget.folds_for(grid) - sum(1 for k in done if sweep_of(k) == ph.sweep)
        mean = sum(planned.values()) / len(planned) if planned else float(self.budget.epochs(grid))
        return max(0, runs) * mean, max(0, runs)

    def _planned_epochs(self, arm: Arm) -> dict[str, int]:
        """The epochs of each of `arm`'s selection trials, by trial key (none for
        an arm without a selection of its own); computed once per arm."""
        cache = self.__dict__.setdefault("_planned", {})
        if arm.name not in cache:
            specs = [] if REGISTRY[arm.family].derived_from else arm.selection_specs(self.budget)
            default = self.budget.epochs(arm.grid)
            cache[arm.name] = {sp.key: _ends(sp, default)[0] for sp in specs}
        return cache[arm.name]

    def _running_left(self, ph: Phase, done: set[str]) -> float:
        """The longest time a running trial of `ph` still needs at its own pace
        (search/record.py `time_left`): to its last epoch, or to its next rung
        where a scheduler may stop it; 0 when none shows a pace yet.  A phase's
        mean time per finished trial alone reads too low when the trials
        differ in cost and the cheap ones finish first (a fused group's small
        nets): the eta then stood at ~15 s for two minutes."""
        left = 0.0
        for key in ph.keys - done:
            pace = self.record.paces.get(key)
            if pace is None:
                continue
            last, rungs = ph.ends.get(key, (0, ()))
            until = next((r for r in rungs if r > pace[3]), last)
            t = self.record.time_left(key, until)
            if t == t:
                left = max(left, t)
        return left

    # --- phases
    def _open(self, ph: Phase) -> None:
        """Open a phase: its sweep starts and its trials are queued; a phase with
        nothing to run is closed at once (or skipped: no sweep when it has no trials)."""
        arm, phase = ph.arm, ph.name
        specs = self._phase_specs(arm, phase)
        if specs is None:
            ph.state = "closed"
            return
        sr = self.by_arm[arm.name]
        self.hooks.sweep_started(arm, phase, specs, sr.selected if phase == "assessment" else None)
        ph.result = PhaseResult(arm.name, phase)
        if phase == "assessment":
            sr.assessment = ph.result
        else:
            sr.selection = ph.result
        ph.keys = {f"{ph.sweep}/{sp.key}" for sp in specs}
        ph.ends = {f"{ph.sweep}/{sp.key}": _ends(sp, self.budget.epochs(arm.grid)) for sp in specs}
        ph.result.outcomes = [self.record.earlier[k] for k in sorted(ph.keys & set(self.record.earlier))]
        done = {sp.key for sp in specs if f"{ph.sweep}/{sp.key}" in self.record.earlier}
        fuse = self.fuse if phase == "selection" and REGISTRY[arm.family].fuses else 1
        ph.queue = [self._prepare(sp) for sp in fuse_specs(specs, fuse, done)]
        groups = [sp for sp in ph.queue if sp.members]
        self.__dict__.setdefault("_fused", set()).update(f"{ph.sweep}/{k}" for g in groups for k in member_keys(g))  # (a group's pace is not a config's)
        if groups:
            self.hooks.log(f"{arm.name} {phase}: {sum(len(g.members) - len(g.done) for g in groups)} configs fused in {len(groups)} "
                           f"Ray trials (--fuse {fuse}), {len(ph.queue) - len(groups)} trials of one config")
        ph.t0 = time.monotonic()
        self.started_at = ph.t0 if self.started_at is None else self.started_at
        ph.runs_here = bool(ph.queue)
        ph.state = "open"
        self.on_update("")
        if not ph.queue and ph.keys <= self.record.done():  # every trial finished by an earlier driver
            self._close(ph)

    def _phase_specs(self, arm: Arm, phase: str) -> list[TrialSpec] | None:
        """The phase's trials; None when the phase has nothing to run (no selection trial finished with a score)."""
        if phase == "selection":
            sr = self.by_arm[arm.name] = StrategyResult(arm.name, arm.grid, PhaseResult(arm.name, phase), family=arm.family)
            self.results.append(sr)
            if REGISTRY[arm.family].derived_from:  # no selection of its own (fixedplus)
                return None
            if arm.family == "tpe" and arm.name not in self.tpe:
                source = self.tpe[arm.name] = self.make_tpe(arm)
                prefix = f"{arm.name}/selection/"
                told = source.catch_up({k[len(prefix):]: o for k, o in self.record.earlier.items() if k.startswith(prefix)},
                                       {k[len(prefix):] for k in self.prior.reruns if k.startswith(prefix)})
                if told:
                    self.hooks.log(f"{arm.name}: told the Optuna study the ends of {told} trials its earlier driver could not")
            specs = arm.selection_specs(self.budget)
        else:
            sr = self.by_arm[arm.name]
            source = REGISTRY[arm.family].derived_from
            chosen = self._derived_choice(arm, source) if source else select_by_fold(sr.selection.outcomes)
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
            sr.selected = dict(best)
            sr.selected_by_fold = by_fold
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

    def _close(self, ph: Phase) -> None:
        """Every trial of `ph` has ended: its outcomes, wall time and (re-training) summary; its sweep ends."""
        r = ph.result
        ph.state = "closed"
        ph.queue.clear()
        r.outcomes += [self.record.here[k] for k in sorted(ph.keys & set(self.record.here))]
        r.wall_seconds = self.sweep_wall(ph)
        self.progress.close(
            f"{r.strategy} {r.phase}: {len(r.outcomes)}/{len(ph.keys)} trials in {fmt_seconds(r.wall_seconds)}  "
            f"({r.count('ok')} ok, " + (f"{r.count('stopped')} stopped, " if r.count("stopped") else "")
            + f"{r.count('diverged')} diverged, {r.count('failed')} failed)  "
            f"{r.total('device_hours'):.4f} device-h"
        )
        summary = None
        if r.phase == "assessment":
            summary = self.by_arm[ph.arm.name].summary = summarize_assessment(r.outcomes)
        source = self._tpe_of(ph)
        repeats = source.study_repeats() if source is not None else None
        if repeats is not None:  # (the sweep run's metric: TPE's asks of configs trained already, not trained)
            summary = {Metric.TPE_REPEATS: repeats}
        self.hooks.sweep_ended(r, summary)


def _final_of(result: dict | None) -> dict | None:
    """The trial's final summary from its last result (Tune may hand the
    searcher the flattened form, `final/<name>`)."""
    if not result:
        return None
    if isinstance(result.get("final"), dict):
        return result["final"]
    flat = {k.split("/", 1)[1]: v for k, v in result.items() if k.startswith("final/")}
    return flat or None


def _device_seconds(outcome: Mapping[str, Any]) -> float:
    """A finished trial's device-seconds (its device_hours x 3600), 0 where not finite."""
    d = outcome.get("device_hours")
    return 3600.0 * d if isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) and d > 0 else 0.0


def _ends(spec: TrialSpec, default: int) -> tuple[int, tuple[int, ...]]:
    """(the epochs `spec` trains at most, the epochs a scheduler may stop it at)
    for the etas; `default`, the budget's epochs for the grid, where the config
    is not known yet (a TPE trial's, chosen when Ray asks for it)."""
    epochs = spec.config.get("epochs")
    last = epochs if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 0 else default
    return last, tuple(sorted(r for r in spec.report_at if isinstance(r, int) and 0 < r < last))
