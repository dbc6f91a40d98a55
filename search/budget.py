"""Budgets: how many epochs and re-training runs a sweep spends.

`paper` is the paper's protocol (each grid's epochs, R = retrain_runs from
the grid, 10 in the paper).  `quick` scales epochs to a CPU budget: at most
30 epochs a trial, a demonstration rather than a verdict (`make demo`,
SpiralHard's seven strategies: its comparison took under 5 minutes on 2
cores; docs/results.md).  `standard`
(150 epochs a trial on every tabular task, R = 3: 0.3 of the paper's
epochs, at most 150) is the smallest budget at which both SpiralHard arms'
selections plateaued, and at which AWNN came within a point of the grid on
Spiral and DoubleMoon too (measured: docs/results.md, "A converged
budget").  `smoke`
runs a couple of epochs per trial, for tests.  A budget can also be a YAML
file with the same keys:

    epoch_scale: 0.06      # epochs = round(grid epochs * scale) ...
    min_epochs: 20         # ... clipped to [min_epochs, max_epochs]
    max_epochs: 300
    retrain_runs: 3        # R; omit to use the grid's (the paper's 10)
    patience_scale: 0.06   # early-stopping patience scaled like epochs (0 = off)
    folds: 1               # outer folds of the risk assessment: 1 = the hold-out
                           #   split; omit to use the grid's (the graph grids: 10)
    cpu: true              # use the grids' `cpu` values (smaller training sets, a
                           #   smaller Transformer: what a CPU can train); default false
    train_seed: 0          # the draw of the trials' training: selection trials train
                           #   with seed 1000 x train_seed, re-training run r with
                           #   1000 x train_seed + r (default 0: seeds 0 and 1..R)

`train_seed` (also `awnn compare --train-seed S`) re-runs a comparison
with other initialisations and batch orders on the same data: a
learned width can part between two seeds (or two CPUs' float rounding),
so one comparison's savings ratio is one draw (docs/results.md, "How far
a seed moves the standard verdict").  Draws S apart by 1000 seeds share
none (R <= 999), so draws 1, 2, 3 are independent repeats of draw 0.

`quick` and `smoke` are CPU budgets: they train with each grid's `cpu`
values (MNIST/CIFAR: 5,000 training images; Multi30k: a 2+2-layer
Transformer of width 256 on 5,000 sentence pairs; the tabular tasks and
digits have none), which the report's header and the sweep runs' `cpu`
param state; `paper` trains the paper's setup.

`paper` uses each grid's `folds` (the graph tasks: the 10-fold protocol of
Errica et al. 2020, R re-training runs per fold); `quick` and `smoke` keep
one hold-out split.  `--protocol holdout|cv10` overrides either.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


from .errors import BudgetError
from .yamlfile import read_yaml_file
from .grid import Grid

__all__ = ["Budget", "BUDGETS", "SEED_STRIDE", "TRAIN_SEED_MAX", "resolve_budget"]

# draw S trains with seeds SEED_STRIDE x S + (0, 1..R): no two draws share a seed while R < SEED_STRIDE
SEED_STRIDE = 1000
# the largest train_seed: its last re-training seed, SEED_STRIDE x S + SEED_STRIDE - 1, is at most awnn.config.MAX_SEED (2**32 - 1)
TRAIN_SEED_MAX = (2**32 - 1 - (SEED_STRIDE - 1)) // SEED_STRIDE


@dataclass(frozen=True)
class Budget:
    name: str
    epoch_scale: float = 1.0
    min_epochs: int = 1
    max_epochs: int = 1_000_000
    retrain_runs: int | None = None  # None: the grid's
    patience_scale: float = 1.0
    folds: int | None = None  # None: the grid's (search/grid.py `folds`)
    cpu: bool = False  # train with the grids' `cpu` values (search/grid.py)
    train_seed: int = 0  # the draw: selection trials train with seed SEED_STRIDE x train_seed, re-training run r with that + r

    def seed(self, offset: int) -> int:
        """The training seed of a trial: `offset` 0 for a selection trial, r for
        re-training run r (at most SEED_STRIDE - 1 under a train_seed, so that
        two draws never share a seed)."""
        if self.train_seed and not 0 <= offset < SEED_STRIDE:
            raise BudgetError(f"budget {self.name}: with train_seed {self.train_seed}, at most {SEED_STRIDE - 1} re-training runs "
                              f"(their seeds must stay within the draw's {SEED_STRIDE}), found run {offset}")
        return SEED_STRIDE * self.train_seed + offset

    def check_seeds(self, grid: Grid) -> None:
        """Refuse, before anything runs, a draw whose re-training runs of `grid` would leave its seeds."""
        if self.train_seed:
            self.seed(self.runs(grid))

    def check_folds(self, task: str, source: str) -> None:
        """A budget file's `folds` (`source`: the file) must be 1 or task `task`'s own outer folds, as a grid's must
        (search/grid.py; before, `folds: 10` on a hold-out task ended in an AttributeError from the data check)."""
        from .grid import folds_refused

        expected = folds_refused(task, self.folds) if self.folds is not None else None
        if expected:
            raise BudgetError(f"{source}: key 'folds': expected {expected}, found {self.folds}")

    def with_train_seed(self, seed: int | None) -> "Budget":
        """This budget with `--train-seed seed` (None: unchanged), checked so that
        every seed of the draw stays a valid seed (TRAIN_SEED_MAX)."""
        import dataclasses

        if seed is None:
            return self
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= TRAIN_SEED_MAX:
            raise BudgetError(f"--train-seed: expected an integer from 0 to {TRAIN_SEED_MAX}, found {seed!r}")
        return dataclasses.replace(self, train_seed=seed)

    def epochs(self, grid: Grid) -> int:
        e = round(grid.epochs * self.epoch_scale)
        return int(min(self.max_epochs, max(self.min_epochs, e, 1)))

    def patience(self, grid: Grid) -> int:
        if not grid.patience or not self.patience_scale:
            return 0
        return max(1, math.ceil(grid.patience * self.patience_scale))

    def runs(self, grid: Grid) -> int:
        return self.retrain_runs if self.retrain_runs is not None else grid.retrain_runs

    def folds_for(self, grid: Grid) -> int:
        """Outer folds of the grid's risk assessment under this budget (1: hold-out)."""
        return self.folds if self.folds is not None else grid.folds

    def cpu_values(self, grid: Grid) -> dict[str, Any]:
        """The config values this budget changes in the grid's configs (its `cpu` section on a CPU budget)."""
        return dict(grid.cpu) if self.cpu else {}

    def to_dict(self) -> dict[str, Any]:
        """The budget's scaling (the comparison run's `budget` param and part of
        the --resume key).  The folds are not in it: the comparison records its
        protocol on its own (`protocol`, and `folds` in the --resume key when > 1),
        and so does `cpu` (the sweep runs' `cpu` param; in the key when a grid has
        `cpu` values), so budgets keep their keys where neither applies.
        `train_seed` is in it only when not 0, for the same reason."""
        out = asdict(self)
        out.pop("folds")
        out.pop("cpu")
        if not out["train_seed"]:
            out.pop("train_seed")
        return out


BUDGETS = {
    "smoke": Budget("smoke", epoch_scale=0.0, min_epochs=2, max_epochs=2, retrain_runs=2, patience_scale=0.0, folds=1, cpu=True),
    # max 30 epochs (was 120, then 60): `make demo`'s seven strategies in under 5 minutes on 2 cores (issue #30;
    # measured 4 min 56 s, docs/results.md); the verdict at a converged budget is `standard`'s
    "quick": Budget("quick", epoch_scale=0.06, min_epochs=20, max_epochs=30, retrain_runs=3, patience_scale=0.06, folds=1, cpu=True),
    # the smallest per-trial budget at which both SpiralHard arms' selections plateau (issue #30): measured
    # with 300 epochs a trial, AWNN's best inner-validation accuracy was 83% at 38 epochs, 95.5% at 75 and
    # 100% at 150 and 300; the fixed grid's 99.6% at 38 and 100% from 75 (docs/results.md, "A converged budget").
    # 150 epochs on every tabular grid (scale 0.3 of the paper's 500-10,000): with 0.03 Spiral got 30 epochs,
    # where AWNN tested at 91.5% against the grid's 97.9%; at 150, 99.1% against 99.9% (DoubleMoon: 100% both)
    "standard": Budget("standard", epoch_scale=0.3, min_epochs=20, max_epochs=150, retrain_runs=3, patience_scale=0.3, folds=1, cpu=True),
    "paper": Budget("paper"),
}

_KEYS = {
    "epoch_scale": (float, "a number >= 0"),
    "min_epochs": (int, "an integer >= 1"),
    "max_epochs": (int, "an integer >= 1"),
    "retrain_runs": (int, "an integer >= 1"),
    "patience_scale": (float, "a number >= 0"),
    "folds": (int, "an integer >= 1"),
    "cpu": (bool, "true or false"),
    "train_seed": (int, f"an integer from 0 to {TRAIN_SEED_MAX}"),
}
_LOWEST = {"train_seed": 0}  # the integer keys whose lowest value is not 1


def resolve_budget(name_or_path: str) -> Budget:
    """A built-in budget by name, or a YAML budget file."""
    if name_or_path in BUDGETS:
        return BUDGETS[name_or_path]
    path = Path(name_or_path)
    if not path.suffix in (".yaml", ".yml") and not path.exists():
        raise BudgetError(f"--budget: expected one of {sorted(BUDGETS)} or a YAML file, found {name_or_path!r}")
    if path.is_dir():
        raise BudgetError(f"--budget {name_or_path}: expected a YAML file, found a folder")
    data = read_yaml_file(path, "budget", BudgetError)
    if not isinstance(data, dict):
        raise BudgetError(f"{path}: expected a mapping with keys {list(_KEYS)}, found {type(data).__name__}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _KEYS:
            raise BudgetError(f"{path}: unknown key {key!r}; expected one of {list(_KEYS)}")
        typ, expected = _KEYS[key]
        if typ is bool:
            if not isinstance(value, bool):
                raise BudgetError(f"{path}: key {key!r}: expected {expected}, found {value!r}")
            values[key] = value
            continue
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
              and (typ is float or float(value).is_integer()))
        if not ok or value < (0 if typ is float else _LOWEST.get(key, 1)):  # NaN and infinities are never ok
            raise BudgetError(f"{path}: key {key!r}: expected {expected}, found {value!r}")
        values[key] = typ(value)
    if values.get("train_seed", 0) > TRAIN_SEED_MAX:
        raise BudgetError(f"{path}: key 'train_seed': expected {_KEYS['train_seed'][1]}, found {values['train_seed']!r}")
    if values.get("min_epochs", 1) > values.get("max_epochs", 1_000_000):
        raise BudgetError(f"{path}: key 'max_epochs': expected a value >= min_epochs={values['min_epochs']}, found {values['max_epochs']!r}")
    return Budget(name=path.stem, **values)


assert {f.name for f in fields(Budget)} - {"name"} == set(_KEYS)
