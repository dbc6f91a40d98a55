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

__all__ = ["TpeSource", "default_optuna_storage", "KEY_ATTR", "OBJECTIVE_ATTR", "SELECTED_ATTR", "SELECTED_NUMBER_ATTR"]


def default_optuna_storage(tracking_uri: str) -> str:
    """optuna.db beside the MLflow SQLite file; ./optuna.db for other stores."""
    from pathlib import Path

    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri[len("sqlite:///"):])
        return f"sqlite:///{path.with_name('optuna.db')}"
    return f"sqlite:///{(Path.cwd() / 'optuna.db').resolve()}"


KEY_ATTR = "awnn_trial_key"  # user attribute of a study trial: the trial key it was asked for
OBJECTIVE_ATTR = "awnn_objective"  # study user attribute: what the study's value is
SELECTED_ATTR, SELECTED_NUMBER_ATTR = "awnn_selected_key", "awnn_selected_number"  # the protocol's choice (record_selection)


class TpeSource:
    """Optuna's TPE sampler on its public ask/tell API, one study per arm in
    an RDB storage.

    `fill(spec, trial_id)` asks the study for the next config and writes it
    into the spec; `complete(trial_id, status, value)` tells the study the
    trial's selection score (trials the protocol would not select - diverged,
    failed, stopped - are told as failed, so TPE models only usable scores).
    The search space is each grid key a categorical choice, built as Ray
    Tune's OptunaSearch builds it (`convert_search_space`, public), and the
    study is created with the settings OptunaSearch used (TPESampler(seed),
    NopPruner, load_if_exists), so a seed asks the same configs as before."""

    def __init__(self, arm: Arm, budget: Budget, storage_url: str, study_name: str):
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
        self.study = optuna.create_study(
            storage=optuna.storages.RDBStorage(storage_url), sampler=optuna.samplers.TPESampler(seed=arm.seed),
            pruner=optuna.pruners.NopPruner(), study_name=study_name, load_if_exists=True,
            direction="minimize" if self.mode == "min" else "maximize",
        )
        # the objective, named: the protocol's selection score on the inner validation part
        with warnings.catch_warnings():  # experimental since Optuna 3.2; still so in 4.x
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study.set_metric_names([self.metric])
        self.study.set_user_attr(OBJECTIVE_ATTR, f"{self.metric} ({self.mode}) on the inner validation part; the protocol breaks ties "
                                 f"by the lower validation loss, then the earlier grid position (search/protocol.py select_best)")
        self.asked: dict[str, Any] = {}  # Ray trial id -> the study trial asked for it, until told
        self.pending: dict[str, tuple[dict, int | None]] = {}  # Ray trial id -> (config, open study trial) of re-runs

    def fill(self, spec: TrialSpec, trial_id: str) -> None:
        trial = self.asked.get(trial_id)
        if trial is None:
            trial = self.asked[trial_id] = self.study.ask(fixed_distributions=self.distributions)
            # the trial key travels with the study's trial, so that a resumed driver
            # can tell which of them the dead one had already told (see told_later)
            trial.set_user_attr(KEY_ATTR, spec.key)
        sampled = trial.params
        cfg = {"task": self.arm.grid.task, **self.arm.grid.fixed, **{k: sampled[k] for k in self.keys}}
        spec.index = self.index[tuple(repr(cfg[k]) for k in self.keys)]
        spec.config = {**budget_config(cfg, self.arm.grid, self.budget), **_protocol_values(self.arm.grid, self.budget, "inner", 0)}

    def told_later(self, spec: TrialSpec, trial_id: str) -> None:
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

    def record_selection(self, best: Mapping[str, Any]) -> None:
        """The protocol's choice as the study's user attributes: the study's own
        `best_trial` is the highest score, first on ties; where ties make the two
        differ, `awnn_selected_key` / `awnn_selected_number` is the one this tool re-trained."""
        number = next((t.number for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get(KEY_ATTR) == best["key"]), None)
        self.study.set_user_attr(SELECTED_ATTR, best["key"])
        if number is not None:
            self.study.set_user_attr(SELECTED_NUMBER_ATTR, number)

    def complete(self, trial_id: str, status: str | None, value: float | None) -> None:
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
        self.study.tell(trial, value if usable else None, state=state)
