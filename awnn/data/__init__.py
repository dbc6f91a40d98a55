"""Tasks: data, splits and batching behind one small interface.

A task is resolved by name with `load_task(name, data_root, data_seed)`.
Every task exposes `in_features`, `num_classes`, `kind`, the number of
training samples of a split (`n_train`) and `batches(...)`, which yields
(inputs, targets) already on the requested device.  The trainer needs
nothing else, so new domains plug in by registering a loader in `TASKS`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

if TYPE_CHECKING:  # (torch is imported where tensors are made: the driver checks grids and data without it)
    import torch

from .splits import Split, outer_inner_splits, stratified_split
from .tabular import GENERATORS, make_tabular, outer_fractions

__all__ = ["Task", "TensorTask", "TASKS", "load_task", "task_kind", "reads_files", "DataError", "Split", "outer_inner_splits", "stratified_split"]


class DataError(ValueError):
    """Data a task needs is missing or malformed (message names the path)."""


class Task:
    """Interface of a task; see TensorTask for the in-memory implementation."""

    name: str
    kind: str
    in_features: int
    num_classes: int
    # what the copy of the data the task was read from holds (awnn/data/digest.py): set by the loaders of data on
    # disk; None for data made from a seed or shipped in a package (nothing on a node can differ)
    data_digest: str | None = None

    def n_train(self, split: str) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def batches(self, split: str, part: str, batch_size: int, device: torch.device, generator: torch.Generator | None = None) -> Iterator:
        raise NotImplementedError  # pragma: no cover - interface

    def label_array(self) -> np.ndarray | None:
        """The class of every example (stratifies `cap_train`); None for unlabelled data (text)."""
        return None

    def cap_train(self, n: int, seed: int) -> "Task":
        """This task training on at most `n` examples of each split's training
        part: a stratified subset (random for unlabelled data) drawn from
        `seed`, the same for every config; validation and test parts unchanged.
        A copy: the task itself (maybe shared) is left as it is."""
        import copy

        from .splits import stratified_holdout

        labels = self.label_array()
        out = copy.copy(self)
        for name in ("inner", "outer"):
            split = getattr(self, name)
            if n <= 0 or len(split.train) <= n:
                continue
            if labels is not None:
                _, keep = stratified_holdout(labels[split.train], n, seed)
            else:
                keep = np.random.default_rng(seed).choice(len(split.train), n, replace=False)
            setattr(out, name, Split(split.train[np.sort(keep)], split.val, split.test))
        for cache in ("_cache", "_device_cache"):  # cached tensors of the old parts
            if hasattr(out, cache):
                setattr(out, cache, {})
        return out


# a training part up to this size is gathered in its epoch's order at once (`TensorTask.batches`)
PERMUTED_COPY_BYTES = 64 << 20


@dataclass
class TensorTask(Task):
    """A task whose whole dataset fits in memory as two tensors.

    `split` is 'inner' (model selection: train/val of the inner 90/10 split)
    or 'outer' (risk assessment: train/val/test of the outer 70/10/20 split).
    """

    name: str
    x: torch.Tensor
    y: torch.Tensor
    outer: Split
    inner: Split
    kind: str = "tabular"
    num_classes: int = 2
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def in_features(self) -> int:
        return int(self.x.shape[1])

    def label_array(self) -> np.ndarray:
        return self.y.numpy()

    def indices(self, split: str, part: str) -> np.ndarray:
        s = {"inner": self.inner, "outer": self.outer}[split]
        return getattr(s, part)

    def n_train(self, split: str) -> int:
        return len(self.indices(split, "train"))

    def tensors(self, split: str, part: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (split, part, str(device))
        if key not in self._cache:
            import torch

            idx = torch.as_tensor(self.indices(split, part), dtype=torch.long)
            self._cache[key] = (self.x[idx].to(device), self.y[idx].to(device))
        return self._cache[key]

    def batches(self, split, part, batch_size, device, generator=None):
        x, y = self.tensors(split, part, device)
        n = len(y)
        if generator is None:  # evaluation: in order
            for s in range(0, n, batch_size):
                yield x[s : s + batch_size], y[s : s + batch_size]
            return
        import torch

        perm = torch.randperm(n, generator=generator).to(device)
        if x.numel() * x.element_size() <= PERMUTED_COPY_BYTES:
            # the epoch's examples gathered once, in its order, and sliced: two views a batch
            # instead of two gathers (~25 us of a ~300 us SpiralHard step on a CPU, right after the
            # step's work), the same batches (tests/awnn/test_data_tabular.py)
            xs, ys = x[perm], y[perm]
            for s in range(0, n, batch_size):
                yield xs[s : s + batch_size], ys[s : s + batch_size]
            return
        for s in range(0, n, batch_size):  # (a larger part: one batch gathered at a time)
            idx = perm[s : s + batch_size]
            yield x[idx], y[idx]


def _tabular(name: str) -> Callable[..., TensorTask]:
    def load(data_root: str | None = None, data_seed: int = 0) -> TensorTask:
        import torch

        x, y = make_tabular(name, seed=data_seed)
        outer, inner = outer_inner_splits(y, seed=data_seed, outer=outer_fractions(name))
        return TensorTask(name, torch.from_numpy(x), torch.from_numpy(y).long(), outer, inner, num_classes=int(y.max()) + 1)

    load.kind = "tabular"
    load.files = False  # (made from the seed)
    return load


def _file_table() -> Callable[..., Task]:
    """Task `table`: a user's CSV file (awnn/data/table.py); `check(data_root, **options)` reads and checks it without torch
    (the Table: its `digest` and `summary`)."""

    from .table import OPTIONS

    def load(data_root: str | None = None, data_seed: int = 0, **options) -> Task:
        from .table import load_table

        return load_table(data_root, data_seed, **options)

    def check(data_root: str | None, **options):
        from .table import read_table

        return read_table(data_root, **options)

    load.kind = "tabular"
    load.check = check
    load.config_keys = OPTIONS  # (TrainConfig's label and drop_columns: which column is the class, which are left out)
    return load


def _lazy(module: str, function: str, config_keys: tuple[str, ...], folds: int = 1, files: bool = True) -> Callable[..., Task]:
    """A loader that imports its domain module (torchvision, torch-geometric,
    ...) only when called, so `import awnn` stays light.  `folds`: the
    number of outer folds of the task's cross-validated risk assessment
    (the config key `fold` picks one); 1 for a task with one hold-out split.
    `files`: it reads its data under --data-root (False: the data comes with a library)."""

    def load(data_root: str | None = None, data_seed: int = 0, **options) -> Task:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), function)(data_root=data_root, data_seed=data_seed, **options)

    load.config_keys = config_keys
    load.folds = folds
    load.files = files
    load.kind = {"images": "image", "graphs": "graph", "text": "text"}[module]
    return load


TASKS: dict[str, Callable[..., Task]] = {name: _tabular(name) for name in GENERATORS}
TASKS.update(
    {
        "digits": _lazy("images", "load_digits", ("augment",), files=False),  # (scikit-learn's copy)
        "mnist": _lazy("images", "load_mnist", ("augment",)),
        "cifar10": _lazy("images", "load_cifar10", ("augment",)),
        "cifar100": _lazy("images", "load_cifar100", ("augment",)),
        "nci1": _lazy("graphs", "load_nci1", ("fold",), folds=10),
        "reddit_binary": _lazy("graphs", "load_reddit_binary", ("fold",), folds=10),
        "multi30k": _lazy("text", "load_multi30k", ("tokenizer", "max_len")),
        "table": _file_table(),
    }
)


def reads_files(name: str) -> bool:
    """Task `name` reads its data from files (under --data-root, or the user's CSV file); False for the tasks generated
    from the seed and for scikit-learn's digits.  An unknown name: True (nothing is said of it)."""
    return getattr(TASKS.get(name), "files", True)


def task_kind(name: str) -> str:
    """tabular | image | graph | text: the kind of task `name` is, without loading it."""
    try:
        return TASKS[name].kind
    except KeyError:
        raise ValueError(f"Could not resolve task {name!r} among choices {sorted(TASKS)}.") from None


def load_task(name: str, data_root: str | None = None, data_seed: int = 0, config=None) -> Task:
    """The task `name`.  A loader may declare `config_keys` (e.g. the graph
    `fold`, the text `tokenizer`): their values are taken from `config`, a
    TrainConfig, when one is given, and are the loader's defaults otherwise."""
    try:
        loader = TASKS[name]
    except KeyError:
        raise ValueError(f"Could not resolve task {name!r} among choices {sorted(TASKS)}.") from None
    options = {k: getattr(config, k) for k in getattr(loader, "config_keys", ())} if config is not None else {}
    return loader(data_root=data_root, data_seed=data_seed, **options)
