"""The paper's protocol: model selection on the inner split, then risk
assessment by R re-training runs of the selected config on the outer split.

* Selection: every grid config is trained once (seed 0; 1000 x the budget's
  `train_seed` with `--train-seed`) on the inner train
  part (90% of outer train+validation) and scored on the inner validation
  part (10%).
* The selected config has the highest inner validation accuracy.  Ties are
  broken deterministically: lower inner validation loss, then the earlier
  grid position (file order, last key fastest).  Grids that select on loss
  (`select_metric: loss`, the translation task) rank by the lowest inner
  validation loss first.  Trials that diverged or
  failed are never selected; their cost still counts.
* Assessment: the selected config is re-trained R times (seeds 1..R, offset
  by the same 1000 x `train_seed`) on the
  outer train part, the epoch is chosen by outer validation accuracy, and
  the test accuracy at that epoch is reported as mean and sample standard
  deviation (ddof=1) over the R runs that finished.

Cross-validated risk assessment (`folds` > 1: the graph tasks under the
`paper` budget or `--protocol cv10`, as Errica et al. 2020): every outer
fold k runs its own selection (the grid on fold k's inner 90/10 hold-out)
and re-trains the config selected for it R times on fold k's outer
training part; the test accuracy is the mean over folds of each fold's
mean (std over the folds' means).  Trial keys carry the fold (`f3-sel-0007`,
`f3-ass-01`, tracking.contract.fold_key); costs add up over all folds.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
import math
from typing import Any, Iterable, Mapping

from tracking.contract import SELECTABLE, assessment_summary, fold_key, fold_of_key

from .budget import Budget
from .grid import Grid

__all__ = ["TrialSpec", "selection_specs", "assessment_specs", "select_best", "summarize_assessment", "single_run_config", "SELECTABLE",
           "PROTOCOLS", "protocol_name", "per_fold", "select_by_fold", "fold_assessment_specs", "most_selected"]

PROTOCOLS = {"holdout": 1, "cv10": 10}  # --protocol: the outer folds of the risk assessment


def protocol_name(folds: int) -> str:
    """`holdout` (one outer split) or `cv<k>` (k outer folds)."""
    return "holdout" if folds == 1 else f"cv{folds}"


@dataclass
class TrialSpec:
    """One trial: a stable key (phase + grid index [+ seed]) and its config."""

    key: str
    phase: str  # selection | assessment
    index: int  # position in the grid (selection) or re-training run number
    config: dict[str, Any]
    strategy: str = ""  # the arm: a strategy's name, or `<strategy>.r<k>` for repeats (search/strategies.py)
    family: str = ""  # the strategy: fixed | awnn | tpe | asha | random
    repeat: int = 0  # 1..N for repeated stochastic strategies, else 0
    resume_from: str | None = None  # a checkpoint dir left by an earlier driver
    report_at: list[int] = field(default_factory=list)  # epochs that are always reported at once (ASHA's rungs)
    members: list["TrialSpec"] = field(default_factory=list)  # a fused group's configs (search/fusion.py); empty: one config
    done: list[str] = field(default_factory=list)  # a fused group's members an earlier driver finished (not run again)

    @property
    def sweep(self) -> str:
        return f"{self.strategy}/{self.phase}"

    @property
    def name(self) -> str:
        return f"{self.strategy}-{self.key}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _protocol_values(grid: Grid, budget: Budget, split: str, seed: int, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Split, epochs, patience and seeds of a trial (its training seed: the
    budget's `seed(seed)`, `seed` 0 for selection, r for re-training run r,
    offset by 1000 x the budget's train_seed;
    its data seed 0: every trial sees the same split); the epochs (and patience)
    are the budget's scaling of the config's own paper epochs, which differ
    by hidden_layers where the grid says so (`epochs_by_hidden_layers`)."""
    if config is not None and grid.epochs_by_hidden_layers:
        grid = dataclasses.replace(grid, epochs=grid.epochs_for(dict(config)))
    return {"split": split, "epochs": budget.epochs(grid), "patience": budget.patience(grid), "seed": budget.seed(seed), "data_seed": 0}


def _scale_milestones(cfg: dict[str, Any], grid: Grid, epochs: int) -> dict[str, Any]:
    """Training shortened (a budget) or set (`awnn train --epochs`) to `epochs`
    shortens the LR schedule with it: milestones at 50/100/150 of 200 paper
    epochs become 25%/50%/75% of `epochs` (rounded, at least 1, strictly
    increasing)."""
    text = str(cfg.get("lr_milestones") or "").strip()
    if not text or epochs == grid.epochs:
        return cfg
    out: list[int] = []
    for m in (int(v) for v in text.split(",")):
        v = max(1, round(m * epochs / grid.epochs))
        if not out or v > out[-1]:
            out.append(v)
    return {**cfg, "lr_milestones": ",".join(map(str, out))}


def budget_config(cfg: Mapping[str, Any], grid: Grid, budget: Budget) -> dict[str, Any]:
    """A grid config as `budget` trains it: the grid's `cpu` values on a CPU
    budget, the LR milestones scaled with the budget's epochs."""
    return _scale_milestones({**cfg, **budget.cpu_values(grid)}, grid, budget.epochs(grid))


def selection_specs(grid: Grid, budget: Budget) -> list[TrialSpec]:
    return [
        TrialSpec(key=f"sel-{i:04d}", phase="selection", index=i,
                  config={**budget_config(cfg, grid, budget), **_protocol_values(grid, budget, "inner", 0, cfg)})
        for i, cfg in enumerate(grid.configs())
    ]


def assessment_specs(config: Mapping[str, Any], grid: Grid, budget: Budget) -> list[TrialSpec]:
    base = {k: v for k, v in config.items() if k not in ("split", "epochs", "patience", "seed", "data_seed")}
    return [
        TrialSpec(key=f"ass-{r:02d}", phase="assessment", index=r, config={**base, **_protocol_values(grid, budget, "outer", r, base)})
        for r in range(1, budget.runs(grid) + 1)
    ]


def per_fold(specs: list[TrialSpec], folds: int) -> list[TrialSpec]:
    """The selection trials of every outer fold, fold by fold (keys
    `f<k>-...`, config `fold: k`); `specs` unchanged under a hold-out."""
    if folds == 1:
        return specs
    return [dataclasses.replace(sp, key=fold_key(k, sp.key), config={**sp.config, "fold": k}, report_at=list(sp.report_at))
            for k in range(folds) for sp in specs]


def select_by_fold(outcomes: Iterable[Mapping[str, Any]]) -> dict[int | None, Mapping[str, Any]]:
    """The selected trial of each outer fold (the key None: the hold-out's
    one selection); a fold none of whose trials can be selected is absent."""
    groups: dict[int | None, list[Mapping[str, Any]]] = {}
    for o in outcomes:
        groups.setdefault(fold_of_key(o.get("key", "")), []).append(o)
    out = {}
    for fold in sorted(groups, key=lambda f: -1 if f is None else f):
        best = select_best(groups[fold])
        if best is not None:
            out[fold] = best
    return out


def fold_assessment_specs(selected: Mapping[int | None, Mapping[str, Any]], grid: Grid, budget: Budget) -> list[TrialSpec]:
    """The re-training trials of every fold's selected config (keys `f<k>-ass-<r>`)."""
    out: list[TrialSpec] = []
    for fold, best in selected.items():
        for sp in assessment_specs(best["config"], grid, budget):
            out.append(dataclasses.replace(sp, key=fold_key(fold, sp.key)))
    return out


def most_selected(selected: Mapping[int | None, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The one config a cross-validated arm reports as "selected": the one
    most folds selected (ties: the lowest fold's), as its fold's trial."""
    if not selected:
        return None
    def identity(o):
        return json.dumps({k: v for k, v in (o.get("config") or {}).items() if k != "fold"}, sort_keys=True, default=str)
    counts: dict[str, int] = {}
    for o in selected.values():
        counts[identity(o)] = counts.get(identity(o), 0) + 1
    top = max(counts.values())
    return next(o for o in selected.values() if counts[identity(o)] == top)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def select_best(outcomes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The selected trial (see module docstring for the tie-breaking), or None
    when no trial finished with a usable validation score."""
    candidates = [o for o in outcomes if o.get("status") in SELECTABLE and _finite(o.get("best_val_acc"))]
    if not candidates:
        return None

    def key(o):
        loss = o["best_val_loss"] if _finite(o.get("best_val_loss")) else math.inf
        if (o.get("config") or {}).get("select_metric") == "loss":  # e.g. translation: lower loss is better
            return (loss, -o["best_val_acc"], o["index"])
        return (-o["best_val_acc"], loss, o["index"])

    return min(candidates, key=key)


def summarize_assessment(outcomes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """test_acc_mean, test_acc_std, runs_ok of the re-training runs (tracking.contract.assessment_summary)."""
    ok = [o for o in outcomes if o.get("status") in SELECTABLE and _finite(o.get("test_acc"))]
    return assessment_summary([o["test_acc"] for o in ok], folds=[fold_of_key(o.get("key", "")) for o in ok])


def single_run_config(grid: Grid, budget: Budget, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The config `awnn train` trains for the task and model of `grid`: what
    the grid fixes (optimiser, learning rate, weight decay, schedule, batch
    size, starting rate, ...), the first value of each key it searches, and
    the CPU budget's `cpu` values (quick, smoke), the epochs and patience a
    trial of that config gets under `budget`
    (milestones scaled with them, as in a sweep); `overrides` (the command
    line) win over all of it.  Epochs given in `overrides` scale the grid's
    milestones to them by the same rule, unless `overrides` sets the
    milestones too.  Split, seed and data are TrainConfig's defaults unless
    overridden."""
    cfg = {**grid.configs()[0], **budget.cpu_values(grid), **overrides}
    if "epochs" not in overrides:
        cfg = _scale_milestones(cfg, grid, budget.epochs(grid)) if "lr_milestones" not in overrides else cfg
        values = _protocol_values(grid, budget, "outer", 0, cfg)
        cfg["epochs"] = values["epochs"]
        if "patience" not in overrides:
            cfg["patience"] = values["patience"]
    elif "lr_milestones" not in overrides:
        try:
            epochs = int(overrides["epochs"])  # from --set: a string (TrainConfig reports one that is no integer)
        except (TypeError, ValueError):
            return cfg
        if epochs >= 1:
            cfg = _scale_milestones(cfg, grid, epochs)
    return cfg
