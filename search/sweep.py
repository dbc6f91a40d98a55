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
the seconds since its last record (search/sweep_runs.py).

Who does what: `Comparison` (here) validates the input, starts Ray and the
comparison run, and reads back a resumed comparison; `PhasedSearcher`
(search/phases.py) feeds Tune the trials phase by phase (the arms' phases
overlapping where nothing depends on them, search/phase_plan.py), reading the
`OutcomeRecord` (search/record.py) that the tracking callback
(tracking/callback.py) fills; `SweepRuns` (search/sweep_runs.py) writes the
sweep runs and wall time the searcher announces through its hooks.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from tracking.contract import Param, Tag, default_tracking_uri, experiment_name, redact_uri, tag_equals, tracking_uri_source
from tracking.store import (TrackingUnavailable, TrackingWriter, check_sqlite_store, check_tracking, check_writable, folder_lock,
                            init_tracking, init_tracking_in_background, replay_spool)
from tracking.checks import DATABASE_SCHEMES, check_database, check_remote_storage

from .budget import BUDGETS, Budget, resolve_budget
from .lease import start_heartbeat
from . import _ray_speedups, signals
from .errors import OptionError
from .grid import Grid
from .phase_plan import most_at_once
from .record import OutcomeRecord, PhaseResult, StrategyResult
from .resume import PriorAttempts, find_checkpoint, read_prior_attempts
from .protocol import protocol_name
from .strategies import REGISTRY, Arm, StrategyOptions, make_arms, make_scheduler, with_protocol
from .tpe import TpeSource, default_optuna_storage
from .sweep_runs import SweepRuns
from .tune import RunSettings, check_trial_fits, concurrent_slots, exit_now, init_ray, load_ray_tune, run_plan, stop_on_fault, trial_settings, wait_for_warm_workers, watch_cluster

__all__ = ["Comparison", "PhaseResult", "StrategyResult"]

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
        data_root: str | None = None,
        protocol: str | None = None,
        train_seed: int | None = None,
        table_options: dict[str, str | None] | None = None,
    ):
        self.task = task
        # task table: how its file is read (awnn/config.py TABLE_KEYS: --label, --drop-columns), for every trial too
        self.table_options = {k: str(v).strip() for k, v in (table_options or {}).items() if v is not None and str(v).strip()}
        # where the trials read their data: an absolute path, resolved here on the driver (never against a trial's folder)
        self.data_root = str(Path(data_root or "data").expanduser().resolve())
        self.strategies = list(strategies)
        self.settings = settings
        self.resume = resume
        self.kind = kind
        self.stream = stream or sys.stderr
        self.options = options or StrategyOptions()
        read = resolve_budget(budget)
        if protocol is None:  # (a file's folds; --protocol, which replaces them, is checked by with_protocol, a grid's as it loads)
            read.check_folds(task, budget)
        self.budget = with_protocol(read, protocol, task).with_train_seed(train_seed)
        self.arms: list[Arm] = make_arms(task, self.strategies, self.options, self.budget, grid_dir)
        self.arm = {a.name: a for a in self.arms}
        self.grids = {a.name: a.grid for a in self.arms}
        for g in self.grids.values():  # a --train-seed draw's seeds fit R re-training runs (search/budget.py SEED_STRIDE)
            self.budget.check_seeds(g)
        self.folds = max(self.budget.folds_for(g) for g in self.grids.values())  # outer folds (1: hold-out)
        self.protocol = protocol_name(self.folds)
        self.folds_digest: str | None = None  # cross-validated: which graph falls in which fold (set by _check_data)
        self.data_digest: str | None = None  # the data's files on the driver (awnn/data/digest.py; set by _check_data)
        self.data_summary: str | None = None  # a user's file: what was read (rows, features, classes; set by _check_data)
        self.data_name = ""  # a user's file: its name in the comparison's id (set by _check_data)
        self._check_data()
        self.tracking_uri = tracking_uri or default_tracking_uri()
        check_tracking(self.tracking_uri, source=tracking_uri_source(tracking_uri))
        if settings.cpus_per_trial <= 0 or settings.gpus_per_trial < 0:
            raise OptionError(f"--cpus-per-trial must be > 0 and --gpus-per-trial >= 0, found {settings.cpus_per_trial} and {settings.gpus_per_trial}")
        storage = settings.storage_path()
        if "://" not in storage:  # a local or mounted folder: it must be (or become) a writable folder
            check_writable(Path(storage), f"--storage {storage}")
        else:  # s3://, gs://, file://: written through pyarrow, as Ray Tune will
            check_remote_storage(storage, f"--storage {redact_uri(storage)}")
        self.optuna_storage = None
        if "tpe" in self.strategies:
            self.optuna_storage = self.options.optuna_storage or default_optuna_storage(self.tracking_uri)
            _check_optuna_storage(self.optuna_storage)
        grids = list({g.path: g for g in self.grids.values()}.values())
        self.key = comparison_key(task, self.strategies, self.budget, grids, self._search_options())
        self._grid_list = grids
        self.id = None
        self.results: list[StrategyResult] = []
        self.already_finished = False  # --resume found the comparison finished once its saved writes were applied
        self.finished_in_mlflow = False  # run() ended it and MLflow took every write (what a later interrupt leaves complete)
        self._finishing = False
        if resume:
            self._check_resumable()
        for g in grids:  # (keys that change no config: harmless, so a note, once every check has passed)
            for key, why in g.idle.items():
                self.log(f"note: {g.path}: {key} has no effect: {why}")

    def _check_resumable(self) -> None:
        """`--resume` of a comparison another driver still works on fails here,
        in one line, before Ray starts: two drivers would each run its
        unfinished trials (search/lease.py); so does one on other data than the
        comparison started on (`_check_saved_data`)."""
        from mlflow.tracking import MlflowClient

        from .errors import SearchError
        from .lease import hold_comparison, live_driver

        init_tracking(self.tracking_uri)  # (a new SQLite store's schema, under its lock, as run() does)
        client = MlflowClient(self.tracking_uri)
        exp = client.get_experiment_by_name(experiment_name(self.task))
        if exp is None:
            return
        roots = client.search_runs([exp.experiment_id], filter_string=tag_equals((Tag.COMPARISON_KEY, self.key), (Tag.KIND, "comparison")),
                                   order_by=["attributes.start_time DESC"], max_results=20)
        root = next((r for r in roots if r.data.tags.get(Tag.STATE) != "finished"), None)  # the one --resume adopts
        if root is None:
            return
        self._check_saved_data(root)
        cid = root.data.tags.get(Tag.COMPARISON, "")
        alive = live_driver(root.data.tags) if root.data.tags.get(Tag.STATE, "running") == "running" else None
        if alive:
            raise SearchError(f"--resume: comparison {cid} is running: {alive}; a second driver "
                              "would run its trials again; let it finish, or stop it (Ctrl-C) and then resume")
        held = hold_comparison(self.tracking_uri, cid)  # a driver that is starting has written nothing yet (search/lease.py)
        if held:
            raise SearchError(f"--resume: comparison {cid}: {held}; a second driver would run its trials "
                              "again; let it finish, or stop it (Ctrl-C) and then resume")

    def _check_saved_data(self, root) -> None:
        """The data a --resume would train on is the data the comparison `root` started on: its outer folds
        (cross-validated) and its files' digest (awnn/data/digest.py).  A comparison from before either was saved
        has none to check."""
        from awnn.data import DataError

        cid = root.data.tags.get(Tag.COMPARISON)
        saved = root.data.params.get(Param.FOLDS_DIGEST)
        if self.folds_digest and saved and saved != self.folds_digest:
            raise DataError(f"{self.data_root}: the {self.task} data draws other outer folds than comparison {cid} saved "
                            f"(folds digest {self.folds_digest}, saved {saved}): the data changed since it started; restore it, "
                            "or run without --resume to start anew")
        saved = root.data.params.get(Param.DATA_DIGEST)
        if self.data_digest and saved and saved != self.data_digest:
            raise DataError(f"{self.data_root}: the {self.task} data is not what comparison {cid} started on (SHA-256 "
                            f"{self.data_digest}, saved {saved}): it changed since; restore it, or run without --resume to start "
                            "anew on this data")

    def _search_options(self) -> dict[str, Any]:
        """The options that change what runs (part of the --resume key)."""
        o = self.options
        out: dict[str, Any] = {}
        if any(REGISTRY[f].stochastic for f in self.strategies):
            out.update({Param.SEED: o.seed, Param.REPEATS: o.repeats})
        if "tpe" in self.strategies:
            out[Param.TPE_TRIALS] = next(a.trials for a in self.arms if a.family == "tpe")
        if "random" in self.strategies:
            out[Param.RANDOM_TRIALS] = next(a.trials for a in self.arms if a.family == "random")
        if "asha" in self.strategies:
            a = next(a for a in self.arms if a.family == "asha")
            out.update({Param.ASHA_GRACE_PERIOD: a.grace_period(self.budget), Param.ASHA_REDUCTION_FACTOR: o.asha_reduction_factor})
        if "awnn-asha" in self.strategies:  # its grace period follows the AWNN grid's epochs
            a = next(a for a in self.arms if a.family == "awnn-asha")
            out.update({Param.AWNN_ASHA_GRACE_PERIOD: a.grace_period(self.budget), Param.ASHA_REDUCTION_FACTOR: o.asha_reduction_factor})
        if "fixedplus" in self.strategies:
            out[Param.FIXEDPLUS_WIDTHS] = o.fixedplus_widths
        if self.folds > 1:  # (hold-out comparisons: keys as before the protocol option existed)
            out[Param.FOLDS] = self.folds
        if self.data_digest and self._data_is_a_file():  # another file, or the same one edited, is another comparison
            out[Param.DATA_DIGEST] = self.data_digest
        cpu = {a.grid.path.name: self.budget.cpu_values(a.grid) for a in self.arms if self.budget.cpu_values(a.grid)}
        if cpu:  # a CPU budget changes these grids' configs (grids without `cpu` values: keys as before)
            out[Param.CPU] = json.dumps(cpu, sort_keys=True)
        return out

    def _check_data(self) -> None:
        """Load the task once on the driver: missing data fails here, in seconds.
        Not a generated tabular task: its data comes from the seed, nothing can be
        missing (and the driver of a tabular comparison never imports torch).  A
        user's CSV file (task `table`) is read and checked with numpy alone.  The
        digest of data on disk is kept (awnn/data/digest.py): each trial checks its
        node's copy against it and a --resume the data against the one saved."""
        from awnn.data import TASKS, load_task, task_kind

        from .progress import said_if_slow

        check = getattr(TASKS.get(self.task), "check", None)
        if check is not None:  # a user's file (task `table`): checked without torch, its digest keys the comparison
            with said_if_slow(self.log, f"reading the {self.task} data at {self.data_root}"):
                table = check(self.data_root, **self.table_options)
            self.data_digest, self.data_summary, self.data_name = table.digest, table.summary, table.name
            self.log(f"data: {table.path}: {table.summary}")
            return
        for key, value in self.table_options.items():  # (a file's task only)
            raise OptionError(f"--{key.replace('_', '-')} {value}: task {self.task} has no CSV file; a CSV file's columns are named only "
                              "for --task table")
        if task_kind(self.task) == "tabular" and self.folds <= 1:
            return

        with said_if_slow(self.log, f"reading the {self.task} data under {self.data_root}"):  # (a hung mount blocks here)
            task = load_task(self.task, self.data_root)  # raises DataError naming the file
        self.data_digest = task.data_digest
        if self.data_digest:  # what every trial's node must hold too
            self.log(f"data: the {self.task} files under {self.data_root} (SHA-256 {self.data_digest})")
        if self.folds > 1:
            self.folds_digest = task.folds_digest

    def _data_is_a_file(self) -> bool:
        """The task is defined by a user's file (task `table`): its digest is part of what the comparison is (the --resume
        key), not only a check of a node's copy of a named dataset (a comparison from before the digest keeps its key)."""
        from awnn.data import TASKS

        return getattr(TASKS.get(self.task), "check", None) is not None

    def log(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    # ---------------------------------------------------------------- run
    def run(self) -> list[StrategyResult]:
        """Run every arm's phases on one Tuner; returns the arms' results in run order."""
        load_ray_tune()  # (first: an interrupt cannot cut Ray's import short)
        from tracking.callback import TrialTracker

        from .phases import PhasedSearcher  # (Ray Tune's Searcher: imported here, so that bad input fails before it loads)
        from .stall import StallWatch
        from .start_watch import StartWatch

        # a new SQLite store's schema made while Ray starts; put in place once it has (an error starting Ray
        # leaves no store behind)
        tracking_ready = init_tracking_in_background(self.tracking_uri)
        try:
            init_ray(self.settings, log=self.log, trials_at_once=most_at_once(self.arms, self.budget))
            check_trial_fits(self.settings, log=self.log)  # a trial no node can hold would wait for ever
        except BaseException:
            signals.release_leaked_logging_lock()  # (an interrupt raised inside logging's release: the thread below would wait on it)
            tracking_ready(place=False)
            raise
        tracking_ready()
        self.writer = TrackingWriter(self.tracking_uri, experiment_name(self.task), spool_path=self._spool_path())
        # this driver's share of the wall time starts here
        self.runs = SweepRuns(self.writer, self.task, self.budget, self.log, optuna_storage=self.optuna_storage)
        self.tracker = None
        self.searcher = None
        self._starts = StartWatch()  # (a Tune callback: is any trial starting at all; _stop_reason)
        self._import_failure_seen: float | None = None  # when _stop_reason first saw a node's import failure
        self._fault: tuple[str, str] | None = None  # the reason the comparison stops, once _stop_reason has found one
        self.unwritten: str | None = None  # what MLflow did not take by the end (_close_writer): the comparison is incomplete there
        import threading

        self._closing, self._closed = threading.Lock(), threading.Event()
        stop_watch = watch_cluster(self._cluster_lost)
        stop_heartbeat = lambda: None  # noqa: E731 - until this driver holds a comparison
        failing = False
        try:
            prior = self._resume_state() if self.resume else PriorAttempts()
            if self.already_finished:
                return self.results
            self.runs.wall_before = prior.wall("cmp")
            self.runs.open |= prior.reopened_sweeps
            if self.id is None:
                if not self.resume:
                    self._note_unfinished()
                self._start_comparison()
            self.runs.comparison = self.id
            stop_heartbeat = start_heartbeat(lambda tags: self.writer.set_tags("cmp", tags))  # (search/lease.py)
            record = OutcomeRecord(earlier=prior.finished)
            searcher = self.searcher = PhasedSearcher(
                self.arms, self.budget, record, self.runs, prior=prior, stream=self.stream,
                make_tpe=self._open_study, fuse=self.settings.fuse,
                # where the data is belongs to the command, not to the configs (a selected config stays portable)
                trial_settings={**trial_settings(self.settings), "data_root": self.data_root, **self.table_options,
                                **({"folds_digest": self.folds_digest} if self.folds_digest else {}),
                                **({"data_digest": self.data_digest} if self.data_digest else {})})
            self.results = searcher.results
            # the callback logs each trial and announces its reports and its end to the record
            self.tracker = TrialTracker(
                self.writer, tags={Tag.COMPARISON: self.id, Tag.TASK: self.task},
                cpus_per_trial=self.settings.cpus_per_trial, gpus_per_trial=self.settings.gpus_per_trial,
                params={"data_root": self.data_root, **self.table_options}, on_result=record.reported, on_finished=record.finished, on_fault=record.fault,
            )
            if searcher.pending_trials():
                attempt = self._attempt_number()
                name = f"{self.id}" + (f"-r{attempt}" if attempt else "")
                warm = wait_for_warm_workers()  # the local Ray's workers importing torch & co. since init_ray
                if warm:
                    self.writer.set_tags("cmp", {Tag.WARM_PIDS: ",".join(map(str, warm))})
                # a trial its environment ended (its data cannot be read, a checkpoint cannot be written, its worker lost
                # after its last retry) stops the comparison at once: no retry on the same machines can fix it
                stop = stop_on_fault(lambda: self._stop_reason(record), lambda fault: self.tracker.interrupt_open())
                def say(text: str) -> None:  # a line of its own, not glued to a terminal's progress line
                    searcher.progress.close()
                    self.log(text)

                # a trial that neither reports nor ends is named (and, with --stall-timeout, its process ended, so that it is retried)
                quiet = StallWatch(say, self.settings.stall_warning, self.settings.report_interval, end_after=self.settings.stall_timeout,
                                   on_end=self.tracker.worker_ended)
                try:
                    run_plan(searcher, searcher.max_trials(), self.settings, name, [self.tracker, quiet, self._starts],
                             scheduler=make_scheduler(self.arms, self.budget), stop=stop)
                except Exception as e:  # on a full disk Ray's own writes fail too (its state, a torn error file)
                    if self._stop_reason(record) is None:
                        self._raise_storage(e)
                        self._raise_lost(e)
                        raise
                self._raise_fault(self._stop_reason(record))
                for source in searcher.tpe.values():  # a study write that failed after TPE's last ask
                    if source.unwritten():
                        self.log(f"warning: {source.unwritten()}")
                    if source.repeats_line():
                        self.log(f"note: {source.repeats_line()}")
            searcher.finish_all()
            self.runs.finish()
            self._finishing = True
        except BaseException as e:
            # Ctrl-C or SIGTERM (search/cli.py), the cluster lost (_cluster_lost), or what Ray Tune raised as the interrupt cut
            # it short (signals.interrupted_by): resumable, visibly not running; anything else: failed
            failing = True
            signals.release_leaked_logging_lock()  # (the writer's and Ray's threads log)
            stop_watch()
            interrupted = signals.interrupted_by(e)
            with signals.deferred(then_raise=False):  # (a Ctrl-C while a failure's runs close: the failure goes on)
                if self._closing.acquire(blocking=False):
                    self._close_open(*(("interrupted", "KILLED") if interrupted else ("failed", "FAILED")))
            if interrupted and not isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise KeyboardInterrupt(f"stopping raised {type(e).__name__}: {e}") from e
            raise
        finally:
            self._shut_down((stop_watch, stop_heartbeat), raise_kept=not failing)
        return self.results

    def _shut_down(self, stops, raise_kept: bool) -> None:
        """Stop the driver's watches and close its MLflow writer, whatever signal comes meanwhile: one that lands
        here is raised once the writes are in (signals.deferred; `raise_kept`: unless the driver is already ending
        with an exception).  A Ctrl-C that stopped the flush of a finishing comparison lost its last writes: the
        comparison and its last sweep were left RUNNING (CI, the fault matrix's "fixed assessment" row)."""
        try:
            with signals.deferred(then_raise=raise_kept):
                for stop in stops:
                    stop()
                self._close_writer()
        except KeyboardInterrupt:
            # the signal came in the few bytecodes before the section began (or is the one it kept, raised at its end,
            # all done): later signals no longer raise, so the rest is done here, then the driver stops
            if not self._closed.is_set():
                for stop in stops:
                    stop()
                self._close_writer()
            raise

    def _stop_reason(self, record) -> tuple[str, str] | None:
        """Why the comparison stops (record.stop_reason: a trial its environment ended), or else a trial whose worker was
        lost while a node reported that a Ray worker could not import a trial's code (search/_ray_speedups.py,
        worker_import_failures): its retries wait for workers that cannot start there (`ulimit -v`, a module missing
        on a node), which Tune waited for without end; or, with such a report, no trial running and none started for
        NO_START_S seconds (the workers died before Ray handed them a trial: search/start_watch.py).  The first reason
        found is kept: what it read may change once Tune has stopped (its trials are no longer pending)."""
        if self._fault is None:
            self._fault = self._first_stop_reason(record)
        return self._fault

    def _first_stop_reason(self, record) -> tuple[str, str] | None:
        reason = record.stop_reason()
        if reason is not None or self.tracker is None:
            return reason
        failures = _ray_speedups.worker_import_failures()
        if not failures:
            return None
        if self.tracker.retries:
            lost = next(iter(self.tracker.retries))
            return ("environment", f"trial {lost}: its worker process was lost, and its node reported that a Ray worker could not "
                                   f"import a trial's code: {failures[0]}")
        # ... or the workers die before Ray hands them a trial's actor: no trial starts (search/start_watch.py)
        from .start_watch import NO_START_S

        if self._import_failure_seen is None:
            self._import_failure_seen = time.monotonic()
        stuck = self._starts.stuck(self._import_failure_seen)
        if stuck is None:
            return None
        return ("environment", f"trial {stuck}: no worker could start it in {NO_START_S:.0f} s, and its node reported that a Ray "
                               f"worker could not import a trial's code: {failures[0]}")

    def _raise_fault(self, fault: tuple[str, str] | None) -> None:
        """The error that ends a comparison its environment stopped (record.stop_reason): one line, resumable."""
        if fault is None:
            return
        kind, message = fault
        if kind == "data":
            from awnn.data import DataError

            raise DataError(f"{message}; fix the data and run the same command with --resume")
        if kind == "lost":
            from .errors import WorkerLost

            from .node_limits import limits_note

            retries = self.settings.max_failures
            raise WorkerLost(f"{message}, more than --max-failures {retries} allows: the process was killed, ran out of memory, or its node "
                             "died; the comparison stopped and its trials in flight were interrupted, none is counted as a failure of its "
                             "config; check the nodes (memory, preemption) or raise --max-failures, then run the same command with --resume"
                             f"{limits_note(self._on_cluster())}")
        if kind == "environment":
            from .errors import TrialEnvironment
            from .node_limits import environment_remedy

            on_cluster = self._on_cluster()
            raise TrialEnvironment(f"{message}: {environment_remedy(message, on_cluster)}; the comparison stopped and its "
                                   "trials in flight were interrupted, none is counted as a failure of its config; then run the same "
                                   "command with --resume")
        from tracking.contract import NO_ROOM_ERRNOS, storage_fault_errno

        from .errors import StorageFull, storage_remedy

        code = storage_fault_errno(message)
        room = self._storage_room() if code is None or code in NO_ROOM_ERRNOS else ""
        raise StorageFull(f"{message}{room}; {storage_remedy(code)} and run the same command with --resume")

    def _raise_lost(self, error: BaseException) -> None:
        """Ray Tune raised a worker's loss out of its loop instead of failing a trial (Ray's memory monitor killing a
        trial's actor while it starts: Tune's "Caught unexpected exception", Ray 2.60; before, a traceback, exit 1 and
        the runs closed as failed): the nodes' fault, not a config's, as a worker lost past --max-failures: the trials
        in flight interrupted, one line, resumable."""
        from .errors import WorkerLost, lost_worker_error

        lost = lost_worker_error(error)
        if lost is None:
            return
        self.tracker.interrupt_open()
        text = str(lost).strip()
        first = text.splitlines()[0][:400] if text else "no detail"
        from .node_limits import limits_note

        raise WorkerLost(f"trial workers were lost as Ray Tune started them ({type(lost).__name__}: {first}); the comparison stopped "
                         "and its trials in flight were interrupted, none is counted as a failure of its config; check the nodes "
                         "(memory: fewer trials at once with --num-cpus or a larger --cpus-per-trial; preemption), then run the "
                         f"same command with --resume{limits_note(self._on_cluster())}") from error

    def _on_cluster(self) -> bool:
        """Whether the trials run on a cluster joined (--address, RAY_ADDRESS), not on a local node this shell started."""
        return bool(self.settings.address or os.environ.get("RAY_ADDRESS"))

    def _raise_storage(self, error: BaseException) -> None:
        """Ray Tune's own write into --storage found no room or permission (no trial's fault recorded): one line, resumable."""
        from .errors import StorageFull, storage_error

        found = storage_error(error)
        if found is None:
            return
        from tracking.checks import free_space
        from tracking.contract import NO_ROOM_ERRNOS

        from .tune import ray_session_dir

        # Ray Tune writes its state into a staging folder in Ray's session folder (RAY_TMPDIR, else /tmp/ray), then
        # copies it into --storage; its OSError names no file: give the room of both
        storage, session, places = self.settings.storage_path(), ray_session_dir(), []
        if "://" not in storage and free_space(storage):
            places.append(f"--storage {storage}: {free_space(storage)}")
        if session and free_space(session):
            places.append(f"Ray's temporary folder {session}: {free_space(session)}")
        if found.errno not in NO_ROOM_ERRNOS:  # a permission: name the folder, not the room
            where = f" ({found.filename})" if found.filename else f" (--storage {storage} or Ray's temporary folder {session})"
            raise StorageFull(f"Ray Tune could not write its state{where}: {os.strerror(found.errno)}; make it writable by this user "
                              "(or give another --storage, or point RAY_TMPDIR at a folder this user may write) and run the same "
                              "command with --resume") from error
        raise StorageFull(f"Ray Tune could not write its state: {os.strerror(found.errno)}{''.join('; ' + p for p in places)}; make room where "
                          "it is short (or give another --storage, or point RAY_TMPDIR at a disk with room) and run the same command with "
                          "--resume") from error

    def _storage_room(self) -> str:
        """'; --storage PATH: N free of M' for a storage on this machine's file system, else ''."""
        from tracking.checks import free_space

        storage = self.settings.storage_path()
        room = free_space(storage) if "://" not in storage else ""
        return f"; --storage {storage}: {room}" if room else ""

    def _close_writer(self) -> None:
        leftover = self.writer.close(timeout=float(os.environ.get("AWNN_TRACKING_FLUSH_TIMEOUT", "120")))
        if leftover:
            from tracking.checks import store_room

            # why, and for a SQLite file its disk's room (SQLite says "disk I/O error" as well as "disk is full" when the
            # disk fills, depending on the write that met it)
            reasons = [r for r in (self.writer.last_error, store_room(self.tracking_uri)) if r]
            why = f" ({'; '.join(reasons)})" if reasons else ""
            if self.writer.spool_error is None:
                saved = f"they are saved in {self._spool_path()}"
            else:
                saved = (f"they could not be saved in {self._spool_path()} ({self.writer.spool_error}): those runs stay open in MLflow, "
                         "and their trials run again")
            self.unwritten = f"MLflow did not take the writes of {len(leftover)} runs{why}; {saved}"
            self.log(f"warning: {self.unwritten}; the same command with --resume " + ("applies them" if self.writer.spool_error is None else "runs them"))
        if self.writer.dropped:  # tracking/store.py: never expected; said, not hidden
            self.log(f"warning: {sum(self.writer.dropped.values())} MLflow writes were dropped because no run was started for them "
                     f"({', '.join(sorted(self.writer.dropped)[:5])}): a bug of awnn, please report it with this output")
        self.finished_in_mlflow = self._finishing and not leftover
        self._closed.set()

    LOST_GRACE_S = 5.0  # the main thread's time to stop on its own once the cluster is lost

    def _cluster_lost(self, message: str) -> None:
        """search/tune.py watch_cluster's `on_lost`, on its thread: the Ray
        cluster stopped answering, or a local Ray's node ended.  Interrupt the main thread (it then stops
        as on Ctrl-C); where it does not get there within LOST_GRACE_S (stuck
        in a call to the dead GCS inside Ray's C code), close the open runs
        as interrupted and flush MLflow from here, then end the process (exit
        1) before Ray's core worker aborts it."""
        import _thread

        self.log(f"awnn: {message}")
        _thread.interrupt_main()
        if self._closed.wait(self.LOST_GRACE_S):
            return
        if self._closing.acquire(blocking=False):
            self._close_open("interrupted", "KILLED")
            self._close_writer()
        else:  # the main thread is closing them: let it finish
            self._closed.wait(float(os.environ.get("AWNN_TRACKING_FLUSH_TIMEOUT", "120")) + 10)
        self.log(f"awnn {self.kind}: interrupted; run the same command with --resume to continue")
        exit_now(1)

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
            # phases overlap: every open sweep closes with its wall time so far
            self.runs.close_open(state, status, self.searcher.open_walls() if self.searcher is not None else {})
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

    def _open_study(self, arm: Arm) -> TpeSource:
        """A tpe arm's Optuna study, its ask window `--tpe-window` or else the
        cluster's trial slots (search/tpe.py, "The ask window"; a resumed study
        keeps its own); its sweep run records the window."""
        window = arm.options.tpe_window or concurrent_slots(self.settings)
        source = TpeSource(arm, self.budget, self.optuna_storage, self.runs.study_name(arm), window=window)
        self.runs.tpe_windows[arm.name] = source.window
        return source

    def _start_comparison(self) -> None:
        from .lease import hold_comparison

        named = f"{self.task}-{self.data_name}" if self.data_name else self.task  # (a user's file: which one, at a glance)
        self.id = f"{named}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        hold_comparison(self.tracking_uri, self.id)  # (new: nobody else holds it) a --resume of it is refused until this process ends
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
        params = {Param.TASK: self.task, Param.STRATEGIES: ",".join(self.strategies), Param.BUDGET: json.dumps(self.budget.to_dict()),
                  Param.CPUS_PER_TRIAL: self.settings.cpus_per_trial, Param.GPUS_PER_TRIAL: self.settings.gpus_per_trial,
                  Param.STORAGE: redact_uri(self.settings.storage_path()), Param.DATA_ROOT: self.data_root,
                  Param.RAY_ADDRESS: self.settings.address or os.environ.get("RAY_ADDRESS", "local"), **self._search_options(),
                  Param.PROTOCOL: self.protocol, Param.FUSE: self.settings.fuse, Param.FLUSH_DENORMAL: self.settings.flush_denormal}
        if self.folds_digest:
            params[Param.FOLDS_DIGEST] = self.folds_digest
        if self.data_digest:  # (task `table`: already there, as part of the key)
            params[Param.DATA_DIGEST] = self.data_digest
        for key, value in self.table_options.items():  # (the digest names them too: another label, another comparison)
            params[{"label": Param.LABEL, "drop_columns": Param.DROP_COLUMNS}[key]] = value
        if self.data_summary:
            params[Param.DATA_SUMMARY] = self.data_summary
        params.update(self._paper_budget())
        if self.optuna_storage:
            params[Param.OPTUNA_STORAGE] = redact_uri(self.optuna_storage)
        self.writer.start_run("cmp", name=f"{self.kind}-{self.id}", tags=tags, params=params)
        self.log(f"comparison {self.id}: task {self.task}, strategies {', '.join(self.strategies)}, budget {self.budget.name}; MLflow {self.tracking_uri}")

    def _paper_budget(self) -> dict[str, Any]:
        """What the report's paper-budget projection needs (tracking/paper_projection.py): per family, what the
        `paper` budget would run, and the Ray cluster's CPUs and GPUs (tracking must not import search)."""
        import dataclasses

        import ray

        paper, out = BUDGETS["paper"], {}
        for a in self.arms:
            g = a.grid
            out.setdefault(a.family, {
                "trials": len(a.selection_specs(paper)), "epochs": paper.epochs(g), "retrain_runs": paper.runs(g), "folds": paper.folds_for(g),
                "epochs_by_hidden_layers": {str(k): paper.epochs(dataclasses.replace(g, epochs=e)) for k, e in sorted(g.epochs_by_hidden_layers.items())},
                "patience": paper.patience(g)})
        res = ray.cluster_resources() if ray.is_initialized() else {}
        return {Param.PAPER_BUDGET: json.dumps(out, sort_keys=True), Param.CLUSTER_CPUS: res.get("CPU", 0), Param.CLUSTER_GPUS: res.get("GPU", 0)}

    # ------------------------------------------------------------- resume
    def _note_unfinished(self) -> None:
        """A new comparison whose arguments match an unfinished one says so: `--resume` would continue it."""
        from mlflow.tracking import MlflowClient

        try:
            roots = MlflowClient(self.tracking_uri).search_runs(
                [self.writer.experiment_id], filter_string=tag_equals((Tag.COMPARISON_KEY, self.key), (Tag.KIND, "comparison")),
                order_by=["attributes.start_time DESC"], max_results=1)
        except Exception as e:  # noqa: BLE001 - a hint, never a reason to stop
            from .signals import stop_if_interrupted

            stop_if_interrupted(e)  # (a stop asked meanwhile still stops)
            return
        if roots and roots[0].data.tags.get(Tag.STATE) != "finished":
            state = roots[0].data.tags.get(Tag.STATE, "running")
            saved = roots[0].data.params.get(Param.DATA_DIGEST)
            if self.data_digest and saved and saved != self.data_digest:  # --resume would refuse this data: no advice to use it
                self.log(f"note: comparison {roots[0].data.tags.get(Tag.COMPARISON)} with these arguments is unfinished ({state}) "
                         f"on other data (SHA-256 {saved}; here {self.data_digest}); this starts a new one on this data")
                return
            self.log(f"note: comparison {roots[0].data.tags.get(Tag.COMPARISON)} with these arguments is unfinished ({state}); "
                     f"this starts a new one - run the same command with --resume to continue it instead")

    def _read_otherwise(self, client, exp: str) -> str:
        """For a --resume of task table that found nothing: ' (comparison X, unfinished, is this command on this file with
        --label ... --drop-columns ...: ...)' where one is (a flag forgotten, or given, on the resume), else ''."""
        from shlex import quote

        from awnn.config import TABLE_KEYS
        from awnn.data import TASKS, DataError

        if not self._data_is_a_file():
            return ""
        try:
            roots = client.search_runs([exp], filter_string=tag_equals((Tag.KIND, "comparison")) + f" and params.{Param.DATA_ROOT} = "
                                       f"'{self.data_root}'", order_by=["attributes.start_time DESC"], max_results=10)
        except Exception:  # noqa: BLE001 - a hint, never a reason to stop (a path MLflow's filter cannot quote)
            return ""
        params = {"label": Param.LABEL, "drop_columns": Param.DROP_COLUMNS}
        for root in roots:
            if root.data.tags.get(Tag.STATE) == "finished":
                continue
            options = {k: root.data.params[params[k]] for k in TABLE_KEYS if root.data.params.get(params[k])}
            if options == self.table_options:
                continue
            try:
                digest = TASKS[self.task].check(self.data_root, **options).digest
            except DataError:
                continue
            key = comparison_key(self.task, self.strategies, self.budget, self._grid_list, {**self._search_options(), Param.DATA_DIGEST: digest})
            if key == root.data.tags.get(Tag.COMPARISON_KEY):
                flags = " ".join(f"--{k.replace('_', '-')} {quote(v)}" for k, v in options.items()) or "no --label or --drop-columns"
                return (f" (comparison {root.data.tags.get(Tag.COMPARISON)}, unfinished, is this command on this file with {flags}: "
                        "run it so with --resume to continue that one instead)")
        return ""

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
            self.log("resume: no unfinished comparison with these arguments; starting a new one" + self._read_otherwise(client, exp))
            return PriorAttempts()
        self._check_saved_data(root)  # (again: the run may have come from the spool just applied)
        from .errors import SearchError
        from .lease import hold_comparison

        held = hold_comparison(self.tracking_uri, root.data.tags[Tag.COMPARISON])  # (held since _check_resumable, unless a newer one came)
        if held:
            raise SearchError(f"--resume: comparison {root.data.tags[Tag.COMPARISON]}: {held}; a second driver would run its "
                              "trials again; let it finish, or stop it (Ctrl-C) and then resume")
        self.id = root.data.tags[Tag.COMPARISON]
        self.writer.adopt("cmp", root.info.run_id)
        self.writer.reopen_run("cmp")
        self.writer.set_tags("cmp", {Tag.STATE: "running"})
        storage = self.settings.storage_path()
        return read_prior_attempts(client, exp, self.id, self.writer, lambda key, group: find_checkpoint(storage, self.id, key, group), self.log)


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
        lock = folder_lock(path.parent)
    elif url.split(":", 1)[0].split("+")[0] in DATABASE_SCHEMES:
        check_database(url, f"--optuna-storage {redact_uri(url)}")  # the driver installed, the server there (bounded wait)
    with lock:  # the file is checked under the lock too: a storage another driver is creating is not "not Optuna's"
        if url.startswith("sqlite:///") and path.is_file() and path.stat().st_size > 0:
            check_sqlite_store(path, what, tables={"studies", "trials"}, kind="an Optuna SQLite storage")
        try:
            optuna.storages.RDBStorage(url)
        except Exception as e:  # noqa: BLE001 - one readable line whatever the driver raises
            raise OptionError(f"--optuna-storage: cannot open {redact_uri(url)!r} as an Optuna RDB storage: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None

