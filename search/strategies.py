"""Search strategies: which configs a comparison's selection phase trains.

    fixed    every config of the fixed-width grid  (<task>-fixed.yaml)
    awnn     every config of the AWNN grid          (<task>-awnn.yaml)
    tpe      Optuna's TPE sampler over the fixed grid's space (each grid key a
             categorical choice), through Ray Tune's OptunaSearch; `tpe_trials`
             trials (default: the AWNN grid's size, so both spend as many
             trials); the study lives in an RDB storage (optuna-dashboard)
    asha     every config of the fixed grid, launched in a seeded shuffled
             order, under asynchronous successive halving on the validation
             score: grace period and reduction factor from the options;
             trials it stops are recorded with status `stopped`, their compute
             counted
    random   `random_trials` configs drawn without replacement from the fixed
             grid (seeded; default: the AWNN grid's size)
    awnn-asha  every config of the AWNN grid under the same ASHA scheduler
             as `asha` (its own bracket, grace period from the AWNN grid's
             epochs): whether early stopping compounds AWNN's savings
    fixedplus  the paper's "Fixed+" (App. D): no search of its own; after
             the awnn arm, a fixed-width network with the selected AWNN
             config's layers, activation, batch size and learning rate and
             the width AWNN learned (mean over its re-training runs of the
             mean over hidden layers, as the paper; `--fixedplus-widths
             per-layer`: each layer its own mean), re-trained R times.  Its
             cost is the awnn arm's (selection + re-training) plus its own

Every strategy then follows the same protocol (search/protocol.py): the
selected config is re-trained R times on the outer split.

An *arm* is one run of one strategy.  The stochastic strategies (tpe, asha,
random) run `repeats` times with seeds seed, seed+1, ...; their arms are
called `<strategy>.r<k>` when repeats > 1 (k = 1..N), else just the
strategy's name.  fixed and awnn are deterministic and run once.
"""
from __future__ import annotations

import difflib
import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Callable

from awnn.config import MAX_SEED
from tracking.contract import Param, Tag, arm_name

from .budget import Budget
from .errors import OptionError
from .grid import Grid, GridError, find_grid
from .protocol import PROTOCOLS, TrialSpec, per_fold, protocol_name, selection_specs

__all__ = ["FIXEDPLUS_WIDTHS", "with_protocol", "check_protocol", "FAMILIES", "STOCHASTIC", "REGISTRY", "Family", "StrategyOptions", "Arm", "make_arms", "asha_milestones", "make_scheduler"]


@dataclass
class StrategyOptions:
    """The knobs of the non-grid strategies (flags of `awnn compare`)."""

    seed: int = 0
    repeats: int = 1
    tpe_trials: int | None = None  # None: the AWNN grid's size
    tpe_window: int | None = None  # TPE's ask window (search/tpe.py); None: the cluster's trial slots when the study is created
    random_trials: int | None = None  # None: the AWNN grid's size
    asha_grace_period: int | None = None  # epochs; None: 10% of the budget's epochs, at least 1
    asha_reduction_factor: float = 3.0
    optuna_storage: str | None = None  # None: optuna.db beside the MLflow SQLite file
    fixedplus_widths: str = "mean"  # fixedplus: "mean" (one width, the paper's) or "per-layer"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Arm:
    name: str  # e.g. "fixed", "tpe", "tpe.r2"
    family: str
    repeat: int  # 0 for the deterministic families, else 1..repeats
    seed: int  # the search's seed (sampling, order); training seeds follow the protocol
    grid: Grid  # the search space
    trials: int  # selection trials
    options: StrategyOptions

    def metric(self) -> tuple[str, str]:
        """(metric, mode) the search optimises: the protocol's selection score."""
        if self.grid.fixed.get("select_metric") == "loss":
            return "best_val_loss", "min"
        return "best_val_acc", "max"

    # ---------------------------------------------------------- static plans
    def selection_specs(self, budget: Budget) -> list[TrialSpec]:
        """The selection trials, in launch order.  For tpe the configs are not
        known yet: the specs carry keys only and are filled by `TpeSource`."""
        out = per_fold(REGISTRY[self.family].plan(self, budget), budget.folds_for(self.grid))
        for sp in out:
            sp.strategy, sp.family, sp.repeat = self.name, self.family, self.repeat
        return out

    def grace_period(self, budget: Budget) -> int:
        g = self.options.asha_grace_period
        return int(g) if g is not None else max(1, round(0.1 * budget.epochs(self.grid)))

    def describe(self, budget: Budget) -> dict[str, Any]:
        """Sweep-run params of the arm's selection phase."""
        out: dict[str, Any] = {Param.FAMILY: self.family, Param.REPEAT: self.repeat, Param.SEARCH_SEED: self.seed}
        out.update(REGISTRY[self.family].params(self, budget))
        return out

    def asha_rungs(self, budget: Budget) -> list[int]:
        return asha_milestones(self.grace_period(budget), self.options.asha_reduction_factor, budget.epochs(self.grid))


# ------------------------------------------------------------- the registry
# What differs between the families, one entry each: the grid searched,
# whether it runs --repeats times, the selection plan, the sweep params it
# adds, and how many selection trials it runs (validating its options).
# A new family is one more entry here (plus its Tune side in sweep.py when it
# needs one, as tpe's TpeSource and asha's scheduler).

@dataclass(frozen=True)
class Family:
    name: str
    grid: str  # the grid file it searches: "fixed" or "awnn"
    stochastic: bool  # runs `repeats` times with seeds seed, seed+1, ...
    plan: Callable[[Arm, Budget], list[TrialSpec]]  # the selection trials, in launch order
    params: Callable[[Arm, Budget], dict[str, Any]]  # sweep-run params beyond family/repeat/seed
    trials: Callable[["_Sizing"], int]  # selection trials (raises OptionError on bad options)
    order: str = "random"  # its selection trials' order for the analysis: "random" (a whole grid, no natural
    #                        order: curves average random orders) or "actual" (as they ran: sequential searches)
    stops_early: bool = False  # its scheduler stops trials on purpose (awnn.status=stopped)
    cross_validates: bool = True  # can run once per outer fold (a cross-validated protocol): a static plan, no
    #                               search state or scheduler shared across the folds' trials
    derived_from: str | None = None  # no selection of its own: its config comes from this family's arm (fixedplus: awnn)

    @property
    def fuses(self) -> bool:
        """May its selection trials be fused (`--fuse`, search/fusion.py)?  A whole
        grid with no launch order (`order` random) and no scheduler: the fixed grid."""
        return self.order == "random" and not self.stops_early and not self.derived_from

    def tags(self) -> dict[str, str]:
        """The sweep-run tags that tell the analysis how to read this family's
        trials (tracking contract: awnn.order, awnn.stops_early, awnn.depends_on)."""
        out = {Tag.ORDER: self.order, Tag.STOPS_EARLY: "true" if self.stops_early else "false"}
        if self.derived_from:
            out[Tag.DEPENDS_ON] = self.derived_from
        return out


@dataclass
class _Sizing:
    """What a family's `trials` needs: the options, the budget, the fixed
    grid, its own grid and the AWNN grid's size as the default trial count."""

    options: StrategyOptions
    budget: Budget
    fixed: Grid | None
    grid: Grid
    awnn_size: Callable[[str], int]
    family: str = ""

    def count(self, flag: str, value: int | None) -> int:
        n = self.awnn_size(flag) if value is None else value
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise OptionError(f"{flag}: expected an integer >= 1, found {n!r}")
        return n

    def distinct_configs(self, flag: str, value: int | None) -> int:
        """`count`, at most the fixed grid's configs: a family that trains each
        config once (random; tpe, search/tpe.py "Repeats")."""
        n = self.count(flag, value)
        if n > self.fixed.size:
            default = "" if value is not None else f" (its default: the AWNN grid's {n} configs)"
            raise OptionError(f"{flag}{default}: expected at most the fixed grid's {self.fixed.size} configs ({self.fixed.path}), found {n}"
                              + (f"; give {flag} {self.fixed.size} or fewer" if value is None else ""))
        return n


def _whole_grid(arm: Arm, budget: Budget) -> list[TrialSpec]:
    return selection_specs(arm.grid, budget)


def _random_plan(arm: Arm, budget: Budget) -> list[TrialSpec]:
    specs = selection_specs(arm.grid, budget)
    return [specs[i] for i in random.Random(arm.seed).sample(range(len(specs)), arm.trials)]


def _asha_plan(arm: Arm, budget: Budget) -> list[TrialSpec]:
    specs = selection_specs(arm.grid, budget)
    order = list(range(len(specs)))
    random.Random(arm.seed).shuffle(order)
    out = [specs[i] for i in order]
    report_at = arm.asha_rungs(budget)
    for sp in out:
        sp.report_at = report_at
    return out


def _tpe_plan(arm: Arm, budget: Budget) -> list[TrialSpec]:
    # the configs are not known yet: keys only, filled by TpeSource at suggest time
    return [TrialSpec(key=f"sel-{n:04d}", phase="selection", index=-1, config={}) for n in range(arm.trials)]


def _no_params(arm: Arm, budget: Budget) -> dict[str, Any]:
    return {}


def _trials_param(arm: Arm, budget: Budget) -> dict[str, Any]:
    return {f"{arm.family}_trials": arm.trials}


def _asha_params(arm: Arm, budget: Budget) -> dict[str, Any]:
    return {Param.ASHA_GRACE_PERIOD: arm.grace_period(budget), Param.ASHA_REDUCTION_FACTOR: arm.options.asha_reduction_factor,
            Param.ASHA_MAX_T: budget.epochs(arm.grid), Param.ASHA_RUNGS: ",".join(map(str, arm.asha_rungs(budget)))}


def _tpe_trials(z: _Sizing) -> int:
    w = z.options.tpe_window
    if w is not None and (not isinstance(w, int) or isinstance(w, bool) or w < 1):
        raise OptionError(f"--tpe-window: expected an integer >= 1, found {w!r}")
    return z.distinct_configs("--tpe-trials", z.options.tpe_trials)  # (no config trained twice: search/tpe.py, "Repeats")


def _fixedplus_trials(z: _Sizing) -> int:
    if z.options.fixedplus_widths not in FIXEDPLUS_WIDTHS:
        hint = difflib.get_close_matches(str(z.options.fixedplus_widths), FIXEDPLUS_WIDTHS, n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise OptionError(f"--fixedplus-widths: expected one of {list(FIXEDPLUS_WIDTHS)}, found {z.options.fixedplus_widths!r}{did}")
    if z.options.fixedplus_widths == "per-layer":
        from awnn.data import task_kind

        if task_kind(z.grid.task) != "tabular":
            raise OptionError(f"--fixedplus-widths per-layer: one width per layer exists for the tabular MLPs only; task {z.grid.task} is "
                              f"{task_kind(z.grid.task)} (use mean)")
    return 0  # no selection trials: the awnn arm's selection is its


def _fixedplus_params(arm: Arm, budget: Budget) -> dict[str, Any]:
    return {Param.FIXEDPLUS_WIDTHS: arm.options.fixedplus_widths}


def _random_trials(z: _Sizing) -> int:
    return z.distinct_configs("--random-trials", z.options.random_trials)


def _asha_trials(z: _Sizing) -> int:
    """Every config of the family's grid (asha: the fixed grid, awnn-asha: the AWNN grid), its ASHA options checked."""
    epochs = z.budget.epochs(z.grid)
    rf = z.options.asha_reduction_factor
    if not isinstance(rf, (int, float)) or isinstance(rf, bool) or not rf > 1:
        raise OptionError(f"--asha-reduction-factor: expected a number > 1, found {rf!r}")
    g = z.options.asha_grace_period
    if g is not None and (not isinstance(g, int) or isinstance(g, bool) or not 1 <= g < epochs):
        raise OptionError(f"--asha-grace-period: expected an integer from 1 to {epochs - 1} (the budget's {epochs} epochs), found {g!r}")
    if epochs < 2:
        raise OptionError(f"--strategies {z.family}: the budget {z.budget.name!r} trains {epochs} epoch per trial; ASHA needs at least 2")
    return z.grid.size


# registry order: the order options are validated in (tpe, asha, random as before)
REGISTRY: dict[str, Family] = {f.name: f for f in (
    Family("fixed", "fixed", False, _whole_grid, _no_params, lambda z: z.grid.size),
    Family("awnn", "awnn", False, _whole_grid, _no_params, lambda z: z.grid.size),
    Family("tpe", "fixed", True, _tpe_plan, _trials_param, _tpe_trials, order="actual", cross_validates=False),
    Family("random", "fixed", True, _random_plan, _trials_param, _random_trials, order="actual"),
    Family("asha", "fixed", True, _asha_plan, _asha_params, _asha_trials, order="actual", stops_early=True, cross_validates=False),
    Family("awnn-asha", "awnn", True, _asha_plan, _asha_params, _asha_trials, order="actual", stops_early=True, cross_validates=False),
    Family("fixedplus", "fixed", False, lambda arm, budget: [], _fixedplus_params, _fixedplus_trials, order="actual", derived_from="awnn"),
)}
FAMILIES = ("fixed", "awnn", "tpe", "asha", "random", "awnn-asha", "fixedplus")  # as the CLI lists them
FIXEDPLUS_WIDTHS = ("mean", "per-layer")
assert set(FAMILIES) == set(REGISTRY)
STOCHASTIC = tuple(name for name in FAMILIES if REGISTRY[name].stochastic)
GRID_OF = {name: REGISTRY[name].grid for name in FAMILIES}


def asha_milestones(grace: int, rf: float, max_t: int) -> list[int]:
    """The epochs at which ASHA compares trials (as Ray's AsyncHyperBand
    computes its rungs for one bracket: grace * rf**k below max_t)."""
    if grace >= max_t:
        return []
    n = int(math.log(max_t / grace) / math.log(rf) + 1)
    return sorted({int(math.ceil(grace * rf**k)) for k in range(n) if grace * rf**k < max_t})


def make_arms(task: str, families: list[str], options: StrategyOptions, budget: Budget, grid_dir: str | None = None) -> list[Arm]:
    """Validate the strategies and their options; one Arm per run, in run order."""
    for s in families:
        if s not in FAMILIES:
            hint = difflib.get_close_matches(s, FAMILIES, n=1)
            did = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise OptionError(f"--strategies: expected a comma-separated subset of {list(FAMILIES)}, found {s!r}{did}")
    if not families:
        raise OptionError(f"--strategies: expected at least one of {list(FAMILIES)}, found none")
    if len(set(families)) != len(families):
        raise OptionError(f"--strategies: expected each strategy once, found {','.join(families)}")
    if not isinstance(options.repeats, int) or options.repeats < 1:
        raise OptionError(f"--repeats: expected an integer >= 1, found {options.repeats!r}")
    top = MAX_SEED - (options.repeats - 1)  # repeat k searches with seed+k-1
    if not isinstance(options.seed, int) or isinstance(options.seed, bool) or not 0 <= options.seed <= top:
        said = f" (with --repeats {options.repeats}: repeat k uses seed+k-1, at most {MAX_SEED})" if options.repeats > 1 else ""
        raise OptionError(f"--seed: expected an integer from 0 to {top}{said}, found {options.seed!r}")
    for s in families:
        source = REGISTRY[s].derived_from
        if source and (source not in families or families.index(source) > families.index(s)):
            raise OptionError(f"--strategies {s}: re-trains at the width the {source} arm learned; list {source} before it "
                              f"(e.g. --strategies {','.join([f for f in families if f != s] + ([] if source in families else [source]) + [s])})")
    grids = {g: find_grid(task, g, grid_dir) for g in sorted({GRID_OF[s] for s in families})}
    fixed = grids.get("fixed")
    check_protocol(task, families, grids, budget)

    def awnn_size(flag: str) -> int:
        try:
            return find_grid(task, "awnn", grid_dir).size
        except GridError as e:
            raise OptionError(f"{flag}: no default without an AWNN grid ({e}); give {flag} N") from None

    # every chosen family's options are checked, in registry order, before any arm is made
    sizes = {s: f.trials(_Sizing(options, budget, fixed, grids[f.grid], awnn_size, s)) for s, f in REGISTRY.items() if s in families}
    _check_total(families, sizes, grids, options, budget)
    arms: list[Arm] = []
    for s in families:
        grid = grids[GRID_OF[s]]
        if s not in STOCHASTIC:
            arms.append(Arm(s, s, 0, options.seed, grid, sizes[s], options))
            continue
        for k in range(1, options.repeats + 1):
            name = arm_name(s, k, options.repeats)
            arms.append(Arm(name, s, k, options.seed + k - 1, grid, sizes[s], options))
    return arms


# the most trials one comparison may plan (each a Ray trial and an MLflow run): two arms over the largest grid a file may
# hold (search.grid.MAX_GRID_CONFIGS) and their re-training.  Before, `retrain_runs: 100000000` in a budget file grew
# the driver to 6.8 GB in 40 s, planning them.
MAX_COMPARISON_TRIALS = 250_000


def _check_total(families: list[str], sizes: dict[str, int], grids: dict, options: StrategyOptions, budget: Budget) -> None:
    """Refuse, before any arm is made, a comparison of more than MAX_COMPARISON_TRIALS trials, naming what makes it up."""
    parts, total = [], 0
    for s in families:
        grid = grids[GRID_OF[s]]
        arms = options.repeats if s in STOCHASTIC else 1
        runs, folds = budget.runs(grid), budget.folds_for(grid)
        n = arms * (sizes[s] + runs) * folds
        total += n
        parts.append(f"{s}: {f'{arms:,} repeats x ' if arms > 1 else ''}({sizes[s]:,} selection + {runs:,} re-training)"
                     + (f" x {folds} folds" if folds > 1 else ""))
    if total > MAX_COMPARISON_TRIALS:
        raise OptionError(f"the comparison: expected at most {MAX_COMPARISON_TRIALS:,} trials in all (each a Ray trial and an MLflow "
                          f"run), found {total:,} ({'; '.join(parts)}); fewer --repeats, --tpe-trials or --random-trials, fewer "
                          f"grid points, or a budget with fewer retrain_runs (--budget {budget.name})")


def with_protocol(budget: Budget, protocol: str | None, task: str) -> Budget:
    """`budget` with the outer folds `--protocol` asks for (None: the budget's own)."""
    import dataclasses

    if protocol is None:
        return budget
    if protocol not in PROTOCOLS:
        hint = difflib.get_close_matches(protocol, list(PROTOCOLS), n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise OptionError(f"--protocol: expected one of {list(PROTOCOLS)}, found {protocol!r}{did}")
    from awnn.data import TASKS

    folds = PROTOCOLS[protocol]
    available = getattr(TASKS.get(task), "folds", 1)
    if folds > 1 and available != folds:
        with_folds = sorted(name for name, loader in TASKS.items() if getattr(loader, "folds", 1) == folds)
        raise OptionError(f"--protocol {protocol}: task {task} has one hold-out split; {protocol} applies to {', '.join(with_folds)}")
    return dataclasses.replace(budget, folds=folds)


def check_protocol(task: str, families: list[str], grids: dict[str, Grid], budget: Budget) -> None:
    """Every arm of a comparison assesses risk the same way, and a family
    that cannot run once per fold is refused under a cross-validated protocol."""
    folds = {g: budget.folds_for(grid) for g, grid in grids.items()}
    if len(set(folds.values())) > 1:
        raise OptionError(f"task {task}: the grids disagree on the outer folds ("
                          + ", ".join(f"{grids[g].path}: folds {n}" for g, n in sorted(folds.items()))
                          + "); give --protocol holdout or cv10 to run every arm the same way")
    n = next(iter(folds.values()), 1)
    if n > 1:
        refused = [s for s in families if not REGISTRY[s].cross_validates]
        if refused:
            raise OptionError(f"--strategies {','.join(refused)}: not available under the {protocol_name(n)} protocol "
                              f"(a sequential search or an early-stopping scheduler would mix the folds' trials); "
                              f"run them with --protocol holdout, or drop them")


def make_scheduler(arms: list[Arm], budget: Budget):
    """One Tune scheduler for the whole comparison: each ASHA arm's selection
    trials go through that arm's own AsyncHyperBand bracket; every other
    trial (other strategies, re-training runs) runs to its end, first in,
    first out.  None when no arm uses ASHA."""
    asha = [a for a in arms if REGISTRY[a.family].stops_early]
    if not asha:
        return None
    from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler

    class ArmScheduler(FIFOScheduler):
        def __init__(self):
            super().__init__()
            self.by_arm = {}
            self.added: set[str] = set()  # trial ids an arm's bracket was told about (it must not hear of others)
            for a in asha:
                metric, mode = a.metric()
                if metric == "best_val_loss":
                    metric = "val_loss"  # per-epoch records carry the latest loss, not the best
                self.by_arm[a.name] = AsyncHyperBandScheduler(
                    time_attr="epoch", metric=metric, mode=mode, max_t=budget.epochs(a.grid),
                    grace_period=a.grace_period(budget), reduction_factor=a.options.asha_reduction_factor, brackets=1)

        def _sub(self, trial):
            spec = trial.config.get("spec") or {}
            return self.by_arm.get(spec.get("strategy")) if spec.get("phase") == "selection" else None

        def set_search_properties(self, metric, mode, **spec) -> bool:
            return True

        def on_trial_add(self, tune_controller, trial):
            sub = self._sub(trial)
            if sub is not None:
                sub.on_trial_add(tune_controller, trial)
                self.added.add(trial.trial_id)

        def on_trial_result(self, tune_controller, trial, result):
            sub = self._sub(trial)
            return sub.on_trial_result(tune_controller, trial, result) if sub is not None else self.CONTINUE

        def on_trial_complete(self, tune_controller, trial, result):
            sub = self._sub(trial)
            if sub is not None and trial.trial_id in self.added:
                self.added.discard(trial.trial_id)
                sub.on_trial_complete(tune_controller, trial, result)

        def on_trial_error(self, tune_controller, trial):
            self.on_trial_remove(tune_controller, trial)

        def on_trial_remove(self, tune_controller, trial):
            sub = self._sub(trial)
            if sub is not None and trial.trial_id in self.added:
                self.added.discard(trial.trial_id)
                sub.on_trial_remove(tune_controller, trial)

        def debug_string(self) -> str:
            return "; ".join(f"{k}: {v.debug_string()}" for k, v in self.by_arm.items())

    return ArmScheduler()

