"""Running comparisons: strategies x (selection, assessment) on Ray Tune,
recorded in MLflow.

MLflow hierarchy (experiment `awnn-<task>`):

    comparison run   awnn.kind=comparison, awnn.comparison=<id>
      sweep run      awnn.kind=sweep, awnn.strategy, awnn.phase (selection | assessment)
        trial run    awnn.kind=trial (see tracking/callback.py for its contents)

`awnn sweep` is a comparison with one strategy.  Everything a sweep needs
is validated before Ray starts or MLflow is written: grid files, the budget,
the tracking store, the Ray address.

Resuming (`--resume`, same arguments): the newest unfinished comparison
with the same task, strategies, budget and grid contents is continued
(search/resume.py reads what the earlier drivers did).  Trials that finished
(any terminal status) are not run again; trials an earlier driver left open
are closed with awnn.status=interrupted (their compute still counts) and run
again from their last checkpoint.  When the newest such comparison finished
already, nothing runs (`awnn compare` rebuilds its report).

Every way a driver ends leaves MLflow in a state `--resume` continues:
finished (FINISHED, awnn.state=finished); interrupted by Ctrl-C or SIGTERM
(the open trial runs, sweeps and the comparison KILLED, awnn.state=
interrupted); failed (FAILED, awnn.state=failed); killed (runs left RUNNING,
closed by the next --resume).  Wall time (`wall_seconds` of sweeps and of
the comparison) is the time the drivers spent, summed over their attempts:
each driver logs its running total as it goes, so a killed one loses at most
the seconds since its last record (WALL_RECORD_SECONDS).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tracking.contract import Tag, default_tracking_uri, experiment_name, redact_uri, tag_equals
from tracking.store import (TrackingUnavailable, TrackingWriter, check_sqlite_store, check_tracking, check_writable, folder_lock,
                            init_tracking, replay_spool)

from .budget import Budget, resolve_budget
from .grid import Grid, GridError
from .progress import ProgressLine, fmt_seconds
from .protocol import TrialSpec, assessment_specs, select_best, summarize_assessment
from .resume import PriorAttempts, find_checkpoint, read_prior_attempts
from .strategies import REGISTRY, Arm, StrategyOptions, TpeSource, default_optuna_storage, make_arms, make_scheduler
from .tune import RunSettings, init_ray, run_plan, trial_settings, wait_for_warm_workers

try:  # Ray is a hard dependency; the alias keeps the class definition readable
    from ray.tune.search import Searcher as _SearcherBase
except ImportError:  # pragma: no cover
    _SearcherBase = object

__all__ = ["Comparison", "PhaseResult", "StrategyResult"]

WALL_RECORD_SECONDS = 5.0  # how often a driver records its running wall time


@dataclass
class PhaseResult:
    strategy: str
    phase: str
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0

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
    selected: dict[str, Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    family: str = ""

    def widths(self) -> str:
        if not self.selected:
            return "-"
        cfg = self.selected["config"]
        if cfg.get("model") == "awnn":
            runs = [o for o in (self.assessment.outcomes if self.assessment else []) if o.get("widths_at_best")]
            if runs:
                totals = [sum(o["widths_at_best"]) for o in runs]
                return f"{sum(totals) / len(totals):.0f} learned"
            return f"{sum(self.selected.get('widths_at_best') or []):.0f} learned"
        if cfg.get("width") == 0 or cfg.get("hidden_layers") == 0:
            return "linear"
        return f"{cfg.get('width')} x {cfg.get('hidden_layers')}"


def comparison_key(task: str, strategies: list[str], budget: Budget, grids: list[Grid], options: dict[str, Any] | None = None) -> str:
    body: dict[str, Any] = {"task": task, "strategies": strategies, "budget": budget.to_dict(), "grids": [g.digest() for g in grids]}
    if options:  # the search options of tpe/asha/random; absent for grid-only comparisons (keys stay as before)
        body["options"] = options
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


class Comparison:
    """Validate, then run each strategy's selection and assessment phases."""

    def __init__(
        self,
        task: str,
        strategies: list[str],
        budget: str,
        settings: RunSettings,
        tracking_uri: str | None = None,
        resume: bool = False,
        grid_dir: str | None = None,
        stream: TextIO | None = None,
        kind: str = "compare",
        options: StrategyOptions | None = None,
    ):
        self.task = task
        self.strategies = list(strategies)
        self.settings = settings
        self.resume = resume
        self.kind = kind
        self.stream = stream or sys.stderr
        self.options = options or StrategyOptions()
        self.budget = resolve_budget(budget)
        self.arms: list[Arm] = make_arms(task, self.strategies, self.options, self.budget, grid_dir)
        self.arm = {a.name: a for a in self.arms}
        self.grids = {a.name: a.grid for a in self.arms}
        self._check_data()
        self.tracking_uri = tracking_uri or default_tracking_uri()
        check_tracking(self.tracking_uri)
        if settings.cpus_per_trial <= 0 or settings.gpus_per_trial < 0:
            raise GridError(f"--cpus-per-trial must be > 0 and --gpus-per-trial >= 0, found {settings.cpus_per_trial} and {settings.gpus_per_trial}")
        storage = settings.storage_path()
        if "://" not in storage:  # a local or mounted folder: it must be (or become) a writable folder
            check_writable(Path(storage), f"--storage {storage}")
        self.optuna_storage = None
        if "tpe" in self.strategies:
            self.optuna_storage = self.options.optuna_storage or default_optuna_storage(self.tracking_uri)
            _check_optuna_storage(self.optuna_storage)
        grids = list({g.path: g for g in self.grids.values()}.values())
        self.key = comparison_key(task, self.strategies, self.budget, grids, self._search_options())
        self.id = None
        self.results: list[StrategyResult] = []
        self.already_finished = False  # --resume found the comparison finished once its saved writes were applied

    def _search_options(self) -> dict[str, Any]:
        """The options that change what runs (part of the --resume key)."""
        o = self.options
        out: dict[str, Any] = {}
        if any(f in self.strategies for f in ("tpe", "asha", "random")):
            out.update(seed=o.seed, repeats=o.repeats)
        if "tpe" in self.strategies:
            out["tpe_trials"] = next(a.trials for a in self.arms if a.family == "tpe")
        if "random" in self.strategies:
            out["random_trials"] = next(a.trials for a in self.arms if a.family == "random")
        if "asha" in self.strategies:
            a = next(a for a in self.arms if a.family == "asha")
            out.update(asha_grace_period=a.grace_period(self.budget), asha_reduction_factor=o.asha_reduction_factor)
        return out

    def _check_data(self) -> None:
        """Load the task once on the driver: missing data fails here, in seconds."""
        from awnn.data import DataError, load_task

        data_root = next(iter(self.grids.values())).fixed.get("data_root", "data")
        try:
            load_task(self.task, data_root)
        except DataError as e:
            raise GridError(str(e)) from None

    def log(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    # ---------------------------------------------------------------- run
    def run(self) -> list[StrategyResult]:
        from tracking.callback import TrialTracker

        init_ray(self.settings, log=self.log)
        init_tracking(self.tracking_uri)  # a new SQLite store's schema, created by one driver at a time
        self.writer = TrackingWriter(self.tracking_uri, experiment_name(self.task), spool_path=self._spool_path())
        self.open_sweeps: set[str] = set()
        self.tracker = None
        self.searcher = None
        prior = PriorAttempts()
        self.wall_before = 0.0
        try:
            self.t_attempt = time.monotonic()  # this driver's share of the wall time starts here
            if self.resume:
                prior = self._resume_state()
            if self.already_finished:
                return self.results
            self.wall_before = prior.wall("cmp")
            if self.id is None:
                self._start_comparison()
            searcher = self.searcher = PhasedSearcher(self, prior)
            self.tracker = TrialTracker(
                self.writer, tags={Tag.COMPARISON: self.id, Tag.TASK: self.task},
                cpus_per_trial=self.settings.cpus_per_trial, gpus_per_trial=self.settings.gpus_per_trial,
                on_update=searcher.on_update,
            )
            searcher.tracker = self.tracker
            if searcher.pending_trials():
                attempt = self._attempt_number()
                name = f"{self.id}" + (f"-r{attempt}" if attempt else "")
                warm = wait_for_warm_workers()  # the local Ray's workers importing torch & co. since init_ray
                if warm:
                    self.writer.set_tags("cmp", {Tag.WARM_PIDS: ",".join(map(str, warm))})
                run_plan(searcher, searcher.max_trials(), self.settings, name, [self.tracker],
                         scheduler=make_scheduler(self.arms, self.budget))
            searcher.finish_all()
            self.writer.log_metrics("cmp", [("wall_seconds", self.wall_seconds(), 0)])
            self.writer.set_tags("cmp", {Tag.STATE: "finished"})
            self.writer.end_run("cmp")
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (search/cli.py): resumable, and visibly not running
            self._close_open("interrupted", "KILLED")
            raise
        except BaseException:
            self._close_open("failed", "FAILED")
            raise
        finally:
            leftover = self.writer.close(timeout=float(os.environ.get("AWNN_TRACKING_FLUSH_TIMEOUT", "120")))
            if leftover:
                self.log(f"warning: MLflow was unreachable; {len(leftover)} runs have writes saved to {self._spool_path()}; rerun with --resume to apply them")
        return self.results

    def wall_seconds(self) -> float:
        """The comparison's wall time: every driver's time on it, this one's included."""
        return self.wall_before + time.monotonic() - self.t_attempt

    def record_wall(self, sweep: str | None, sweep_seconds: float) -> None:
        """Log the running wall time of the comparison and of the sweep in progress."""
        if sweep is not None and sweep in self.open_sweeps:
            self.writer.log_metrics(sweep, [("wall_seconds", sweep_seconds, 0)])
        self.writer.log_metrics("cmp", [("wall_seconds", self.wall_seconds(), 0)])

    def _close_open(self, state: str, status: str) -> None:
        """Close what this driver has open after an interrupt (`interrupted`,
        KILLED) or an error (`failed`, FAILED): its trial runs as
        interrupted, its sweeps and the comparison with their wall time so
        far.  `--resume` reopens them."""
        if self.id is None:
            return  # nothing was started
        try:
            if self.tracker is not None:
                self.tracker.interrupt_open()
            current = self.searcher.current_sweep() if self.searcher is not None else (None, 0.0)
            for sweep in sorted(self.open_sweeps):
                if sweep == current[0]:
                    self.writer.log_metrics(sweep, [("wall_seconds", current[1], 0)])
                self.writer.set_tags(sweep, {Tag.STATE: state})
                self.writer.end_run(sweep, status)
            self.open_sweeps.clear()
            self.writer.log_metrics("cmp", [("wall_seconds", self.wall_seconds(), 0)])
            self.writer.set_tags("cmp", {Tag.STATE: state})
            self.writer.end_run("cmp", status)
        except Exception as e:  # noqa: BLE001 - closing must not hide why the driver stopped
            self.log(f"warning: could not mark the open runs as {state}: {type(e).__name__}: {e}")

    def _attempt_number(self) -> int:
        storage = self.settings.storage_path()
        if "://" in storage:
            return int(time.time())
        return sum(1 for _ in Path(storage).glob(f"{self.id}*") if _.is_dir())

    def _spool_path(self) -> Path:
        base = Path(self.settings.storage_path()) if "://" not in self.settings.storage_path() else Path.cwd() / "awnn-results"
        return base / f"pending-mlflow-{self.key}.jsonl"

    def _start_comparison(self) -> None:
        self.id = f"{self.task}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        tags = {
            Tag.KIND: "comparison",
            Tag.COMPARISON: self.id,
            Tag.COMPARISON_KEY: self.key,
            Tag.TASK: self.task,
            Tag.STRATEGIES: ",".join(self.strategies),
            Tag.ARMS: ",".join(a.name for a in self.arms),
            Tag.REPEATS: str(self.options.repeats),
            Tag.BUDGET: self.budget.name,
            Tag.COMMAND: self.kind,
            Tag.STATE: "running",
        }
        params = {"task": self.task, "strategies": ",".join(self.strategies), "budget": json.dumps(self.budget.to_dict()),
                  "cpus_per_trial": self.settings.cpus_per_trial, "gpus_per_trial": self.settings.gpus_per_trial,
                  "storage": self.settings.storage_path(), "ray_address": self.settings.address or os.environ.get("RAY_ADDRESS", "local"),
                  **self._search_options()}
        if self.optuna_storage:
            params["optuna_storage"] = redact_uri(self.optuna_storage)
        self.writer.start_run("cmp", name=f"{self.kind}-{self.id}", tags=tags, params=params)
        self.log(f"comparison {self.id}: task {self.task}, strategies {', '.join(self.strategies)}, budget {self.budget.name}; MLflow {self.tracking_uri}")

    def start_sweep_run(self, strategy: str, phase: str, grid: Grid, specs: list[TrialSpec], selected: dict | None) -> None:
        sweep_key = f"{strategy}/{phase}"
        if sweep_key in self.writer.run_ids:
            return
        self.open_sweeps.add(sweep_key)
        arm = self.arm[strategy]
        tags = {Tag.KIND: "sweep", Tag.STRATEGY: arm.family, Tag.ARM: arm.name, Tag.REPEAT: str(arm.repeat),
                Tag.PHASE: phase, Tag.COMPARISON: self.id, Tag.TASK: self.task, Tag.STATE: "running",
                **REGISTRY[arm.family].tags()}
        params = {"grid_file": str(grid.path), "grid_digest": grid.digest(), "budget": self.budget.name, "epochs": self.budget.epochs(grid),
                  "retrain_runs": self.budget.runs(grid), "configs": grid.size, "trials": len(specs)}
        if phase == "selection":
            params.update(arm.describe(self.budget))
            if arm.family == "tpe":
                params.update(optuna_storage=redact_uri(self.optuna_storage), optuna_study=self.study_name(arm))
        if selected is not None:
            params["selected_key"] = selected["key"]
        self.writer.start_run(sweep_key, name=f"{strategy}-{phase}", parent="cmp", tags=tags, params=params)

    def end_sweep_run(self, result: PhaseResult) -> None:
        sweep_key = f"{result.strategy}/{result.phase}"
        self.writer.log_metrics(sweep_key, [
            ("n_trials", len(result.outcomes), 0), ("n_ok", result.count("ok"), 0), ("n_diverged", result.count("diverged"), 0),
            ("n_failed", result.count("failed"), 0), ("n_width_capped", result.count("width_capped"), 0), ("n_stopped", result.count("stopped"), 0),
            ("wall_seconds", result.wall_seconds, 0), ("device_hours", result.total("device_hours"), 0),
            ("gpu_hours", result.total("gpu_hours"), 0), ("compute_seconds", result.total("compute_seconds"), 0),
        ])
        self.writer.set_tags(sweep_key, {Tag.STATE: "finished"})
        self.writer.end_run(sweep_key)
        self.open_sweeps.discard(sweep_key)

    def study_name(self, arm: Arm) -> str:
        return f"{self.id}-{arm.name}"

    # ------------------------------------------------------------- resume
    def _resume_state(self) -> PriorAttempts:
        """Adopt the newest unfinished comparison with the same key and read
        back what its earlier drivers did (search/resume.py)."""
        from mlflow.tracking import MlflowClient

        spool = self._spool_path()
        if spool.exists():
            replayed = replay_spool(spool, self.tracking_uri, experiment_name(self.task))
            self.log(f"resume: applied {replayed} tracking writes saved by the previous driver")
        client = MlflowClient(self.tracking_uri)
        exp = self.writer.experiment_id
        roots = client.search_runs([exp], filter_string=tag_equals((Tag.COMPARISON_KEY, self.key), (Tag.KIND, "comparison")), order_by=["attributes.start_time DESC"], max_results=20)
        root = next((r for r in roots if r.data.tags.get(Tag.STATE) != "finished"), None)
        if root is None and roots:
            # the newest comparison with these arguments is complete (its driver may have died while writing the report)
            self.id = roots[0].data.tags[Tag.COMPARISON]
            self.already_finished = True
            self.log(f"resume: comparison {self.id} is complete in MLflow; nothing to run (run without --resume to repeat it)")
            return PriorAttempts()
        if root is None:
            self.log("resume: no unfinished comparison with these arguments; starting a new one")
            return PriorAttempts()
        self.id = root.data.tags[Tag.COMPARISON]
        self.writer.adopt("cmp", root.info.run_id)
        self.writer.reopen_run("cmp")
        self.writer.set_tags("cmp", {Tag.STATE: "running"})
        storage = self.settings.storage_path()
        prior = read_prior_attempts(client, exp, self.id, self.writer, lambda key: find_checkpoint(storage, self.id, key), self.log)
        self.open_sweeps |= prior.reopened_sweeps
        return prior

class PhasedSearcher(_SearcherBase):
    """Feeds Ray Tune the comparison's trials phase by phase.

    For each strategy in order: its selection trials; when all have ended,
    the selected config's re-training trials; then the next strategy.  The
    next phase starts only when every trial of the current one has an
    outcome in the tracker (Ray calls `suggest` again after its callbacks
    ran), so one Tuner, with its warm actors, serves the whole comparison."""

    def __init__(self, comparison: "Comparison", prior: PriorAttempts):
        super().__init__(metric="best_val_acc", mode="max")
        self.c = comparison
        self.prior = prior
        self.last_wall_record = 0.0
        self.tracker = None
        self.phases = [(a.name, ph) for a in comparison.arms for ph in ("selection", "assessment")]
        self.tpe: dict[str, TpeSource] = {}  # arm -> its Optuna study
        self.tpe_trials: dict[str, TpeSource] = {}  # Ray trial id -> the study that suggested it
        self.current = -1
        self.queue: list[TrialSpec] = []
        self.keys: set[str] = set()
        self.result: PhaseResult | None = None
        self.strategy_result: StrategyResult | None = None
        self.progress: ProgressLine | None = None
        self.t0 = 0.0
        self.runs_here = False
        self.finished = False

    def __getstate__(self):
        # Ray pickles the Tuner (search algorithm included) for Tuner.restore;
        # we resume from MLflow instead, so the live objects stay behind.
        return {"metric": "best_val_acc", "mode": "max"}

    # --- sizes, for num_samples and the progress line
    def max_trials(self) -> int:
        return sum(a.trials + self.c.budget.runs(a.grid) for a in self.c.arms)

    def pending_trials(self) -> bool:
        return len(self.prior.finished) < self.max_trials()

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
                return {"spec": spec.to_dict(), "settings": trial_settings(self.c.settings)}
            if self.keys <= set(self.tracker.outcomes) | self._done_keys():
                self._end_phase()
                self._start_next()
                continue
            return None

    def finish_all(self) -> None:
        """After Ray returns: close the phases it never got to (nothing left to
        run in them when resuming a finished sweep, or a phase Ray ended early)."""
        guard = 0
        while not self.finished and guard < 4 * len(self.phases) + 4:
            guard += 1
            if self.current < 0:
                self._start_next()
                continue
            missing = self.keys - set(self.tracker.outcomes) - self._done_keys()
            for key in sorted(missing):
                strategy, phase, trial = key.split("/", 2)
                self.result.outcomes.append({"key": trial, "status": "failed", "error": "no result from Ray", "index": -1, "config": {}})
            self.keys -= missing
            self.queue.clear()
            self._end_phase()
            self._start_next()

    def on_update(self, tracker, key: str) -> None:
        if self.progress is None or self.result is None:
            return
        label = f"{self.result.strategy} {self.result.phase}"
        n = len(self.keys & (set(tracker.outcomes) | self._done_keys()))
        new = len(self.keys & set(tracker.outcomes))
        todo = len(self.keys - self._done_keys())
        elapsed = time.monotonic() - self.t0
        eta = elapsed / new * (todo - new) if new else math.nan
        best = tracker.best_val_acc.get(f"{self.result.strategy}/{self.result.phase}", math.nan)
        text = f"{label}: {n}/{len(self.keys)} trials  elapsed {fmt_seconds(elapsed)}  eta {fmt_seconds(eta)}"
        if best == best:
            text += f"  best val_acc {best:.4f}"
        self.progress.update(text)
        now = time.monotonic()
        if key in tracker.outcomes or now - self.last_wall_record >= WALL_RECORD_SECONDS:
            self.last_wall_record = now
            self.c.record_wall(f"{self.result.strategy}/{self.result.phase}", self.sweep_wall())

    def sweep_wall(self) -> float:
        """Wall time of the phase in progress: earlier drivers' and this one's."""
        r = self.result
        before = self.prior.wall(f"{r.strategy}/{r.phase}")
        return before + (time.monotonic() - self.t0 if self.runs_here else 0.0)

    def current_sweep(self) -> tuple[str | None, float]:
        if self.result is None:
            return None, 0.0
        return f"{self.result.strategy}/{self.result.phase}", self.sweep_wall()

    # --- phases
    def _done_keys(self) -> set[str]:
        return set(self.prior.finished)

    def _start_next(self) -> None:
        while True:
            self.current += 1
            if self.current >= len(self.phases):
                self.finished = True
                return
            strategy, phase = self.phases[self.current]
            arm = self.c.arm[strategy]
            grid = arm.grid
            if phase == "selection":
                self.strategy_result = StrategyResult(strategy, grid, PhaseResult(strategy, phase), family=arm.family)
                self.c.results.append(self.strategy_result)
                specs = arm.selection_specs(self.c.budget)
                selected = None
                if arm.family == "tpe" and strategy not in self.tpe:
                    self.tpe[strategy] = TpeSource(arm, self.c.budget, self.c.optuna_storage, self.c.study_name(arm))
            else:
                best = select_best(self.strategy_result.selection.outcomes)
                if best is None:
                    self.c.log(f"{strategy}: no selection trial finished with a validation score; no re-training")
                    continue
                selected = dict(best)
                self.strategy_result.selected = selected
                self.c.writer.set_tags(f"{strategy}/selection", {Tag.SELECTED_KEY: best["key"], Tag.SELECTED_CONFIG: json.dumps(best["config"], sort_keys=True)})
                specs = assessment_specs(best["config"], grid, self.c.budget)
            for sp in specs:
                sp.strategy, sp.family, sp.repeat = strategy, arm.family, arm.repeat
            self.c.start_sweep_run(strategy, phase, grid, specs, selected)
            self.result = PhaseResult(strategy, phase)
            if phase == "assessment":
                self.strategy_result.assessment = self.result
            else:
                self.strategy_result.selection = self.result
            sweep = f"{strategy}/{phase}"
            self.keys = {f"{sweep}/{sp.key}" for sp in specs}
            done_here = self._done_keys() & self.keys
            self.result.outcomes = [self.prior.finished[k] for k in sorted(done_here)]
            self.queue = []
            for sp in specs:
                k = f"{sweep}/{sp.key}"
                if k in done_here:
                    continue
                rerun = self.prior.reruns.get(k)
                if rerun is not None and rerun.checkpoint:
                    sp.resume_from = rerun.checkpoint
                if rerun is not None and rerun.config and not sp.config:  # an interrupted TPE trial
                    sp.config, sp.index = rerun.config, rerun.index
                self.queue.append(sp)
            self.t0 = time.monotonic()
            self.runs_here = bool(self.queue)  # has this driver anything to run in this phase?
            self.progress = ProgressLine(self.c.stream)
            if self.tracker is not None:
                self.on_update(self.tracker, "")
            return

    def _end_phase(self) -> None:
        r = self.result
        if r is None:
            return
        sweep = f"{r.strategy}/{r.phase}"
        for k in sorted(self.keys & set(self.tracker.outcomes)):
            r.outcomes.append(self.tracker.outcomes[k])
        r.wall_seconds = self.sweep_wall()
        self.progress.close(
            f"{r.strategy} {r.phase}: {len(r.outcomes)}/{len(self.keys)} trials in {fmt_seconds(r.wall_seconds)}  "
            f"({r.count('ok')} ok, {r.count('diverged')} diverged, {r.count('failed')} failed)  "
            f"{r.total('device_hours'):.4f} device-h"
        )
        self.c.end_sweep_run(r)
        if r.phase == "assessment":
            self.strategy_result.summary = summarize_assessment(r.outcomes)
            self.c.writer.log_metrics(sweep, [(k, v, 0) for k, v in self.strategy_result.summary.items()])
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


def _check_optuna_storage(url: str) -> None:
    """Open (create) the Optuna RDB storage now: a bad URL fails before Ray
    starts.  A SQLite file is checked like the MLflow store (an unwritable
    folder, a file that is not an Optuna database) and created under a lock
    on its folder (drivers started together on a new file)."""
    import contextlib

    import optuna

    lock = contextlib.nullcontext()
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        what = f"--optuna-storage {url}"
        if not path.parent.is_dir():
            raise TrackingUnavailable(f"{what}: folder {path.parent} does not exist")
        check_writable(path.parent, what)
        if path.is_file() and path.stat().st_size > 0:
            check_sqlite_store(path, what, tables={"studies", "trials"}, kind="an Optuna SQLite storage")
        lock = folder_lock(path.parent)
    try:
        with lock:
            optuna.storages.RDBStorage(url)
    except Exception as e:  # noqa: BLE001 - one readable line whatever the driver raises
        raise GridError(f"--optuna-storage: cannot open {url!r} as an Optuna RDB storage: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
