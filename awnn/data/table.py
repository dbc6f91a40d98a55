"""A user's own tabular data: task `table`, one CSV file.

The built-in tabular tasks are generated from a seed; `table` reads a file a
user brings, so a comparison answers "does AWNN save search cost on my
data?".  The file is `--data-root FILE.csv`, or `<data root>/table.csv` when
the data root is a folder.  Its format:

* a header row (column names), then one row per example;
* every column but the last a number (a feature): finite, no empty cell;
* the last column the class label, any text ("cat", "3", "yes"): the classes
  are its distinct values, numbered in sorted order (numerically where every
  label is a number, so "2" < "10");
* at least two classes and `MIN_PER_CLASS` rows of each (so that the outer
  70/10/20 and inner 90/10 splits, stratified, give every part each class).

Features are standardised with the mean and standard deviation of the outer
training part (a constant feature is centred only); the test part plays no
part in it.

Every problem is a `DataError` of one line naming the file, the line and
column where it applies, what was expected and what was found.  The file's
SHA-256 (`data_digest`) enters the comparison's --resume key and each trial
checks its node's copy against the driver's, so another file, or the same
path edited, is never mixed into one comparison.

`read_table` uses numpy only: the driver checks the file without importing
torch.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
import os
from dataclasses import dataclass

import numpy as np

from . import DataError
from .checks import file_problem
from .digest import DIGEST_CHARS

__all__ = ["TASK", "FILE", "MIN_PER_CLASS", "Table", "table_path", "read_table", "load_table", "table_digest"]

TASK = "table"
FILE = "table.csv"
MIN_PER_CLASS = 10


@dataclass(frozen=True)
class Table:
    """A checked table: features (n, f) float32 as written, labels (n,) 0..C-1,
    the class names in label order, the feature names and the file's digest."""

    path: str
    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    features: list[str]
    digest: str


def table_path(data_root: str | None) -> str:
    """The CSV file of `--data-root`: a folder's table.csv; else the path itself where it is a file or
    ends in .csv; else (nothing there, e.g. the default `data`) the table.csv the folder would hold."""
    root = os.path.expanduser(data_root or "data")
    if not os.path.isdir(root) and (os.path.lexists(root) or root.lower().endswith(".csv")):
        return root
    return os.path.join(root, FILE)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _class_order(names: list[str]) -> list[str]:
    values = [_number(n) for n in names]
    if all(v is not None and math.isfinite(v) for v in values):
        return [n for _, n in sorted(zip(values, names))]
    return sorted(names)


def read_table(data_root: str | None) -> Table:
    """Read and check the task's CSV file (see the module docstring)."""
    path = table_path(data_root)
    problem = file_problem(path)
    if problem:
        raise DataError(f"task {TASK}: expected a CSV file at {path} ({problem}); --data-root must name the CSV file, "
                        f"or a folder that holds {FILE} (header row, numeric feature columns, the class label last)")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (at byte offset {e.start}: {raw[e.start:e.start + 1]!r}); a CSV file was expected") from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV file ({e})") from None
    numbered = [(i + 1, r) for i, r in enumerate(rows) if r and any(c.strip() for c in r)]  # blank lines skipped
    if not numbered:
        raise DataError(f"{path}: empty; expected a header row, then one row per example (features, then the class label)")
    line, header = numbered[0]
    header = [c.strip() for c in header]
    if len(header) < 2:
        raise DataError(f"{path}, line {line}: {len(header)} column; expected at least 2 (one or more features, then the class label)")
    if all(_number(c) is not None for c in header):
        raise DataError(f"{path}, line {line}: every cell is a number ({', '.join(header[:4])}{', ...' if len(header) > 4 else ''}); "
                        "expected a header row of column names first")
    body = numbered[1:]
    if not body:
        raise DataError(f"{path}: a header row and no example; expected one row per example after it")
    n_feat = len(header) - 1
    x = np.empty((len(body), n_feat), dtype=np.float64)
    labels: list[str] = []
    for k, (line, row) in enumerate(body):
        if len(row) != len(header):
            raise DataError(f"{path}, line {line}: {len(row)} columns; expected {len(header)}, as the header has")
        for j in range(n_feat):
            cell = row[j].strip()
            v = _number(cell)
            if v is None or not math.isfinite(v):
                found = "an empty cell" if not cell else repr(cell if len(cell) <= 30 else cell[:27] + "...")
                raise DataError(f"{path}, line {line}, column {j + 1} ({header[j]!r}): {found}; expected a finite number (a feature)")
            x[k, j] = v
        label = row[-1].strip()
        if not label:
            raise DataError(f"{path}, line {line}, column {len(header)} ({header[-1]!r}): an empty class label")
        labels.append(label)
    if np.abs(x).max(initial=0.0) > np.finfo(np.float32).max:
        big = np.unravel_index(np.abs(x).argmax(), x.shape)
        raise DataError(f"{path}, line {body[big[0]][0]}, column {big[1] + 1} ({header[big[1]]!r}): {x[big]:g} is beyond float32's range; "
                        "expected a feature a model can take")
    classes = _class_order(sorted(set(labels)))
    if len(classes) < 2:
        raise DataError(f"{path}: one class ({classes[0]!r}) in the last column ({header[-1]!r}); expected at least 2 classes")
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[c] for c in labels], dtype=np.int64)
    counts = np.bincount(y, minlength=len(classes))
    few = [f"{classes[i]!r}: {int(n)}" for i, n in enumerate(counts) if n < MIN_PER_CLASS]
    if few:
        raise DataError(f"{path}: too few rows of class {', '.join(few)}; expected at least {MIN_PER_CLASS} of each class "
                        "(the stratified 70/10/20 and 90/10 splits need every class in every part)")
    digest = hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]
    return Table(path=path, x=x.astype(np.float32), y=y, classes=classes, features=header[:-1], digest=digest)


def table_digest(data_root: str | None) -> str:
    """The checked file's digest (read_table's checks included)."""
    return read_table(data_root).digest


def standardise(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """x with every feature centred and scaled by the mean and standard deviation over `rows`
    (a feature constant there is centred only)."""
    mean = x[rows].astype(np.float64).mean(0)
    std = x[rows].astype(np.float64).std(0)
    std[std == 0.0] = 1.0
    return ((x - mean) / std).astype(np.float32)


def load_table(data_root: str | None = None, data_seed: int = 0):
    """The task: the checked table, split 70/10/20 (inner 90/10) by `data_seed`,
    standardised on the outer training part."""
    import torch

    from . import TensorTask, outer_inner_splits

    t = read_table(data_root)
    outer, inner = outer_inner_splits(t.y, seed=data_seed)
    x = standardise(t.x, outer.train)
    task = TensorTask(TASK, torch.from_numpy(x), torch.from_numpy(t.y), outer, inner, num_classes=len(t.classes))
    task.data_digest = t.digest
    task.classes = t.classes
    return task
