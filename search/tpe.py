"""TPE's side of a comparison: the Optuna study a `tpe` arm asks and tells
through Optuna's public ask/tell API (search/strategies.py's registry names
the family; search/phases.py calls `fill`, `told_later`, `complete` and
`record_selection`)."""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Mapping

from tracking.contract import SELECTABLE

from .budget import Budget
from .protocol import TrialSpec, _protocol_values, budget_config

if TYPE_CHECKING:
    from .strategies import Arm

__all__ = ["TpeSource", "study_storage_errors", "default_optuna_storage", "KEY_ATTR", "OBJECTIVE_ATTR", "WINDOW_ATTR", "SELECTED_ATTR",
           "SELECTED_NUMBER_ATTR", "REPEAT_ATTR", "MAX_REPEATS"]


def default_optuna_storage(tracking_uri: str) -> str:
    """optuna.db beside the MLflow SQLite file; ./optuna.db for other stores."""
    from pathlib import Path

    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri[len("sqlite:///"):])
        return f"sqlite:///{path.with_name('optuna.db')}"
    return f"sqlite:///{(Path.cwd() / 'optuna.db').resolve()}"


def study_storage_errors() -> tuple[type[BaseException], ...]:
    """What Optuna's RDB storage raises when a write (or read) of the study
    fails: its own StorageInternalError around a failed commit, SQLAlchemy's
    errors (a full disk, a read-only or locked SQLite file, a server gone)."""
    import optuna
    import sqlalchemy.exc

    return (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError)


def _root_cause(error: BaseException) -> str:
    """The first line of the innermost cause of `error` (e.g. sqlite3's "database or disk is full")."""
    seen = set()
    while (error.__cause__ or error.__context__) is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


KEY_ATTR = "awnn_trial_key"  # user attribute of a study trial: the trial key it was asked for
OBJECTIVE_ATTR = "awnn_objective"  # study user attribute: what the study's value is
WINDOW_ATTR = "awnn_ask_window"  # study user attribute: its trials in flight at most (TpeSource, "The ask window")
SELECTED_ATTR, SELECTED_NUMBER_ATTR = "awnn_selected_key", "awnn_selected_number"  # the protocol's choice (record_selection)
REPEAT_ATTR = "awnn_repeat_of"  # user attribute of a study trial that asked a config another trial key trains: that key ("Repeats")
MAX_REPEATS = 16  # repeats in a row after which the next ask is an untried config chosen by the arm's seed ("Repeats")


class TpeSource:
    """Optuna's TPE sampler on its public ask/tell API, one study per arm in
    an RDB storage.

    `fill(spec, trial_id)` asks the study for the next config and writes it
    into the spec (search/errors.StudyUnwritable where the study cannot be
    written: a config asked of a study that cannot record it is not TPE's);
    `complete(trial_id, status, value)` tells the study the trial's
    selection score (trials the protocol would not select - diverged,
    failed, stopped - are told as failed, so TPE models only usable scores).
    The search space is each grid key a categorical choice, built as Ray
    Tune's OptunaSearch builds it (`convert_search_space`, public), and the
    study is created with the settings OptunaSearch used (TPESampler(seed),
    NopPruner, load_if_exists).

    The ask window: the study's trial k is asked once trial k - W has
    ended, and at that ask the study has been told exactly trials 0 .. k - W
    (the ends of later ones are held, `held`, and told at the asks they
    gate; after the last ask, as they come).  W is the cluster's trial slots
    when the study was created, kept in the study (a resumed driver asks
    with the same window on another cluster).  Each ask so sees the same
    told trials, whatever runs beside the arm and however its trials' ends
    interleave: the same command on the same cluster asks the same configs.
    Asked whenever a slot freed and told every end at once, as before, TPE
    saw whichever trials happened to have ended, and `--strategies tpe`
    asked other configs than `fixed,tpe` with the same seed.  The price: a
    free slot waits (`can_fill`; the searcher gives it to another arm
    meanwhile) while the oldest of the arm's trials in flight still runs.
    The window counts trained trials (`real`), not the study's numbers,
    which repeats (below) take too.

    Repeats: TPE samples each key from its own density, so it asks again
    configs it has asked before (Optuna's issue #2021; 18 trials on the fixed
    SpiralHard grid trained 14.9 distinct configs on average over 24 synthetic
    objectives, 12 on DoubleMoon's 8.6: `python benchmarks/tpe_repeats.py`).
    Every selection trial of an arm trains with the same seed, so a repeat
    would train the same network to the same score, at full cost, and count
    it twice in TPE's model.  A repeat is not trained: its study trial is
    told failed (TPE models only completed trials, so the repeat adds
    nothing to it) with `awnn_repeat_of` naming the trial key that trains
    that config, and the study is asked again; after MAX_REPEATS in a row
    (the sampler keeps to configs trained already), an untried config chosen
    by the arm's seed is enqueued and asked (Optuna's public `enqueue_trial`).
    So `--tpe-trials` counts distinct configs trained, as `--random-trials`
    does (neither may exceed the fixed grid).  Before 2026-12-08 repeats were
    trained, as Ray Tune's OptunaSearch trains them: for the same trials the
    same cost, fewer configs (the benchmark: the best config found ranked
    4.12th of SpiralHard's 180 on average against 3.71st now; 3.29th of
    DoubleMoon's 30 against 2.42nd)."""

    def __init__(self, arm: Arm, budget: Budget, storage_url: str, study_name: str, *, window: int):
        import optuna
        from ray import tune
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.arm = arm
        self.budget = budget
        self.study_name = study_name
        self.storage_url = storage_url
        self.metric, self.mode = arm.metric()
        self.keys = list(arm.grid.grid)
        self.index = {tuple(repr(c[k]) for k in self.keys): i for i, c in enumerate(arm.grid.configs())}
        self.distributions = OptunaSearch.convert_search_space({k: tune.choice(list(v)) for k, v in arm.grid.grid.items()})
        try:
            self.study = optuna.create_study(
                storage=optuna.storages.RDBStorage(storage_url), sampler=optuna.samplers.TPESampler(seed=arm.seed),
                pruner=optuna.pruners.NopPruner(), study_name=study_name, load_if_exists=True,
                direction="minimize" if self.mode == "min" else "maximize",
            )
            # the objective, named: the protocol's selection score on the inner validation part
            with warnings.catch_warnings():  # experimental since Optuna 3.2; still so in 4.x
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.set_metric_names([self.metric])
            self.study.set_user_attr(OBJECTIVE_ATTR, f"{self.metric} ({self.mode}) on the inner validation part; the protocol breaks "
                                     f"ties by the lower validation loss, then the earlier grid position (search/protocol.py select_best)")
            stored = self.study.user_attrs.get(WINDOW_ATTR)  # (a resumed study keeps the window it was asked with)
            if isinstance(stored, int) and not isinstance(stored, bool) and stored >= 1:
                self.window = stored
            else:
                self.window = max(1, int(window))
                self.study.set_user_attr(WINDOW_ATTR, self.window)
        except study_storage_errors() as e:
            raise self.unwritable(e) from None
        self.broken: Exception | None = None  # a write of the study that failed where it could not be raised (complete)
        self.cause = ""  # what `unwritable` last said
        self.asked: dict[str, Any] = {}  # Ray trial id -> the study trial asked for it, until it ends
        self.pending: dict[str, tuple[dict, int | None]] = {}  # Ray trial id -> (config, open study trial) of re-runs
        self.held: dict[int, tuple[Any, float | None, Any]] = {}  # study trial number -> (trial, value, state): ended, not told yet
        self.real: list[int] = []  # the study numbers of this driver's trained asks, in order (the ask window counts these)
        self.taken: dict[str, tuple] | None = None  # trial key -> its config (repr of each key's value): the configs trained
        self.repeats = 0  # this driver's asks that were repeats, told failed and not trained ("Repeats")
        self.last_asked = False  # this driver has asked its last trial: ends are told as they come

    def unwritable(self, error: BaseException):
        """The one-line StudyUnwritable of a failed write of the study (its cause also in `self.cause`)."""
        import errno

        from tracking.checks import free_space
        from tracking.contract import redact_uri, storage_fault_errno

        from .errors import StudyUnwritable, storage_remedy

        room = free_space(self.storage_url[len("sqlite:///"):]) if self.storage_url.startswith("sqlite:///") else ""
        self.cause = f"--optuna-storage {redact_uri(self.storage_url)}: TPE's study {self.study_name} could not be written " \
                     f"({_root_cause(error)}{'; ' + room + ' there' if room else ''})"
        code = storage_fault_errno(self.cause) or (errno.ENOSPC if "disk is full" in self.cause else None)  # (SQLite's words)
        fix = storage_remedy(code, "--optuna-storage", nodes=False) if code is not None else \
            "check it (room on its disk, its permissions, its database server) or give another --optuna-storage"
        return StudyUnwritable(f"{self.cause}; {fix}, then run the same command with --resume")

    def unwritten(self) -> str | None:
        """After the sweep: a line saying the study missed writes no later ask
        revealed (the ends of its last trials, the selection), or None."""
        if self.broken is None:
            return None
        return f"{self.cause}: the comparison's results in MLflow are complete, but the study lacks the ends of its last trials"

    def _asking(self, step, *args) -> None:
        """A step of handing out a trial (`_fill`, `_told_later`): a study that
        failed a write before, or fails one now, raises StudyUnwritable."""
        if self.broken is not None:
            raise self.broken
        try:
            step(*args)
        except study_storage_errors() as e:
            raise self.unwritable(e) from None

    def can_fill(self) -> bool:
        """May `fill` ask the next trial now (the ask window: every trial asked at
        least `window` before it has ended; re-runs of an earlier driver's trials
        all told)?  A study that failed a write: yes, and `fill` raises it."""
        if self.broken is not None:
            return True
        if self.pending:
            return False
        if not self.real:
            return not self.asked
        bound = self._bound()
        return all(t.number > bound for t in self.asked.values())

    def _bound(self) -> int:
        """The study number of the trained trial `window` asks before the next one
        (-1 where this driver has asked fewer): it and every trial before it must
        have ended, and been told, before the next ask."""
        return self.real[-self.window] if len(self.real) >= self.window else -1

    def fill(self, spec: TrialSpec, trial_id: str, left: int = 1) -> None:
        """Write the config of the study's next trial into `spec`; `left`: the
        trials still to fill, this one included (1: the last ask)."""
        self._asking(self._fill, spec, trial_id, left)

    def _fill(self, spec: TrialSpec, trial_id: str, left: int) -> None:
        trial = self.asked.get(trial_id)
        if trial is None:
            if not self.can_fill():
                raise RuntimeError(f"TPE study {self.study_name}: asked for a trial while one asked {self.window} or more before it "
                                   f"runs (the searcher checks can_fill first)")
            if self.real:  # the study is told exactly the trials up to k - window before it asks trial k
                self._tell_held(self._bound())
            trial = self._ask_untaken(spec.key)
            self.real.append(trial.number)
            self.asked[trial_id] = trial
            if left <= 1:  # no ask left to gate: what is held is told now, later ends as they come
                self.last_asked = True
                self._tell_held(None)
            # the trial key travels with the study's trial, so that a resumed driver
            # can tell which of them the dead one had already told (see told_later)
            trial.set_user_attr(KEY_ATTR, spec.key)
        sampled = trial.params
        self._taken()[spec.key] = self._point(sampled)
        cfg = {"task": self.arm.grid.task, **self.arm.grid.fixed, **{k: sampled[k] for k in self.keys}}
        spec.index = self.index[tuple(repr(cfg[k]) for k in self.keys)]
        spec.config = {**budget_config(cfg, self.arm.grid, self.budget), **_protocol_values(self.arm.grid, self.budget, "inner", 0)}

    def _point(self, params: Mapping[str, Any]) -> tuple:
        """A config as the grid's index keys it."""
        return tuple(repr(params[k]) for k in self.keys)

    def _taken(self) -> dict[str, tuple]:
        """Trial key -> the config its latest study trial asked (read from the study
        once, so that a resumed driver knows its predecessors' configs)."""
        if self.taken is None:
            taken: dict[str, tuple] = {}
            for t in sorted(self.study.get_trials(deepcopy=False), key=lambda t: t.number):
                key = t.user_attrs.get(KEY_ATTR)
                if key is not None and all(k in t.params for k in self.keys):
                    taken[key] = self._point(t.params)  # (a key asked anew after a resume: its latest ask)
            self.taken = taken
        return self.taken

    def _ask_untaken(self, key: str):
        """The study's next trial for trial key `key` whose config no other trial
        key trains: repeats are told failed and asked again (the class docstring,
        "Repeats")."""
        import random

        import optuna

        others = {point: k for k, point in self._taken().items() if k != key}
        for attempt in range(MAX_REPEATS + 1):
            if attempt == MAX_REPEATS:  # TPE keeps to configs trained already: an untried one, by the arm's seed
                untried = [c for c in self.arm.grid.configs() if self._point(c) not in others]
                if untried:
                    pick = random.Random(f"{self.arm.seed}:{len(others)}").choice(untried)
                    self.study.enqueue_trial({k: pick[k] for k in self.keys})
            trial = self.study.ask(fixed_distributions=self.distributions)
            original = others.get(self._point(trial.params))
            if original is None:
                return trial
            trial.set_user_attr(REPEAT_ATTR, original)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.repeats += 1
        raise RuntimeError(f"TPE study {self.study_name}: every config of the grid is trained by another trial key")  # (--tpe-trials <= the grid)

    def study_repeats(self) -> int | None:
        """The repeats the study holds, every driver's (the trials with `awnn_repeat_of`);
        None where the study cannot be read."""
        if self.broken is not None:
            return None
        try:
            return sum(REPEAT_ATTR in t.user_attrs for t in self.study.get_trials(deepcopy=False))
        except study_storage_errors():
            return None

    def repeats_line(self) -> str | None:
        """After the sweep: one line saying how many of TPE's asks were repeats (not trained), or None."""
        if not self.repeats:
            return None
        n = self.repeats
        return (f"{self.arm.name}: TPE asked {n} config{'s' if n != 1 else ''} it had asked before; "
                f"{'they were' if n != 1 else 'it was'} told failed and asked again, not trained (search/tpe.py, \"Repeats\")")

    def told_later(self, spec: TrialSpec, trial_id: str) -> None:
        self._asking(self._told_later, spec, trial_id)

    def _told_later(self, spec: TrialSpec, trial_id: str) -> None:
        """A trial re-run after a resume: its config came from the earlier
        driver.  The study trial the earlier driver asked for it is told the
        re-run's score when it ends - unless that driver had told it already
        (it died after telling Optuna but before MLflow's writer recorded the
        run as finished): one study trial per trial key, never two."""
        import optuna

        opened = None
        for t in self.study.get_trials(deepcopy=False):
            if t.user_attrs.get(KEY_ATTR) != spec.key:
                continue
            if t.state.is_finished():
                return  # told already: the re-run only completes MLflow's record
            opened = t.number if t.state == optuna.trial.TrialState.RUNNING else opened
        self.pending[trial_id] = ({k: spec.config[k] for k in self.keys}, opened)

    def _record_selection(self, best: Mapping[str, Any]) -> None:
        """The protocol's choice as the study's user attributes: the study's own
        `best_trial` is the highest score, first on ties; where ties make the two
        differ, `awnn_selected_key` / `awnn_selected_number` is the one this tool re-trained."""
        number = next((t.number for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get(KEY_ATTR) == best["key"]), None)
        self.study.set_user_attr(SELECTED_ATTR, best["key"])
        if number is not None:
            self.study.set_user_attr(SELECTED_NUMBER_ATTR, number)

    def complete(self, trial_id: str, status: str | None, value: float | None) -> None:
        """Tell the study a trial's end.  Called inside Ray Tune's loop, which
        logs an exception with its traceback and goes on: a failed write is
        kept in `broken` instead, and the next `fill` raises it (the sweep
        stops), or the sweep says it at its end (search/sweep.py)."""
        self._telling(self._complete, trial_id, status, value)

    def record_selection(self, best: Mapping[str, Any]) -> None:
        self._telling(self._record_selection, best)

    def _telling(self, step, *args) -> None:
        """A write of an end (`_complete`, `_record_selection`), inside Ray Tune's
        loop: a failure is kept in `broken` (no write after it), not raised."""
        if self.broken is not None:
            return
        try:
            step(*args)
        except study_storage_errors() as e:
            self.broken = self.unwritable(e)

    def catch_up(self, finished: Mapping[str, Mapping[str, Any]], rerun: set[str] = frozenset()) -> int:
        """On a resumed driver: tell the study the ends it missed.  A study
        trial still RUNNING whose trial key finished in MLflow (`finished`:
        trial key -> its outcome) with the same config gets that outcome (its earlier driver could
        not tell it: the study's storage failed, or the driver died between
        MLflow and Optuna); one without a key (an ask the storage failed
        midway), or whose trial never ran (asked just before the driver
        stopped: neither finished nor among the `rerun` keys, it is asked
        anew), is told failed.  Those left RUNNING are re-run (told_later).
        Returns how many were told."""
        import optuna

        told = 0
        try:
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
                key = t.user_attrs.get(KEY_ATTR)
                if key in rerun and t.params:
                    continue
                outcome = finished.get(key)
                config = (outcome or {}).get("config") or {}
                if outcome is not None and t.params and all(config.get(k) == t.params.get(k) for k in self.keys):  # that trial's own end
                    value = outcome.get(self.metric)
                    usable = outcome.get("status") in SELECTABLE and isinstance(value, (int, float)) and math.isfinite(value)
                    self.study.tell(t.number, value if usable else None,
                                    state=optuna.trial.TrialState.COMPLETE if usable else optuna.trial.TrialState.FAIL)
                else:
                    self.study.tell(t.number, state=optuna.trial.TrialState.FAIL)
                told += 1
        except study_storage_errors() as e:
            raise self.unwritable(e) from None
        return told

    def flush(self) -> None:
        """Tell the study the ends it holds (the driver's end: a sweep Tune ended
        before its last ask); a failed write is kept in `broken`, as `complete`'s."""
        self._telling(self._tell_held, None)

    def _tell_held(self, upto: int | None) -> None:
        """Tell the held ends of the trials numbered up to `upto` (None: all), in trial order."""
        for number in sorted(self.held):
            if upto is not None and number > upto:
                break
            trial, value, state = self.held.pop(number)
            self.study.tell(trial, value, state=state)

    def _complete(self, trial_id: str, status: str | None, value: float | None) -> None:
        import optuna

        usable = status in SELECTABLE and value is not None and math.isfinite(value)
        state = optuna.trial.TrialState.COMPLETE if usable else optuna.trial.TrialState.FAIL
        if trial_id in self.pending:
            params, opened = self.pending.pop(trial_id)
            if opened is not None:
                self.study.tell(opened, value if usable else None, state=state)
            elif usable:  # the earlier driver's study trial is gone: record the score as a finished trial
                self.study.add_trial(optuna.trial.create_trial(state=state, value=value, params=params, distributions=self.distributions))
            return
        trial = self.asked.pop(trial_id, None)
        if trial is None:
            return
        if self.last_asked:
            self.study.tell(trial, value if usable else None, state=state)
        else:  # told at the ask it gates (the ask window)
            self.held[trial.number] = (trial, value if usable else None, state)
