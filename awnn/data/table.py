"""A user's own tabular data: task `table`, one CSV file.

The built-in tabular tasks are generated from a seed; `table` reads a file a
user brings, so a comparison answers "does AWNN save search cost on my
data?".  The file is `--data-root FILE.csv`, or `<data root>/table.csv` when
the data root is a folder.  Its format:

* a header row (a name for every column; an unnamed first column that
  numbers the rows, as pandas' `to_csv` writes its index, is refused: a row
  number is no feature), then one row per example, separated by commas;
* every column but the last a feature, no cell empty: a numeric column (every
  cell a finite number), or a text column (no cell a number: "red", "male",
  "S"), a category one-hot encoded into one feature per value (values in
  sorted order, named `column=value`; at most `MAX_CATEGORIES` values, so an
  id or free-text column is refused, not blown up into thousands of
  features); a column that mixes numbers and text is refused at its first
  cell of the kind it holds fewer of (numbers where they are half or more);
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
import re
from dataclasses import dataclass

import numpy as np

from . import DataError
from .checks import file_problem
from .digest import DIGEST_CHARS

__all__ = ["TASK", "FILE", "MIN_PER_CLASS", "Table", "table_path", "read_table", "load_table"]

TASK = "table"
FILE = "table.csv"
MIN_PER_CLASS = 10
MAX_CATEGORIES = 50  # distinct values of a text feature column
_SHOWN_CLASSES = 10  # classes named in a table's summary


@dataclass(frozen=True)
class Table:
    """A checked table: features (n, f) float32 as written (a text column one-hot), labels (n,) 0..C-1, the
    class names in label order, the feature names (`column=value` for a text column's) and the file's digest;
    `categories`: each text column's values in feature order."""

    path: str
    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    features: list[str]
    digest: str
    categories: dict[str, list[str]]

    @property
    def name(self) -> str:
        """The file's name for a comparison id (`table-<name>-<time>-...`): its stem (a folder's table.csv: the
        folder's name), lower case, each run of other characters than a-z and 0-9 one `_`, at most 24; may be ''."""
        stem = os.path.splitext(os.path.basename(self.path))[0]
        if os.path.basename(self.path) == FILE:
            stem = os.path.basename(os.path.dirname(os.path.abspath(self.path)))
        return re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")[:24].strip("_")

    @property
    def summary(self) -> str:
        """What was read, in one line (the comparison's `data_summary` param, the driver's log, the report's Setup)."""
        counts = np.bincount(self.y, minlength=len(self.classes))
        text = sum(len(v) for v in self.categories.values())
        columns = len(self.features) - text + len(self.categories)
        kinds = f"{columns - len(self.categories)} numeric" + (
            f", {len(self.categories)} text one-hot into {text}" if self.categories else "")
        shown = ", ".join(f"{c if len(c) <= 30 else c[:27] + '...'} ({int(n)})" for c, n in list(zip(self.classes, counts))[:_SHOWN_CLASSES])
        more = f", and {len(self.classes) - _SHOWN_CLASSES} more" if len(self.classes) > _SHOWN_CLASSES else ""
        def n(k: int, word: str) -> str:
            return f"{k} {word}{'' if k == 1 else 's'}"

        return f"{n(len(self.y), 'row')}; {n(len(self.features), 'feature')} from {n(columns, 'column')} ({kinds}); {len(self.classes)} classes: {shown}{more}"


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


def _shown(cell: str) -> str:
    return "an empty cell" if not cell else repr(cell if len(cell) <= 30 else cell[:27] + "...")


def _feature_column(path: str, header: list[str], j: int, body: list[tuple[int, list[str]]]) -> tuple[np.ndarray, str | list[str]]:
    """Feature column `j` of the rows `body`: (values (n,) float64, "number") for a numeric column, (one-hot (n, k),
    its k values in order) for a text column; a DataError naming the line and the column for anything else."""
    where = f"column {j + 1} ({header[j]!r})"
    cells = [row[j].strip() for _, row in body]
    numbers = [_number(c) for c in cells]
    for (line, _), cell in zip(body, cells):
        if not cell:
            raise DataError(f"{path}, line {line}, {where}: an empty cell; expected a finite number or a category (a feature): "
                            "fill it in or drop the row")
    n_text = sum(v is None for v in numbers)
    if n_text <= len(cells) - n_text:  # a numeric column (at most half its cells text: each an error)
        for (line, _), cell, v in zip(body, cells, numbers):
            if v is None or not math.isfinite(v):
                mixed = "; the column mixes numbers and text" if v is None and n_text < len(cells) else ""
                raise DataError(f"{path}, line {line}, {where}: {_shown(cell)}; expected a finite number (a feature){mixed}")
        values = np.array(numbers, dtype=np.float64)
        if np.abs(values).max(initial=0.0) > np.finfo(np.float32).max:
            k = int(np.abs(values).argmax())
            raise DataError(f"{path}, line {body[k][0]}, {where}: {values[k]:g} is beyond float32's range; expected a feature a model can take")
        return values, "number"
    if n_text < len(cells):  # a text column with a number in it: "3" is no category among "red", "blue"
        line, cell = next((line, c) for (line, _), c, v in zip(body, cells, numbers) if v is not None)
        raise DataError(f"{path}, line {line}, {where}: {_shown(cell)}, a number in a text column; expected a category "
                        "(a column is numbers, or categories none of which is a number)")
    values = sorted(set(cells))
    if len(values) > MAX_CATEGORIES:
        raise DataError(f"{path}, {where}: {len(values)} distinct text values in {len(cells)} rows; a text feature is "
                        f"a category of at most {MAX_CATEGORIES} values, one-hot encoded (an id or free text is no feature: drop the column)")
    index = {v: i for i, v in enumerate(values)}
    onehot = np.zeros((len(cells), len(values)), dtype=np.float64)
    onehot[np.arange(len(cells)), [index[c] for c in cells]] = 1.0
    return onehot, values


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
        folder = os.path.dirname(path)
        try:
            others = sorted(f for f in os.listdir(folder) if f.lower().endswith(".csv") and os.path.isfile(os.path.join(folder, f))) \
                if os.path.isdir(folder) else []
        except OSError:
            others = []
        near = (f"; {folder} holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}: "
                f"--data-root {os.path.join(folder, others[0])} reads {'it' if len(others) == 1 else 'the first'}") if others else ""
        raise DataError(f"task {TASK}: expected a CSV file at {path} ({problem}){near}; --data-root must name the CSV file, "
                        f"or a folder that holds {FILE} (header row, feature columns (numbers or categories), the class label last)")
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
        other = next((name for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")) if sep in header[0]), None)
        hint = f"; the file looks separated by {other}: save it as CSV with commas" if other else ""
        raise DataError(f"{path}, line {line}: {len(header)} column; expected at least 2 (one or more features, then the class label){hint}")
    if all(_number(c) is not None for c in header):
        raise DataError(f"{path}, line {line}: every cell is a number ({', '.join(header[:4])}{', ...' if len(header) > 4 else ''}); "
                        "expected a header row of column names first")
    body = numbered[1:]
    if not body:
        raise DataError(f"{path}: a header row and no example; expected one row per example after it")
    unnamed = [j for j, c in enumerate(header) if not c]
    if unnamed:  # pandas' to_csv writes its index so: row numbers as a feature, a leak where rows are in class order
        j = unnamed[0]
        index = j == 0 and all(len(r) > 0 and r[0].strip() == str(k) for k, (_, r) in enumerate(body[:1000]))
        raise DataError(f"{path}, line {line}, column {j + 1}: no column name; expected a name for every column"
                        + ("; this column numbers the rows 0, 1, 2, ..., as pandas' to_csv writes its index: drop it "
                           "(df.to_csv(path, index=False)), a row number is no feature" if index else ""))
    n_feat = len(header) - 1
    labels: list[str] = []
    for line, row in body:
        if len(row) != len(header):
            raise DataError(f"{path}, line {line}: {len(row)} columns; expected {len(header)}, as the header has")
        label = row[-1].strip()
        if not label:
            raise DataError(f"{path}, line {line}, column {len(header)} ({header[-1]!r}): an empty class label")
        labels.append(label)
    columns, names, categories = [], [], {}
    for j in range(n_feat):
        values, kind = _feature_column(path, header, j, body)
        if kind == "number":
            columns.append(values[:, None])
            names.append(header[j])
        else:
            columns.append(values)
            categories[header[j]] = kind
            names += [f"{header[j]}={v}" for v in kind]
    x = np.concatenate(columns, axis=1)
    classes = _class_order(sorted(set(labels)))
    if len(classes) < 2:
        raise DataError(f"{path}: one class ({classes[0]!r}) in the last column ({header[-1]!r}); expected at least 2 classes")
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[c] for c in labels], dtype=np.int64)
    counts = np.bincount(y, minlength=len(classes))
    few = [f"{classes[i]!r}: {int(n)}" for i, n in enumerate(counts) if n < MIN_PER_CLASS]
    if few and len(classes) > len(labels) // MIN_PER_CLASS:  # more classes than the rows can hold: not a class label
        numeric = all(_number(c) is not None for c in classes)
        raise DataError(f"{path}, column {len(header)} ({header[-1]!r}): {len(classes)} distinct labels in {len(labels)} rows; "
                        f"expected a class label with at least {MIN_PER_CLASS} rows of each class"
                        + ("; task table is classification: a continuous target (regression) is not supported" if numeric else ""))
    if few:
        shown = ", ".join(few[:5]) + (f" and {len(few) - 5} more" if len(few) > 5 else "")
        raise DataError(f"{path}: too few rows of class {shown}; expected at least {MIN_PER_CLASS} of each class "
                        "(the stratified 70/10/20 and 90/10 splits need every class in every part)")
    digest = hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]
    return Table(path=path, x=x.astype(np.float32), y=y, classes=classes, features=names, digest=digest, categories=categories)


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
