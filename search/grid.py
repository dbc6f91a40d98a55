"""Declarative grids: load, validate and expand `search/grids/*.yaml`.

A grid file::

    task: spiralhard          # a registered task
    strategy: fixed           # fixed | awnn (the strategies that expand a grid)
    description: ...          # optional
    epochs: 5000              # the paper's epochs; budgets scale them
    epochs_by_hidden_layers:  # optional: other epochs for configs with these
      2: 10000                #   hidden_layers (the authors' SpiralHard budgets)
    patience: 0               # optional early-stopping patience (paper's)
    retrain_runs: 10          # R re-training runs of the selected config
    folds: 10                 # optional: the paper's risk assessment is a k-fold
                              #   cross-validation (graph tasks; default 1, a hold-out)
    fixed:                    # TrainConfig values shared by every config
      model: fixed
    grid:                     # TrainConfig keys -> non-empty lists; cartesian product
      width: [8, 16, 24, 128, 256]
    cpu:                      # optional: TrainConfig values the CPU budgets (quick, smoke)
      max_train_examples: 5000  #   use instead of the paper's (the large real datasets;
                              #   keys not searched by `grid`); `paper` ignores them

Every problem raises GridError with one line naming the file, the key, what
was expected and what was found; nothing is launched before a grid loads.
"""
from __future__ import annotations

import difflib

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from .errors import GridError  # noqa: F401 - defined in search/errors.py, raised here
from .yamlfile import read_yaml_file

from awnn.config import ConfigError, TrainConfig
from awnn.data import task_kind

__all__ = ["Grid", "GridError", "load_grid", "discover_grids", "find_grid", "grid_folder", "GRID_DIR", "GRID_STRATEGIES"]

GRID_DIR = Path(__file__).parent / "grids"
GRID_STRATEGIES = ("fixed", "awnn")
TOP_KEYS = {
    "task": "a task name",
    "strategy": f"one of {list(GRID_STRATEGIES)}",
    "description": "a string",
    "epochs": "an integer >= 1",
    "epochs_by_hidden_layers": "a mapping of hidden_layers (integer >= 0) to epochs (integer >= 1)",
    "patience": "an integer >= 0",
    "retrain_runs": "an integer >= 1",
    "folds": "an integer >= 1 (outer folds of the risk assessment; > 1 only for tasks with folds)",
    "fixed": "a mapping of config keys to values",
    "grid": "a mapping of config keys to non-empty lists",
    "cpu": "a mapping of config keys to values the CPU budgets use (keys not under grid)",
}
REQUIRED = ("task", "strategy", "epochs", "grid")
# keys a grid may not set: they belong to the protocol and the budget
# the most configs a grid file may expand to: each is a Ray trial and an MLflow run (the paper's largest grid: 180).
# Before, a grid of 3e9 points was expanded in memory (22 GB and still going, `awnn grids`) before anything was said.
MAX_GRID_CONFIGS = 100_000
PROTOCOL_KEYS = ("split", "epochs", "patience", "seed", "task", "device", "threads", "data_root")




@dataclass
class Grid:
    path: Path
    task: str
    strategy: str
    epochs: int
    grid: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    patience: int = 0
    retrain_runs: int = 10
    folds: int = 1  # outer folds of the paper's risk assessment (1: the hold-out split)
    cpu: dict[str, Any] = field(default_factory=dict)  # config values of the CPU budgets (search/budget.py `cpu`)
    epochs_by_hidden_layers: dict[int, int] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)  # "fixed.<key>"/"cpu.<key>" -> why it changes no config (a driver's note)

    def epochs_for(self, config: dict[str, Any]) -> int:
        """The paper's epochs for one config (`epochs`, or its hidden_layers' entry)."""
        return self.epochs_by_hidden_layers.get(config.get("hidden_layers"), self.epochs)

    @property
    def size(self) -> int:
        n = 1
        for values in self.grid.values():
            n *= len(values)
        return n

    def configs(self) -> list[dict[str, Any]]:
        """The grid's points in a fixed order (keys in file order, last key fastest)."""
        keys = list(self.grid)
        out = []
        for values in itertools.product(*(self.grid[k] for k in keys)):
            out.append({"task": self.task, **self.fixed, **dict(zip(keys, values))})
        return out

    def digest(self) -> str:
        """Short hash of the grid's content: identifies 'the same sweep' for --resume
        (where the data lives, `data_root`, is not part of it)."""
        fixed = {k: v for k, v in self.fixed.items() if k != "data_root"}
        content = {"task": self.task, "strategy": self.strategy, "epochs": self.epochs, "patience": self.patience,
                   "retrain_runs": self.retrain_runs, "fixed": fixed, "grid": self.grid}
        if self.cpu:  # (absent for grids without it: their digest as before the key existed)
            content["cpu"] = self.cpu
        if self.folds != 1:  # (absent for hold-out grids: their digest as before the key existed)
            content["folds"] = self.folds
        if self.epochs_by_hidden_layers:  # (absent: the digest of grids written before the key existed)
            content["epochs_by_hidden_layers"] = {str(k): v for k, v in sorted(self.epochs_by_hidden_layers.items())}
        body = json.dumps(content, sort_keys=True)
        return hashlib.sha1(body.encode()).hexdigest()[:10]


def _fail(path: Path | str, key: str, expected: str, found: Any) -> GridError:
    return GridError(f"{path}: key {key!r}: expected {expected}, found {found!r}")


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    return grid_from_dict(read_yaml_file(path, "grid", GridError), path)


def grid_from_dict(data: Any, path: str | Path = "<grid>") -> Grid:
    if not isinstance(data, dict):
        raise GridError(f"{path}: expected a mapping with keys {list(TOP_KEYS)}, found {type(data).__name__}")
    for key in data:
        if key not in TOP_KEYS:
            raise GridError(f"{path}: unknown key {key!r}{_did_you_mean(key, TOP_KEYS)}; expected one of {list(TOP_KEYS)}")
    for key in REQUIRED:
        if key not in data:
            raise GridError(f"{path}: missing key {key!r}: expected {TOP_KEYS[key]}")
    task, strategy, description, ints, by_layers = _top_level(data, path)
    fixed, grid, cpu = _sections(data, path)

    # every value on its own, then every combination, through TrainConfig's checks
    base = {"task": task, **fixed}
    _check(path, "fixed", base)
    for key, values in grid.items():
        for v in values:
            if isinstance(v, (list, dict)):
                raise _fail(path, f"grid.{key}", "scalar values", v)
            _check(path, f"grid.{key}", {**base, key: v}, only=key)
        if len(set(map(repr, values))) != len(values):
            raise _fail(path, f"grid.{key}", "distinct values", values)
    if cpu:
        _check(path, "cpu", {**base, **cpu})
    size = math.prod(len(values) for values in grid.values())
    if size > MAX_GRID_CONFIGS:
        lists = " x ".join(f"{len(values)} {key}" for key, values in grid.items())
        raise _fail(path, "grid", f"at most {MAX_GRID_CONFIGS:,} configs (the product of its lists' lengths: each is a trial "
                    f"and an MLflow run); search fewer values, or split it into several grids", f"{size:,} ({lists})")
    g = Grid(path=Path(path), task=task, strategy=strategy, epochs=ints["epochs"], grid=grid, fixed=fixed,
             description=description, patience=ints["patience"], retrain_runs=ints["retrain_runs"], folds=ints["folds"], cpu=dict(cpu), epochs_by_hidden_layers=dict(by_layers))
    points = g.configs()
    configs, on_cpu = [], []
    for i, cfg in enumerate(points):
        configs.append(_check(path, f"grid point {i}", cfg))
        if cpu:
            on_cpu.append(_check(path, f"grid point {i} with cpu", {**cfg, **cpu}))
    for variant, where in ((configs, ""), (on_cpu, " with its cpu values (the CPU budgets')")):
        twin = _first_twin(variant, task_kind(task))
        if twin is not None:
            raise _twins(path, g, points, variant, *twin, where=where)
    g.idle = _idle(fixed, configs, "fixed", task) | _idle(cpu, on_cpu, "cpu", task)
    return g


def _idle(section: dict, configs: list[TrainConfig], name: str, task: str) -> dict[str, str]:
    """The keys of a `fixed` or `cpu` section that change nothing in any of the grid's configs, with why: harmless (every
    config has the same value), but not what the file's writer meant, so a driver says so (search/sweep.py)."""
    kind = task_kind(task)
    out = {}
    for key in section:
        if key != "model" and configs and all(c.unused_reason(key, kind) for c in configs):
            out[f"{name}.{key}"] = configs[0].unused_reason(key, kind)
    return out


def _first_twin(configs: list[TrainConfig], kind: str) -> tuple[int, int, int] | None:
    """(i, j, n): the first grid point j that trains the same network as an earlier one, i (the keys that apply to
    them are equal: TrainConfig.applicable), and how many different networks the grid trains; None where none."""
    seen: dict[str, int] = {}
    twin = None
    for j, config in enumerate(configs):
        trains = repr(sorted(config.applicable(kind).items()))
        if trains not in seen:
            seen[trains] = j
        elif twin is None:
            twin = (seen[trains], j)
    return None if twin is None else (*twin, len(seen))


def _twins(path, g: Grid, points: list[dict], configs: list[TrainConfig], i: int, j: int, different: int, where: str = "") -> GridError:
    """Grid points i and j train the same network: each such point would be a trial that costs as much as a real one,
    and a fixed grid's cost is the baseline of every savings ratio.  Said of the grid's keys that change nothing in any
    of its configs (all of them, with why), else of the keys that tell i and j apart."""
    kind = task_kind(g.task)
    never = {k: configs[0].unused_reason(k, kind) for k in g.grid if all(c.unused_reason(k, kind) for c in configs)}
    if never:
        said = "; ".join(f"{k}: {why}" if len(never) > 1 else why for k, why in never.items())
        return GridError(f"{path}: key 'grid.{next(iter(never))}': expected keys that change the network trained, found "
                         f"{', '.join(never)}, which change{'s' if len(never) == 1 else ''} nothing in any config of this grid{where} "
                         f"({said}); its {g.size:,} configs are {_networks(different)}, each trained as a trial that "
                         f"costs as much: remove {', '.join(never)} from grid")
    keys = [k for k in g.grid if repr(points[i][k]) != repr(points[j][k])]
    values = " and ".join(f"{k} ({points[i][k]!r} and {points[j][k]!r})" for k in keys)
    unused = {k: configs[i].unused_reason(k, kind) for k in keys if configs[i].unused_reason(k, kind)}
    what = (f"which change nothing in them ({'; '.join(f'{k}: {why}' for k, why in unused.items())})" if unused
            else "the same values once read")
    return GridError(f"{path}: key 'grid.{(list(unused) or keys)[0]}': expected values that change the network trained, found "
                     f"grid points {i} and {j}{where} that differ only in {values}, {what}: they would train the same network twice; "
                     f"the grid's {g.size:,} configs are {_networks(different)}, each trained as a trial that costs as "
                     f"much: {'split the grid so that these keys vary only where they apply' if unused else 'write each value once'}")


def _networks(n: int) -> str:
    return "one network" if n == 1 else f"{n:,} different networks"


def folds_refused(task: str, folds: int) -> str | None:
    """What outer folds task `task` takes, where `folds` is not among them (a grid's or a budget's `folds`); else None."""
    from awnn.data import TASKS

    task_folds = getattr(TASKS.get(task), "folds", 1)
    if folds == 1 or folds == task_folds:
        return None
    return f"1 (a hold-out) or {task_folds} (task {task}'s outer folds)" if task_folds > 1 else f"1 (task {task} has one hold-out split)"


def _did_you_mean(key: Any, choices) -> str:
    hint = difflib.get_close_matches(str(key), sorted(choices) if not isinstance(choices, dict) else list(choices), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def _top_level(data: dict, path) -> tuple[str, str, str, dict[str, int], dict]:
    """The grid file's top-level values, checked: task, strategy, description, the integers, epochs_by_hidden_layers."""
    from awnn.data import TASKS

    task = data["task"]
    if not isinstance(task, str) or task not in TASKS:
        raise _fail(path, "task", f"one of {sorted(TASKS)}", task)
    strategy = data["strategy"]
    if strategy not in GRID_STRATEGIES:
        raise _fail(path, "strategy", TOP_KEYS["strategy"], strategy)
    description = data.get("description", "") or ""
    if not isinstance(description, str):
        raise _fail(path, "description", "a string", description)
    ints = {}
    for key, minimum in (("epochs", 1), ("patience", 0), ("retrain_runs", 1), ("folds", 1)):
        value = data.get(key, {"patience": 0, "retrain_runs": 10, "folds": 1}.get(key))
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise _fail(path, key, f"an integer >= {minimum}", value)
        ints[key] = value

    expected = folds_refused(task, ints["folds"])
    if expected:
        raise _fail(path, "folds", expected, ints["folds"])
    if ints["folds"] > 1:
        for section in ("fixed", "grid"):
            if "fold" in (data.get(section) or {}):
                raise _fail(path, f"{section}.fold", f"no fold: with folds: {ints['folds']} the protocol trains every fold", "fold")

    by_layers = data.get("epochs_by_hidden_layers") or {}
    if not isinstance(by_layers, dict) or not all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 0 and isinstance(v, int) and not isinstance(v, bool) and v >= 1 for k, v in by_layers.items()
    ):
        raise _fail(path, "epochs_by_hidden_layers", TOP_KEYS["epochs_by_hidden_layers"], by_layers)
    return task, strategy, description, ints, by_layers


def _sections(data: dict, path) -> tuple[dict, dict, dict]:
    """The `fixed`, `grid` and `cpu` sections, checked key by key (not yet through TrainConfig)."""
    fixed = data.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise _fail(path, "fixed", TOP_KEYS["fixed"], fixed)
    grid = data["grid"]
    if not isinstance(grid, dict) or not grid:
        raise _fail(path, "grid", TOP_KEYS["grid"], grid)
    known = set(TrainConfig.keys())
    for section, mapping in (("fixed", fixed), ("grid", grid)):
        for key, value in mapping.items():
            if key not in known:
                raise _fail(path, f"{section}.{key}", f"a config key{_did_you_mean(key, known)}", key)
            if key in PROTOCOL_KEYS:
                raise _fail(path, f"{section}.{key}", "a model/optimiser key (task, epochs, split, seed, patience are set by the grid's top level and the protocol)", key)
            if section == "grid" and (not isinstance(value, list) or not value):
                raise _fail(path, f"grid.{key}", "a non-empty list", value)
            if section == "fixed" and isinstance(value, (list, dict)):
                raise _fail(path, f"fixed.{key}", "a single value (lists belong under grid)", value)
    cpu = data.get("cpu") or {}
    if not isinstance(cpu, dict):
        raise _fail(path, "cpu", TOP_KEYS["cpu"], cpu)
    for key, value in cpu.items():
        if key not in known:
            raise _fail(path, f"cpu.{key}", f"a config key{_did_you_mean(key, known)}", key)
        if key in PROTOCOL_KEYS or key in grid:
            raise _fail(path, f"cpu.{key}", "a key the grid does not search and the protocol does not set", key)
        if isinstance(value, (list, dict)):
            raise _fail(path, f"cpu.{key}", "a single value", value)
    both = set(fixed) & set(grid)  # a key in both sections is ambiguous
    if both:
        key = sorted(both)[0]
        raise _fail(path, f"grid.{key}", "a key not also set under fixed", key)
    return fixed, grid, cpu


def _check(path, where: str, values: dict, only: str | None = None) -> "TrainConfig | None":
    try:
        return TrainConfig.from_dict(values, source=str(path))
    except ConfigError as e:
        if only is not None and e.key not in (only, None):
            return None  # another key's problem: reported when that key or the combination is checked
        key = where if where.startswith("grid.") or e.key is None else (f"{where}.{e.key}" if where in ("fixed", "cpu") else f"{where}: {e.key}")
        raise GridError(f"{path}: key {key!r}: expected {e.expected}, found {e.found!r}") from None


def grid_folder(directory: str | Path | None = None) -> Path:
    """The folder of grid files: `directory` (--grid-dir), checked to be a
    folder (a typo used to list nothing, or blame the task), or the packaged
    search/grids."""
    if not directory:
        return GRID_DIR
    path = Path(directory)
    if not path.exists():
        raise GridError(f"--grid-dir {directory}: no such folder")
    if not path.is_dir():
        raise GridError(f"--grid-dir {directory}: a file, not a folder of grid YAML files")
    return path


def discover_grids(directory: str | Path | None = None) -> list[Grid]:
    """Every grid file (*.yaml) of the folder; none there is an error naming it."""
    directory = grid_folder(directory)
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise GridError(f"--grid-dir {directory}: no grid files (<task>-<strategy>.yaml) in it")
    return [load_grid(p) for p in files]


def find_grid(task: str, strategy: str, directory: str | Path | None = None) -> Grid:
    """The grid file for (task, strategy): <dir>/<task>-<strategy>.yaml."""
    directory = grid_folder(directory)
    path = directory / f"{task}-{strategy}.yaml"
    if not path.exists():
        stems = [p.stem.rsplit("-", 1) for p in directory.glob("*.yaml") if "-" in p.stem]
        tasks = sorted({t for t, _ in stems})
        if task in tasks:
            raise GridError(f"{path}: no grid for task {task!r} and strategy {strategy!r}; "
                            f"{task} has grids for {', '.join(sorted(s for t, s in stems if t == task))}")
        hint = difflib.get_close_matches(task, tasks, n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise GridError(f"{path}: no grid for task {task!r}{did}; tasks with grids in {directory}: {', '.join(tasks) or 'none'}")
    grid = load_grid(path)
    if grid.task != task or grid.strategy != strategy:
        raise GridError(f"{path}: file name says {task}-{strategy} but it declares task {grid.task!r}, strategy {grid.strategy!r}")
    return grid
