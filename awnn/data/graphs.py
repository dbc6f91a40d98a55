"""Graph classification tasks: NCI1 and REDDIT-BINARY (TU datasets).

Read through torch-geometric's `TUDataset` from the raw TU text files,
never downloaded, once `checks.check_tu` has checked them against each other:

    <data_root>/NCI1/raw/NCI1_{A,graph_indicator,graph_labels,node_labels}.txt
    <data_root>/REDDIT-BINARY/raw/REDDIT-BINARY_{A,graph_indicator,graph_labels}.txt

(`TUDataset` writes its processed cache to `<data_root>/<NAME>/processed/`).
Node features are the one-hot node labels (NCI1: 37); REDDIT-BINARY has
none and every node gets the constant feature 1, as in the fair-comparison
protocol of Errica et al. (2020).

Splits follow that protocol: a stratified 10-fold outer cross-validation
(seeded by `data_seed`); fold `fold` is the outer test part, and 10% of
the whole dataset, drawn stratified from the other nine folds, is the
outer validation part (NCI1: 3288/411/411, paper Table 2).  Model
selection uses an inner stratified 90/10 holdout of the nine folds (NCI1:
3329/370).  This project's trainer runs one split at a time: a full
10-fold risk assessment is 10 runs with `fold=0..9`.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import numpy as np
import torch

from . import DataError, Task
from .splits import Split, index_batches, stratified_holdout, stratified_split

__all__ = ["GraphTask", "load_tu", "load_nci1", "load_reddit_binary", "tu_fold_splits", "fold_assignment", "folds_digest", "FOLDS"]

FOLDS = 10
EVAL_BATCH = 512  # graphs per evaluation batch


def fold_assignment(labels: np.ndarray, seed: int = 0) -> np.ndarray:
    """The outer fold (0..FOLDS-1) of every graph: FOLDS disjoint stratified
    test folds covering the set, drawn from `seed` (the data seed)."""
    labels = np.asarray(labels)
    out = np.full(len(labels), -1, dtype=np.int64)
    for k, part in enumerate(stratified_split(labels, (1.0 / FOLDS,) * FOLDS, seed)):
        out[part] = k
    return out


def folds_digest(labels: np.ndarray, seed: int = 0) -> str:
    """A short digest of `fold_assignment`: a comparison saves it, and a
    resumed driver or a trial on another node checks that its data draws
    the same folds (the same graphs, labels and order)."""
    import hashlib

    a = fold_assignment(labels, seed)
    return hashlib.sha1(a.astype("<i8").tobytes() + np.asarray(labels, dtype="<i8").tobytes()).hexdigest()[:12]


def tu_fold_splits(labels: np.ndarray, fold: int, seed: int = 0) -> tuple[Split, Split]:
    """(outer train/val/test, inner train/val) for one fold of the stratified 10-fold CV."""
    if not 0 <= fold < FOLDS:
        raise ValueError(f"fold must lie in 0..{FOLDS - 1}, but got {fold=}.")
    labels = np.asarray(labels)
    folds = stratified_split(labels, (1.0 / FOLDS,) * FOLDS, seed)
    test = folds[fold]
    rest = np.concatenate([f for i, f in enumerate(folds) if i != fold])
    keep, val = stratified_holdout(labels[rest], round(0.1 * len(labels)), seed + 1)
    ikeep, ival = stratified_holdout(labels[rest], round(0.1 * len(rest)), seed + 2)
    return Split(rest[keep], rest[val], test), Split(rest[ikeep], rest[ival], np.array([], dtype=int))


class GraphTask(Task):
    """A list of torch-geometric `Data` graphs; batches are PyG `Batch`es.

    `batches` yields (batch, batch.y) on the device; a batch carries `x`
    (nodes, in_features), `edge_index` and the node-to-graph map `batch`."""

    kind = "graph"

    def __init__(self, name: str, graphs: list, labels: np.ndarray, outer: Split, inner: Split, num_classes: int, in_features: int, constant_features: bool):
        self.name = name
        self.graphs = graphs
        self.labels = np.asarray(labels)
        self.outer, self.inner = outer, inner
        self.num_classes = int(num_classes)
        self.in_features = int(in_features)
        self.constant_features = constant_features
        self.data_seed = 0

    @property
    def folds_digest(self) -> str:
        return folds_digest(self.labels, self.data_seed)

    def indices(self, split: str, part: str) -> np.ndarray:
        return getattr({"inner": self.inner, "outer": self.outer}[split], part)

    def n_train(self, split: str) -> int:
        return len(self.indices(split, "train"))

    def label_array(self) -> np.ndarray:
        return self.labels

    def batches(self, split: str, part: str, batch_size: int, device: torch.device, generator: torch.Generator | None = None) -> Iterator:
        import_pyg()
        from torch_geometric.data import Batch

        for part_idx in index_batches(self.indices(split, part), batch_size, generator, EVAL_BATCH):
            b = Batch.from_data_list([self.graphs[i] for i in part_idx]).to(device)
            if self.constant_features:
                b.x = torch.ones(b.num_nodes, 1, device=device)
            yield b, b.y


def import_pyg() -> None:
    """Import torch-geometric once without the FutureWarning its import
    prints about `torch.jit.script` (torch >= 2.9 deprecates it; nothing
    this project calls is affected).  Called before any torch_geometric import."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
        import torch_geometric  # noqa: F401


@contextlib.contextmanager
def pyg_sources_in_memory() -> Iterator[None]:
    """Around the construction of torch-geometric layers: leave no file in
    the temporary folder.  PyG (2.5+) renders each MessagePassing class's
    `propagate` from a jinja template into a `.py` file of the temporary
    folder and imports it (`torch_geometric.template.module_from_template`,
    `delete=False`), once per process and class, and never removes it:
    measured, one `make test` left 8 `torch_geometric.nn.conv.gin_conv_
    GINConv_propagate_*.py` in /tmp and a day of test runs ~100, and a node
    that runs GIN trials gathers one per trial process.  Each module so made while the block runs keeps
    its source in `linecache` (tracebacks and `inspect.getsource` still show
    it; an entry without a modification time is never dropped as stale) and
    loses its file."""
    import linecache
    import sys
    import tempfile

    before = set(sys.modules)
    try:
        yield
    finally:
        scratch = os.path.realpath(tempfile.gettempdir())
        for name in set(sys.modules) - before:
            path = getattr(sys.modules.get(name), "__file__", None)
            if not name.startswith("torch_geometric") or not path or os.path.dirname(os.path.realpath(path)) != scratch:
                continue
            try:
                with open(path) as f:
                    lines = f.read().splitlines(keepends=True)
                linecache.cache[path] = (sum(map(len, lines)), None, lines, path)
                os.remove(path)
            except OSError:  # (gone already, or not ours to remove: left as it is)
                pass


def _drop_stale_cache(folder: str, raw_files: list[str]) -> None:
    """`TUDataset` reads its processed cache whenever the cache exists, even
    when the raw files changed since: a replaced or corrected dataset would be
    trained on as it was.  A cache older than any raw file is removed, so it
    is rebuilt from the raw files."""
    import shutil

    processed = os.path.join(folder, "processed")
    cached = [os.path.join(processed, f) for f in os.listdir(processed)] if os.path.isdir(processed) else []
    if cached and raw_files and max(os.path.getmtime(f) for f in raw_files) > min(os.path.getmtime(f) for f in cached):
        shutil.rmtree(processed, ignore_errors=True)


def load_tu(name: str, task_name: str, data_root: str | None, data_seed: int, fold: int) -> GraphTask:
    from .checks import check_tu, missing_files_error
    from .digest import files_digest

    root = data_root or "data"
    raw = os.path.join(root, name, "raw")
    files = [f"{name}_{part}.txt" for part in ("A", "graph_indicator", "graph_labels")]
    error = missing_files_error(name, raw, files, f"{name}/raw", kind="the TU raw files")
    if error:
        raise error
    n_graphs = check_tu(raw, name)  # every file, against the others: DataError naming the file and line
    _drop_stale_cache(os.path.join(root, name), [os.path.join(raw, f) for f in os.listdir(raw)])
    import_pyg()
    from torch_geometric.datasets import TUDataset

    try:
        dataset = TUDataset(root, name)
        graphs = [dataset[i] for i in range(len(dataset))]
    except (OSError, RuntimeError, ValueError, IndexError) as e:
        raise DataError(f"{name}: could not read the TU files in {raw} ({type(e).__name__}: {e})") from None
    if len(graphs) != n_graphs:  # the checks above should make this impossible
        raise DataError(f"{name}: torch-geometric read {len(graphs)} graphs from {raw}, but {name}_graph_indicator.txt numbers {n_graphs}")
    labels = np.array([int(g.y) for g in graphs])
    constant = dataset.num_node_features == 0
    outer, inner = tu_fold_splits(labels, fold, data_seed)
    task = GraphTask(task_name, graphs, labels, outer, inner, num_classes=int(labels.max()) + 1, in_features=1 if constant else dataset.num_node_features, constant_features=constant)
    task.data_seed = data_seed
    task.data_digest = files_digest(raw, [f for f in os.listdir(raw) if f.startswith(f"{name}_") and f.endswith(".txt")])  # what TUDataset reads
    return task


def load_nci1(data_root: str | None = None, data_seed: int = 0, fold: int = 0) -> GraphTask:
    return load_tu("NCI1", "nci1", data_root, data_seed, fold)


def load_reddit_binary(data_root: str | None = None, data_seed: int = 0, fold: int = 0) -> GraphTask:
    return load_tu("REDDIT-BINARY", "reddit_binary", data_root, data_seed, fold)

