"""A user's own tabular data: task `table`, one CSV file or a train/test pair.

The built-in tabular tasks are generated from a seed; `table` reads files a
user brings, so a comparison answers "does AWNN save search cost on my
data?".  `--data-root` names the CSV file, or a folder that holds either
`table.csv` (split 70/10/20 here) or `train.csv` and `test.csv` (as many
benchmarks ship: test.csv is the outer test part as given, train.csv is
split 87.5/12.5 into outer training and validation parts, 70:10 as the
protocol's, and 90/10 into the inner parts).  A file's format:

* a header row (each column named once; an unnamed first column that
  numbers the rows, as pandas' `to_csv` writes its index, is refused: a row
  number is no feature; a first row that reads as an example, as a file
  without a header has, is refused), then one row per example, separated by
  commas, or by semicolons or tabs (the one that splits the first lines
  alike into the most cells, or the one Excel's first line `sep=;` names:
  `SEPARATORS`, `_separator`); a
  file separated by semicolons, as spreadsheets under German, French, ...
  settings save CSV, may write its numbers with decimal commas (1,5), which
  are read as points (a file writing numbers both ways, or 1.234,5, is
  refused); the summary says how such a file was read; the file's text in
  UTF-8, or UTF-16 with its byte order mark (Excel's "Unicode Text"), and
  compressed or not (gzip, bzip2, xz, a zip archive of one CSV file: found
  by the first bytes, `_file_text`); a workbook, Parquet, HDF5 or SQLite
  file is refused as what it is (`NOT_CSV`, `SPREADSHEETS`);
* every column but the last a feature: a numeric column (every cell a finite
  number or missing, written as one of `MISSING`: filled with the training
  mean by `standardise`, with an indicator feature `name (missing)`; not a
  column that numbers the rows, each row's value its position in the file:
  an id), or a text column (no cell a number: "red", "male", "S"; an empty
  cell the category `(missing)`), a category one-hot encoded into one
  feature per value (values in sorted order, named `column=value`; at most
  `MAX_CATEGORIES` values, so an id or free-text column is refused, not
  blown up into thousands of features); a column that mixes numbers and
  text is refused at its first cell of the kind it holds fewer of (numbers
  where they are half or more of its written cells);
* the last column the class label (or the column `--label NAME` names:
  Titanic's `Survived` is its second), any text ("cat", "3", "yes"): the
  classes are its distinct values, numbered in sorted order (numerically
  where every label is a number, so "2" < "10");
* at least two classes and `MIN_PER_CLASS` rows of each (so that the
  stratified splits give every part each class).

The columns `--drop-columns` names (comma-separated; a name with a comma in
double quotes, as a CSV row writes it: `'id,"Name, full"'`) are left out of every
file; the columns that are no features (an id, free text, no cell at all:
`NoFeature`) are named together in one line that gives that flag.

A pair's test.csv has train.csv's header (a test file without the label
column, as a competition's, is refused: a model cannot be scored without
them) and only train.csv's classes; its category values join train.csv's
(a value only test.csv holds is a feature that is 0 in training).

Features are standardised with the mean and standard deviation of the outer
training part's cells (a constant feature is centred only; a missing cell is
then 0, that mean); the test part plays no part in it.

Every problem is a `DataError` of one line naming the file, the line and
column where it applies, what was expected and what was found.  The data's
SHA-256 (`data_digest`: the file's bytes, or the pair's as
awnn/data/digest.py takes files, and the label column's name where it is
not the last: the same file read with another label is another task) enters the comparison's --resume key and
each trial checks its node's copy against the driver's, so another file, or
the same path edited, is never mixed into one comparison.

`read_table` uses numpy only: the driver checks the file without importing
torch.
"""
from __future__ import annotations

import csv
import difflib
import hashlib
import io
import math
import os
import re
import shlex
from dataclasses import dataclass, field

import numpy as np

from ..config import COLUMNS_FORMAT, TABLE_KEYS, column_list, column_text
from . import DataError
from .checks import file_problem
from .digest import DIGEST_CHARS, files_digest

__all__ = ["TASK", "FILE", "PAIR", "MIN_PER_CLASS", "OPTIONS", "Table", "NoFeature", "table_files", "read_table", "load_table", "column_names", "drop_flag"]

TASK = "table"
FILE = "table.csv"
TABLE_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zip", ".tsv.gz")  # names a table file goes by
PAIR = ("train.csv", "test.csv")  # a folder's other layout: the test part as given
VAL_FRACTION = 0.125  # of a pair's train.csv: outer training/validation 70:10, as the 70/10/20 split's
MIN_PER_CLASS = 10
MAX_CATEGORIES = 50  # distinct values of a text feature column
_SHOWN_CLASSES = 10  # classes named in a table's summary
# what a numeric column's missing cell is written as (pandas writes '', R 'NA', UCI '?', numpy 'nan'); a text
# column's empty cell is the category MISSING_CATEGORY, its other cells (a '?', an 'NA') categories as written
MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})
MISSING_CATEGORY = "(missing)"
_MISSING_SHOWN = "'', 'NA', 'N/A', 'nan', 'null', 'None', '?'"
OPTIONS = TABLE_KEYS  # read_table's and load_table's keyword options, TrainConfig's keys of the same names
SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs"}  # what a row's cells may be separated by (a file uses one)
_LAST = " (the last column is the class label: where yours is another, name it with --label)"  # (Titanic's Survived is the 2nd)


@dataclass(frozen=True)
class Table:
    """A checked table: features (n, f) float32 as written (a text column one-hot), labels (n,) 0..C-1, the
    class names in label order, the feature names (`column=value` for a text column's) and the data's digest;
    `categories`: each text column's values in feature order; `n_test`: the last rows are a pair's test.csv
    (0: one file).  `path`: the file, or a pair's folder.  `missing`: each numeric column with empty or missing cells
    (NaN in `x`; `standardise` fills them) and how many, its indicator feature `name (missing)` beside it."""

    path: str
    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    features: list[str]
    digest: str
    categories: dict[str, list[str]]
    n_test: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    repeats: int = 0  # a pair's test.csv rows that repeat a train.csv row, cell for cell (a leak the summary names)
    label: str = ""  # the class label's column where --label named one other than the last ('' : the last)
    empty_columns: int = 0  # trailing columns with no name and no cell left out (a comma ending every line)
    alike: list[list[str]] = field(default_factory=list)  # classes written alike but for case, spaces or punctuation
    dropped: list[str] = field(default_factory=list)  # the columns --drop-columns left out, in file order
    formats: list[str] = field(default_factory=list)  # how each file not separated by commas was read ('x.csv separated by ...')

    @property
    def name(self) -> str:
        """The file's name for a comparison id (`table-<name>-<time>-...`): its stem (a folder's table.csv: the
        folder's name), lower case, each run of other characters than a-z and 0-9 one `_`, at most 24; may be ''."""
        base = os.path.basename(self.path)
        suffix = next((x for x in TABLE_SUFFIXES if base.lower().endswith(x) and len(base) > len(x)), None)  # (wine.csv.gz: wine)
        stem = base[:-len(suffix)] if suffix else os.path.splitext(base)[0]
        if self.n_test:  # a pair: its folder
            stem = os.path.basename(os.path.abspath(self.path))
        elif os.path.basename(self.path) == FILE:
            stem = os.path.basename(os.path.dirname(os.path.abspath(self.path)))
        return re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_")[:24].strip("_")

    @property
    def summary(self) -> str:
        """What was read, in one line (the comparison's `data_summary` param, the driver's log, the report's Setup)."""
        counts = np.bincount(self.y, minlength=len(self.classes))
        text = sum(len(v) for v in self.categories.values())
        numeric = len(self.features) - text - len(self.missing)
        columns = numeric + len(self.categories)
        kinds = f"{numeric} numeric" + (f", {len(self.categories)} text one-hot into {text}" if self.categories else "")
        shown = ", ".join(f"{c if len(c) <= 30 else c[:27] + '...'} ({int(n)})" for c, n in list(zip(self.classes, counts))[:_SHOWN_CLASSES])
        more = f", and {len(self.classes) - _SHOWN_CLASSES} more" if len(self.classes) > _SHOWN_CLASSES else ""
        def n(k: int, word: str) -> str:
            return f"{k} {word}{'' if k == 1 else 's'}"

        rows = n(len(self.y), 'row') + (f" ({len(self.y) - self.n_test} in {PAIR[0]}, {self.n_test} in {PAIR[1]}: the test part as given)"
                                        if self.n_test else "")
        gaps = ""
        if self.missing:
            listed = ", ".join(f"{c} {k}" for c, k in list(self.missing.items())[:5]) + (", ..." if len(self.missing) > 5 else "")
            gaps = (f"; missing cells in {n(len(self.missing), 'numeric column')} ({listed}): the training mean, and an "
                    "indicator feature each")
        leak = (f"; {self.repeats} of {PAIR[1]}'s rows repeat a {PAIR[0]} row cell for cell: not unseen examples"
                if self.repeats else "")
        unknown = [c for c in self.classes if c.lower() in MISSING]
        if unknown:  # UCI writes an unknown value '?': rows without a label, trained on as a class of their own?
            leak += (f"; class {' and '.join(map(repr, unknown))} is written as missing cells are: rows without a label? "
                     "(kept as a class)")
        if self.alike:  # 'Yes' and 'yes': one class written two ways, or two classes (EMNIST's 'a' and 'A')?
            groups = "; ".join(" and ".join(map(repr, g)) for g in self.alike[:3]) + ("; ..." if len(self.alike) > 3 else "")
            leak += f"; classes {groups} differ only in case, spaces or punctuation: one class written two ways?"
        if self.dropped:
            leak += f"; {n(len(self.dropped), 'column')} left out (--drop-columns): {', '.join(repr(c) if ',' in c else c for c in self.dropped)}"
        if self.empty_columns:
            leak += f"; {n(self.empty_columns, 'trailing column')} with no name and no cell left out"
        for how in self.formats:
            leak += f"; {how}"
        named = f" in column {self.label!r}" if self.label else ""
        return (f"{rows}; {n(len(self.features), 'feature')} from {n(columns, 'column')} ({kinds}); {len(self.classes)} classes{named}: "
                f"{shown}{more}{gaps}{leak}")


def table_files(data_root: str | None) -> tuple[str, ...]:
    """The CSV file(s) of `--data-root`: a folder's `table.csv`, or its `train.csv` and `test.csv` (the test part as
    given); else the path itself where it is a file or ends in .csv; else (nothing there, e.g. the default `data`) the
    table.csv the folder would hold.  A folder with both layouts is a DataError (which one was meant?)."""
    root = os.path.expanduser(data_root or "data")
    if not os.path.isdir(root) and (os.path.lexists(root) or root.lower().endswith(TABLE_SUFFIXES)):
        return (root,)
    single, pair = os.path.join(root, FILE), tuple(os.path.join(root, f) for f in PAIR)
    if any(os.path.lexists(f) for f in pair):
        if os.path.lexists(single):
            raise DataError(f"task {TASK}: {root} holds both {FILE} and {' / '.join(f for f in PAIR if os.path.lexists(os.path.join(root, f)))}; "
                            f"expected one layout: --data-root {shlex.quote(single)} reads {FILE} alone (split 70/10/20), or move it away "
                            f"to read {PAIR[0]} and {PAIR[1]} (the test part as given)")
        return pair
    return (single,)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# a number as spreadsheets format it: a currency sign, thousands separated by commas, a percent sign ('$1,234.50', '12%')
_FORMATTED = re.compile(r"[+-]?[$\u20ac\u00a3\u00a5]?[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?%?[$\u20ac\u00a3\u00a5]?")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?)?|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}")


def _formatting(cells: list[str]) -> str:
    """What makes these cells, every one a number as a spreadsheet formats it and one at least not a plain number, no
    numbers ('thousands separators, a percent sign'); '' where they are not all such numbers."""
    if not cells or not all(_FORMATTED.fullmatch(c) for c in cells):
        return ""
    text = "".join(cells)
    kinds = [what for what, chars in (("thousands separators", ","), ("a currency sign", "$\u20ac\u00a3\u00a5"), ("a percent sign", "%"))
             if any(ch in text for ch in chars)]
    return ", ".join(kinds)


def _shown(cell: str) -> str:
    return "an empty cell" if not cell else repr(cell if len(cell) <= 30 else cell[:27] + "...")


Rows = list  # [(path, line, row)]: every example row with the file and line it came from (for error lines)


def _files(body: Rows) -> list[tuple[str, int, int]]:
    """(path, start, end) of each file's rows in `body` (one file's rows are consecutive)."""
    out: list[tuple[str, int, int]] = []
    for i, (path, _, _) in enumerate(body):
        if not out or out[-1][0] != path:
            out.append((path, i, i))
        out[-1] = (path, out[-1][1], i + 1)
    return out


def _row_numbers(values: np.ndarray, files: list[tuple[str, int, int]], min_rows: int) -> tuple[str, int, int] | None:
    """(path, first, last) where, in some file (`_files`) with at least `min_rows` rows, the column is the row's
    position (first, first + 1, ..., in file order): an id numbering the rows; else None."""
    for path, start, end in files:
        v = values[start:end]
        if len(v) >= min_rows and np.all(v == np.round(v)) and np.all(np.diff(v) == 1.0):
            return path, int(v[0]), int(v[-1])
    return None


def _feature_column(header: list[str], j: int, body: Rows, files: list[tuple[str, int, int]]) -> tuple[np.ndarray, str | list[str], int]:
    """Feature column `j` of the rows `body`: (values (n,) float64, "number", missing cells: NaN) for a numeric column,
    (one-hot (n, k), its k values in order, 0) for a text column; a DataError naming the file, the line and the column
    for anything else."""
    where = f"column {j + 1} ({header[j]!r})"
    cells = [row[j].strip() for _, _, row in body]
    numbers = [_number(c) for c in cells]
    odd = [i for i, v in enumerate(numbers) if v is None or v != v]  # not a number, or NaN: a missing cell or text
    gone = {i for i in odd if cells[i].lower() in MISSING}
    n_gone = len(gone)
    if n_gone == len(cells):
        shown = ", ".join(sorted({repr(c) for c in cells})[:3])
        raise NoFeature(f"{' and '.join(p for p, _, _ in files)}, {where}: every cell is empty or missing ({shown}); "
                        "expected a feature: drop the column", header[j], "every cell empty or missing")
    text = [i for i in odd if i not in gone]
    formatting = _formatting([cells[i] for i in text]) if text else ""
    if formatting:  # '1,234', '$5.00', '12%': numbers the reader does not take as such (a category each, or an error)
        k = text[0]
        raise DataError(f"{body[k][0]}, line {body[k][1]}, {where}: {_shown(cells[k])}, a number written with {formatting}; "
                        "expected plain numbers (1234.5; a missing cell as one of "
                        f"{_MISSING_SHOWN}): save the column without that formatting (a percentage as 12 or 0.12)")
    if len(text) <= len(cells) - n_gone - len(text):  # a numeric column (at most half its written cells text: each an error)
        values = np.array([math.nan if v is None else v for v in numbers], dtype=np.float64)
        for i in gone:
            values[i] = math.nan
        bad = text + np.flatnonzero(np.isinf(values)).tolist()
        if bad:
            k = min(bad)
            mixed = "; the column mixes numbers and text" if numbers[k] is None else ""
            raise DataError(f"{body[k][0]}, line {body[k][1]}, {where}: {_shown(cells[k])}; expected a finite number (a feature), "
                            f"or a missing cell written as one of {_MISSING_SHOWN}{mixed}")
        if np.nanmax(np.abs(values), initial=0.0) > np.finfo(np.float32).max:
            k = int(np.nanargmax(np.abs(values)))
            raise DataError(f"{body[k][0]}, line {body[k][1]}, {where}: {values[k]:g} is beyond float32's range; expected a feature a model can take")
        ids = _row_numbers(values, files, 2 * MIN_PER_CLASS)
        if ids:  # a PassengerId: no feature, and a leak where the rows are in class order
            raise NoFeature(f"{ids[0]}, {where}: {ids[1]}, {ids[1] + 1}, ..., {ids[2]}, the row's position in the file: an id "
                            "numbering the rows, not a feature (where the rows are in class order it gives the class away): drop the column",
                            header[j], f"an id numbering the rows {ids[1]}, {ids[1] + 1}, ..., {ids[2]}")
        return values, "number", n_gone
    if len(text) < len(cells) - n_gone:  # a text column with a number in it: "3" is no category among "red", "blue"
        k = next(i for i, v in enumerate(numbers) if v is not None and i not in gone)
        path, line, cell = body[k][0], body[k][1], cells[k]
        raise DataError(f"{path}, line {line}, {where}: {_shown(cell)}, a number in a text column; expected a category "
                        "(a column is numbers, or categories none of which is a number)")
    cells = [c or MISSING_CATEGORY for c in cells]
    values = sorted(set(cells))
    if len(values) > MAX_CATEGORIES:
        dates = all(_DATE.fullmatch(v) for v in values if v != MISSING_CATEGORY)
        advice = ("these are dates: a day is no category; write them as numbers (days since a start, or year, month and day "
                  "columns)" if dates else "an id or free text is no feature: drop the column")
        raise NoFeature(f"{' and '.join(p for p, _, _ in files)}, {where}: {len(values)} distinct text values in {len(cells)} rows; a text feature is "
                        f"a category of at most {MAX_CATEGORIES} values, one-hot encoded ({advice})", header[j],
                        f"{len(values)} distinct {'dates' if dates else 'text values'}")
    index = {v: i for i, v in enumerate(values)}
    onehot = np.zeros((len(cells), len(values)), dtype=np.float64)
    onehot[np.arange(len(cells)), [index[c] for c in cells]] = 1.0
    return onehot, values, 0


class NoFeature(DataError):
    """A column that is no feature (an id, free text, no cell at all): dropped by --drop-columns; read_table names
    every such column of a file in one line."""

    def __init__(self, message: str, column: str, why: str):
        super().__init__(message)
        self.column, self.why = column, why


def _class_order(names: list[str]) -> list[str]:
    values = [_number(n) for n in names]
    if all(v is not None and math.isfinite(v) for v in values):
        return [n for _, n in sorted(zip(values, names))]
    return sorted(names)


def _bare(text: str) -> str:
    """A label without case, spaces or punctuation (how two writings of one class are told apart)."""
    return re.sub(r"[\W_]+", "", text).lower()


def _alike(classes: list[str]) -> list[list[str]]:
    """Groups of classes that differ only in case, spaces or punctuation ('Yes' and 'yes')."""
    groups: dict[str, list[str]] = {}
    for c in classes:
        if _bare(c):
            groups.setdefault(_bare(c), []).append(c)
    return [g for g in groups.values() if len(g) > 1]


def _one_number(classes: list[str]) -> list[str]:
    """The first group of classes that are one finite number written two or more ways ('1', '1.0'); else []."""
    seen: dict[float, list[str]] = {}
    for c in classes:
        v = _number(c)
        if v is not None and math.isfinite(v):
            seen.setdefault(v, []).append(c)
    return next((g for g in seen.values() if len(g) > 1), [])


def _near_class(label: str, classes: list[str]) -> str:
    """'; ... differs from 'x' only in case, spaces or punctuation' where one class is written so (UCI's adult.test
    writes '>50K.' for adult.data's '>50K'), or is the same number ('1.0' for '1'); else ''."""
    same = _one_number([label, *classes])
    if label in same:
        other = next(c for c in same if c != label)
        return f"; it is the number {other!r} written otherwise: write the labels alike in both files"
    near = [c for c in classes if _bare(c) == _bare(label)] if _bare(label) else []
    if len(near) != 1:
        return ""
    return f"; it differs from {near[0]!r} only in case, spaces or punctuation: write the labels alike in both files"


def _missing_file(path: str, problem: str, pair: bool) -> DataError:
    """What --data-root should name, and the CSV files the folder holds instead."""
    folder = os.path.dirname(path)
    if pair:
        other = next(f for f in PAIR if f != os.path.basename(path))
        return DataError(f"task {TASK}: expected {os.path.basename(path)} beside {other} in {folder} ({problem}); a folder holds "
                         f"{FILE} (split 70/10/20 here), or {PAIR[0]} and {PAIR[1]} (the test part as given)")
    try:
        others = sorted(f for f in os.listdir(folder) if f.lower().endswith(TABLE_SUFFIXES) and os.path.isfile(os.path.join(folder, f))) \
            if os.path.isdir(folder) else []
    except OSError:
        others = []
    near = (f"; {folder} holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}: "
            f"--data-root {shlex.quote(os.path.join(folder, others[0]))} reads {'it' if len(others) == 1 else 'the first'}") if others else ""
    return DataError(f"task {TASK}: expected a CSV file at {path} ({problem}){near}; --data-root must name the CSV file, "
                     f"or a folder that holds {FILE}, or {PAIR[0]} and {PAIR[1]} (header row, feature columns (numbers or "
                     "categories), the class label last or named by --label)")


def _read_rows(path: str, named: bool = False) -> tuple[bytes, int, list[str], Rows, int, str]:
    """One CSV file: (its bytes, the header's line, the header, the example rows, the empty columns left out), each
    row as long as the header; a DataError for a file that is no such table.  `named`: --label names the class label's
    column (the file must have a header holding it: a first row read as an example is not looked for).  Trailing
    columns with no name and no cell (a comma ending every line, as spreadsheets export) hold nothing: left out."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    text, read_as = _file_text(path, raw)
    numbered = _numbered_rows(path, text, ",")
    if not numbered:
        raise DataError(f"{path}: empty; expected a header row, then one row per example (features, then the class label)")
    first = [c.strip() for c in numbered[0][1]]
    sep = ","
    if len(first) == 1 and re.fullmatch(r"sep=.?", first[0].lower()) or first == ["sep=", ""]:  # Excel's separator line
        sep = numbered[0][1][0].lstrip()[4:5] or ","  # ('sep=,' reads as the cells 'sep=' and '')
        if sep not in SEPARATORS:
            raise DataError(f"{path}, line {numbered[0][0]}: {numbered[0][1][0]!r}, Excel's line naming the separator {sep!r}; expected "
                            f"a CSV file separated by {' or '.join(SEPARATORS.values())}: save it as CSV with commas")
        if sep != ",":  # (Excel writes 'sep=;' where the list separator is a semicolon: German, French, ... settings)
            numbered = _numbered_rows(path, text, sep)
        numbered = numbered[1:]  # (the separator line; the header follows)
        if not numbered:
            raise DataError(f"{path}: empty; expected a header row, then one row per example (features, then the class label)")
    else:  # a file separated by semicolons (a spreadsheet's CSV under such settings) or tabs?
        sep = _separator(path, text, numbered)
        if sep != ",":
            numbered = _numbered_rows(path, text, sep)
    line, header = numbered[0]
    header = [c.strip() for c in header]
    if len(header) < 2:
        other = next((name for mark, name in (("|", "bars"),) if mark in header[0]), None)
        hint = f"; the file looks separated by {other}: save it as CSV with commas" if other else ""
        raise DataError(f"{path}, line {line}: {len(header)} column; expected at least 2 (one or more features, then the class label){hint}")
    decimal = sep == ";" and _decimal_commas(path, numbered[1:])  # (a semicolon's file writes 1,5 for 1.5)
    if all(_number(c) is not None for c in header) and not _default_names(header):
        raise DataError(f"{path}, line {line}: every cell is a number ({', '.join(header[:4])}{', ...' if len(header) > 4 else ''}); "
                        "expected a header row of column names first")
    body = numbered[1:]
    if not body:
        raise DataError(f"{path}: a header row and no example; expected one row per example after it")
    empty = 0
    while len(header) - empty > 2 and not header[len(header) - 1 - empty] and all(
            len(r) < len(header) - empty or not r[len(header) - 1 - empty].strip() for _, r in body):
        empty += 1
    if empty:  # (a row without the trailing commas is as long as the header left)
        header = header[:-empty]
        body = [(n, r[:len(header)] if len(r) == len(header) + empty else r) for n, r in body]
    unnamed = [j for j, c in enumerate(header) if not c]
    if unnamed:  # pandas' to_csv writes its index so: row numbers as a feature, a leak where rows are in class order
        j = unnamed[0]
        index = j == 0 and all(len(r) > 0 and r[0].strip() == str(k) for k, (_, r) in enumerate(body[:1000]))
        raise DataError(f"{path}, line {line}, column {j + 1}: no column name; expected a name for every column"
                        + ("; this column numbers the rows 0, 1, 2, ..., as pandas' to_csv writes its index: drop it "
                           "(df.to_csv(path, index=False)), a row number is no feature" if index else ""))
    seen: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in seen:  # two features of one name (or a label named as a feature): which is which in a report?
            raise DataError(f"{path}, line {line}, column {j + 1}: {name!r} again (column {seen[name] + 1} has that name); "
                            "expected each column named once")
        seen[name] = j
    for n, row in body:
        if len(row) != len(header):
            raise DataError(f"{path}, line {n}: {len(row)} columns; expected {len(header)}, as the header has")
    fits = 0 if named else _reads_as_an_example(header, [row for _, row in body])
    if fits:  # a file without a header (UCI's adult.data): its first example would be read as the column names
        raise DataError(f"{path}, line {line}: reads as an example, not a header: its last cell {header[-1]!r} is a class "
                        f"label of the rows below and {fits} of its {len(header) - 1} feature cells fit their columns' "
                        "values; expected a header row of column names first (add one: the first example is read as names otherwise)")
    read_as += ([f"separated by {SEPARATORS[sep]}"] if sep != "," else []) + (["decimal commas read as points"] if decimal else [])
    how = f"{os.path.basename(path)} " + ", ".join(read_as) if read_as else ""
    return raw, line, header, [(path, n, row) for n, row in body], empty, how


# a UTF-16 file's byte order mark, and the codec that reads the text after it
UTF16_MARKS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
# compressed files read as the CSV they hold (pandas' read_csv reads them so): first bytes -> (name, decompress)
COMPRESSED = {b"\x1f\x8b": ("gzip", "gzip"), b"BZh": ("bzip2", "bz2"), b"\xfd7zXZ\x00": ("xz", "lzma")}
# files that hold a table but are no CSV: first bytes -> what they are, and how to get a CSV from them
NOT_CSV = {
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an Excel 97-2003 workbook (.xls): save the sheet as 'CSV UTF-8'",
    b"PAR1": "a Parquet file: write it as CSV (pandas: pd.read_parquet(path).to_csv('table.csv', index=False))",
    b"\x89HDF": "an HDF5 file: write the table as CSV (pandas: pd.read_hdf(path).to_csv('table.csv', index=False))",
    b"SQLite format 3\x00": "a SQLite database: export the table as CSV (sqlite3 -header -csv file.db 'select * from t' > table.csv)",
    b"%PDF": "a PDF document",
}
SPREADSHEETS = {"xl/workbook.xml": "an Excel workbook (.xlsx)", "content.xml": "an OpenDocument spreadsheet (.ods)"}


def _file_text(path: str, raw: bytes) -> tuple[str, list[str]]:
    """A table file's text and how it was read ('gzip-compressed', 'UTF-16 text': [] for a plain UTF-8 file); a DataError
    naming what the file is where it holds no CSV text (a workbook, a Parquet file, ...)."""
    read_as = []
    packed = next(((name, module) for mark, (name, module) in COMPRESSED.items() if raw.startswith(mark)), None)
    if packed:
        name, module = packed
        try:
            raw = __import__(module).decompress(raw)
        except Exception as e:  # noqa: BLE001 - a cut or damaged archive (EOFError, OSError, zlib.error, lzma.LZMAError, ...)
            raise DataError(f"{path}: {name}-compressed, and it cannot be unpacked ({type(e).__name__}: {e}); expected the "
                            "whole file as written (was its copy cut short?)") from None
        read_as.append(f"{name}-compressed")
    elif raw.startswith(b"PK\x03\x04") or raw.startswith(b"PK\x05\x06"):
        raw, member = _zipped_csv(path, raw)
        read_as.append(f"holding {member}")
    for mark, what in NOT_CSV.items():
        if raw.startswith(mark):
            inside = f" inside the {read_as[0].split('-')[0]} file" if packed else ""
            raise DataError(f"{path}: {what.split(':')[0]}{inside}, not CSV text; expected a CSV file"
                            + (f": {what.split(': ', 1)[1]}" if ": " in what else ""))
    codec = next((codec for mark, codec in UTF16_MARKS.items() if raw.startswith(mark)), "")
    if codec:  # Excel's "Unicode Text" (tabs), Windows PowerShell 5's Out-File and `>` (commas): UTF-16 with its byte order mark
        text = _utf16_text(path, raw, codec)
        read_as.append("UTF-16 text")
    else:
        text = _utf8_text(path, raw)
    if "\x00" in text:  # (no CSV writes NUL; UTF-16 without a byte order mark has one in every ASCII character)
        at = text.index("\x00")
        utf16 = text.count("\x00") * 3 > len(text)
        raise DataError(f"{path}, line {text.count(chr(10), 0, at) + 1}: a NUL character, which no CSV holds ("
                        + ("every second byte is one: UTF-16 text without a byte order mark" if utf16 else "a binary file, or a damaged one")
                        + "); expected a CSV file in UTF-8: save it as 'CSV UTF-8'")
    return text, read_as


def _zipped_csv(path: str, raw: bytes) -> tuple[bytes, str]:
    """The bytes of the one CSV file a zip archive holds, and its name (pandas reads a zip of one file so); a DataError
    for a workbook (.xlsx, .ods: zip archives too), an archive of no or several CSV files, or a damaged one."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            sheet = next((what for member, what in SPREADSHEETS.items() if member in names), None)
            if sheet:
                raise DataError(f"{path}: {sheet}, not CSV text; expected a CSV file: save the sheet as 'CSV UTF-8'")
            tables = [n for n in names if n.lower().endswith(TABLE_SUFFIXES) and not n.startswith("__MACOSX/")]
            if len(tables) != 1:
                held = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "") if names else "nothing"
                raise DataError(f"{path}: a zip archive of {len(tables) or 'no'} CSV files ({held}); expected one CSV file, "
                                "or an archive of exactly one: unpack it and give --data-root the file or folder")
            return z.read(tables[0]), tables[0]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as e:
        raise DataError(f"{path}: a zip archive that cannot be read ({type(e).__name__}: {e}); expected a CSV file, or an "
                        "archive of exactly one, whole") from None


def _utf16_text(path: str, raw: bytes, codec: str) -> str:
    """A UTF-16 file's text, its mark left out; a DataError naming the line of the first code unit that is no text (a
    half surrogate, a file cut after an odd number of bytes)."""
    body = raw[2:]
    try:
        return body.decode(codec)
    except UnicodeDecodeError as e:
        at = body[:e.start - e.start % 2].decode(codec, errors="replace").count("\n") + 1
        found = "a last byte without its pair: the file is cut short" if e.reason == "truncated data" else f"{body[e.start:e.end]!r}, no UTF-16 text"
        raise DataError(f"{path}, line {at}: {codec.upper()} text with a byte order mark, and at byte offset {e.start + 2}: {found}; "
                        "expected the file as its program saved it, or saved again as 'CSV UTF-8'") from None


def _utf8_text(path: str, raw: bytes) -> str:
    """A file's text in UTF-8 (a byte order mark left out); a DataError naming the line of the first byte that is not."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        at = raw[:e.start].count(b"\n") + 1
        raise DataError(f"{path}, line {at}: not UTF-8 text (at byte offset {e.start}: "
                        f"{raw[e.start:e.start + 1]!r}, as Latin-1 or Windows-1252 write an accented letter; Excel's plain 'CSV' "
                        "saves so on Windows); expected a CSV file in UTF-8 or UTF-16: save it as 'CSV UTF-8'") from None


_SNIFF_LINES = 50  # lines whose cells `_separator` counts


def _separator(path: str, text: str, by_commas: list[tuple[int, list[str]]]) -> str:
    """The separator of a file without Excel's `sep=` line: of commas, semicolons and tabs, the one that splits the first
    lines into the same number of cells, 2 or more, the most cells where several do (a semicolon file whose header
    names 'Preis, EUR' splits at commas into 2 cells a line too), commas on a tie; commas where none does (the checks
    that follow say what is wrong).  `by_commas`: the file's rows split at commas."""
    head = by_commas[:_SNIFF_LINES]
    if not any(other in c for _, row in head for c in row for other in SEPARATORS if other != ","):
        return ","  # (the common case: nothing to count)
    if len(head[0][1]) == 1:  # a header of one column holding a semicolon or a tab: that one (a row of another length
        return next(other for other in SEPARATORS if other != "," and other in head[0][1][0])  # is then said by its line)
    lines = text.splitlines(keepends=True)
    prefix = "".join(lines[:_SNIFF_LINES + 1])
    best, cells = ",", 0
    for sep in SEPARATORS:
        rows = _numbered_rows(path, prefix, sep)
        if len(lines) > _SNIFF_LINES + 1 and len(rows) > 1:
            rows = rows[:-1]  # (the prefix may end inside a quoted cell)
        counts = {len(r) for _, r in rows}
        if len(counts) == 1 and min(counts) >= 2 and min(counts) > cells:
            best, cells = sep, min(counts)
    return best


def _numbered_rows(path: str, text: str, sep: str) -> list[tuple[int, list[str]]]:
    """The rows of `text` split at `sep`, numbered from line 1, blank lines left out."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV file ({e})") from None
    return [(i + 1, r) for i, r in enumerate(rows) if r and any(c.strip() for c in r)]


# a number with a decimal comma, and one with a decimal point (a cell as written, stripped)
_DECIMAL_COMMA = re.compile(r"[+-]?(?:\d+,\d*|,\d+)(?:[eE][+-]?\d+)?")
_DECIMAL_POINT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?")
_POINT_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:\.\d{3})+,\d*")  # 1.234,5: thousands separated by points, as such settings format them


def _decimal_commas(path: str, rows: list[tuple[int, list[str]]]) -> bool:
    """Whether the rows of a file separated by semicolons write their numbers with decimal commas (as the settings that
    separate by semicolons do: 1,5); each such cell is then rewritten with a point, in place.  A file that writes
    numbers both ways is a DataError naming one of each (which is it: 1,234 a thousand, or one and a bit?)."""
    comma = point = None
    for n, row in rows:
        for cell in row:
            c = cell.strip()
            if _POINT_THOUSANDS.fullmatch(c):
                raise DataError(f"{path}, line {n}: {c!r}, a number written with thousands separators; expected plain numbers "
                                f"({c.replace('.', '')}): save the column without that formatting")
            if comma is None and _DECIMAL_COMMA.fullmatch(c):
                comma = (n, c)
            elif point is None and _DECIMAL_POINT.fullmatch(c):
                point = (n, c)
        if comma and point:
            raise DataError(f"{path}: separated by semicolons, with numbers written with a decimal comma (line {comma[0]}: {comma[1]!r}) "
                            f"and with a decimal point (line {point[0]}: {point[1]!r}); expected one way (a decimal comma, as "
                            "such a file writes them, or a point), so that 1,234 cannot be read as either")
    if comma is None:
        return False
    for _, row in rows:
        for j, cell in enumerate(row):
            c = cell.strip()
            if _DECIMAL_COMMA.fullmatch(c):
                row[j] = c.replace(",", ".")
    return True


def _column_named(path: str, line: int, header: list[str], name: str, flag: str) -> int:
    """The index of the column `name` (given by `flag`); a DataError naming the header's columns where it has none."""
    if name in header:
        return header.index(name)
    near = [c for c in header if c.casefold() == name.casefold()] or difflib.get_close_matches(name, header, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    shown = ", ".join(map(repr, header[:12])) + (f", ... ({len(header)} columns)" if len(header) > 12 else "")
    what = "the class label's column" if flag == "--label" else "a column to leave out"
    raise DataError(f"{path}, line {line}: no column named {name!r} ({flag}){hint}; expected the name of {what}, as the "
                    f"header writes it: {shown}")


def column_names(text: str) -> list[str]:
    """The column names of --drop-columns (awnn/config.py's COLUMNS_FORMAT: comma-separated, each stripped, a name with
    a comma in double quotes); a DataError saying what is wrong (an empty name, a quote left open)."""
    try:
        return column_list(text)
    except ValueError as e:
        raise DataError(f"--drop-columns {text!r}: {e}; expected {COLUMNS_FORMAT}") from None


def drop_flag(names: list[str]) -> str:
    """The --drop-columns flag that leaves out `names`, as a shell reads it back: '--drop-columns sample,note',
    "--drop-columns 'id,\"Name, full\"'" (a name with a comma quoted for the flag, the whole quoted for the shell)."""
    return f"--drop-columns {shlex.quote(column_text(names))}"


def _label_column(path: str, line: int, header: list[str], label: str) -> int:
    """The index of the class label's column: the one named `label` (--label), else the last."""
    return _column_named(path, line, header, label, "--label") if label else len(header) - 1


def _dropped_columns(path: str, line: int, header: list[str], k: int, names: list[str]) -> set[int]:
    """The indices of the columns --drop-columns names: each in the header, not the class label's, a feature left."""
    out: set[int] = set()
    for name in names:
        j = _column_named(path, line, header, name, "--drop-columns")
        if j == k:
            raise DataError(f"{drop_flag([name])}: {path}'s column {j + 1} ({name!r}) is the class label's column; expected "
                            "feature columns to leave out")
        out.add(j)
    if len(out) == len(header) - 1:
        raise DataError(f"{drop_flag(names)}: leaves {path} no feature column; expected at least one to keep")
    return out


def _default_names(header: list[str]) -> bool:
    """pandas' names of a frame made from an array, 0, 1, ..., k (or R's and others' 1, ..., k): names, not an example."""
    return header in ([str(j) for j in range(len(header))], [str(j + 1) for j in range(len(header))])


def _reads_as_an_example(header: list[str], rows: list[list[str]]) -> int:
    """How many of the header's feature cells fit their column like a value (a number over a numeric column, a value
    the column holds over a text one), where the header's last cell is also a class label below and at least half fit;
    else 0.  A real header names its label column otherwise than one of its classes."""
    if header[-1] not in {r[-1].strip() for r in rows}:
        return 0
    if _default_names(header):
        return 0  # (a label column `2` among classes 0, 1, 2)
    fits = 0
    for j, name in enumerate(header[:-1]):
        cells = [r[j].strip() for r in rows]
        numeric = sum(_number(c) is not None for c in cells) * 2 >= len(cells)
        fits += (_number(name) is not None) if numeric else (name in set(cells))
    return fits if fits * 2 >= len(header) - 1 else 0


def _same_header(train: str, header: list[str], test: str, line: int, other: list[str], k: int) -> None:
    """The test file's header is the training file's (the class label's column: index k): else a DataError saying how
    it differs."""
    if other == header:
        return
    if other == header[:k] + header[k + 1:]:  # a competition's test file: the labels are kept back
        which = "last column" if k == len(header) - 1 else f"class column (column {k + 1})"
        raise DataError(f"{test}, line {line}: no class column {header[k]!r} (the header is {train}'s without its {which}); "
                        "expected the test examples with their labels: a model cannot be scored without them")
    if len(other) != len(header):
        raise DataError(f"{test}, line {line}: {len(other)} columns; expected {len(header)}, as {train}'s header has")
    j = next(j for j, (a, b) in enumerate(zip(header, other)) if a != b)
    raise DataError(f"{test}, line {line}, column {j + 1}: {other[j]!r}; expected {header[j]!r}, as in {train} "
                    "(the same columns in the same order)")


def read_table(data_root: str | None, label: str = "", drop_columns: str = "") -> Table:
    """Read and check the task's CSV file(s) (see the module docstring); `label`: the class label's column (--label; '':
    the last); `drop_columns`: columns left out, comma-separated (--drop-columns; '': none)."""
    label = (label or "").strip()
    drop = column_names(drop_columns)
    files = table_files(data_root)
    for path in files:
        problem = file_problem(path)
        if problem:
            raise _missing_file(path, problem, len(files) == 2)
    raw, line, header, body, empty, how = _read_rows(files[0], named=bool(label))
    formats = [how] if how else []
    k = _label_column(files[0], line, header, label)
    dropped = _dropped_columns(files[0], line, header, k, drop)
    last = k == len(header) - 1
    hint = _LAST if not label else f" (the class label's column, --label {label})"
    where = f"column {k + 1} ({header[k]!r})"
    n_test = 0
    if len(files) == 2:
        _, test_line, test_header, test_body, _, test_how = _read_rows(files[1], named=bool(label))
        formats += [test_how] if test_how else []
        _same_header(files[0], header, files[1], test_line, test_header, k)
        n_test = len(test_body)
        body = body + test_body
    n_train = len(body) - n_test
    labels: list[str] = [row[k].strip() for _, _, row in body]
    if not all(labels):
        empty = [i for i, c in enumerate(labels) if not c]
        path, n = body[empty[0]][0], body[empty[0]][1]
        more = f" (and {len(empty) - 1} more rows without one: drop them, a row without a class cannot be trained on or scored)" \
            if len(empty) > 1 else ""
        raise DataError(f"{path}, line {n}, {where}: an empty class label{more}{hint}")
    columns, names, categories, missing = [], [], {}, {}
    parts = _files(body)
    no_features: list[NoFeature] = []
    unread: list[DataError] = []
    for j in range(len(header)):
        if j == k or j in dropped:
            continue
        try:
            values, kind, gaps = _feature_column(header, j, body, parts)
        except NoFeature as e:  # (every such column said at once: a Titanic file has four)
            no_features.append(e)
            continue
        except DataError as e:  # a cell a column cannot hold: said with every other column's problem, one read for all
            unread.append(e)
            continue
        if kind == "number":
            columns.append(values[:, None])
            names.append(header[j])
            if gaps:  # NaN (filled by `standardise`) and an indicator, so a model can tell a filled cell
                missing[header[j]] = gaps
                columns.append(np.isnan(values)[:, None].astype(np.float64))
                names.append(f"{header[j]} (missing)")
        else:
            columns.append(values)
            categories[header[j]] = kind
            names += [f"{header[j]}={v}" for v in kind]
    if unread:
        _unread_columns(files[0], unread, no_features, drop)
    if no_features:
        _no_features(files[0], no_features, drop)
    x = np.concatenate(columns, axis=1)
    path = files[0]
    classes = _class_order(sorted(set(labels[:n_train])))
    if len(classes) < 2:
        column = "the last column" if not label else f"column {k + 1}"
        raise DataError(f"{path}: one class ({classes[0]!r}) in {column} ({header[k]!r}); expected at least 2 classes{hint}")
    twice = _one_number(classes)
    if twice:  # '1' and '1.0' (pandas writes an integer column with gaps as floats): one class split in two
        first = {c: next(body[i][1] for i in range(n_train) if labels[i] == c) for c in twice}
        shown = " and ".join(f"{c!r} (line {first[c]} first)" for c in twice)
        raise DataError(f"{path}, {where}: classes {shown} are one number written two ways; expected each class written "
                        "one way (or they would be two classes)")
    index = {c: i for i, c in enumerate(classes)}
    for (test, n, _), cell in list(zip(body, labels))[n_train:]:
        if cell not in index:
            shown = ", ".join(map(repr, classes[:5])) + (", ..." if len(classes) > 5 else "")
            near = _near_class(cell, classes)
            raise DataError(f"{test}, line {n}, {where}: class {_shown(cell)} is not among "
                            f"{path}'s classes ({shown}){near}; expected test examples of the classes a model is trained on")
    y = np.array([index[c] for c in labels], dtype=np.int64)
    counts = np.bincount(y[:n_train], minlength=len(classes))
    few = [f"{classes[i]!r}: {int(n)}" for i, n in enumerate(counts) if n < MIN_PER_CLASS]
    if few and len(classes) > n_train // MIN_PER_CLASS:  # more classes than the rows can hold: not a class label
        numeric = all(_number(c) is not None for c in classes)
        raise DataError(f"{path}, {where}: {len(classes)} distinct labels in {n_train} rows; "
                        f"expected a class label with at least {MIN_PER_CLASS} rows of each class{hint}"
                        + ("; task table is classification: a continuous target (regression) is not supported" if numeric else ""))
    if few:
        shown = ", ".join(few[:5]) + (f" and {len(few) - 5} more" if len(few) > 5 else "")
        parts = "70/10/20 and 90/10" if not n_test else f"training/validation and 90/10 (of {os.path.basename(path)})"
        raise DataError(f"{path}: too few rows of class {shown}; expected at least {MIN_PER_CLASS} of each class "
                        f"(the stratified {parts} splits need every class in every part)")
    repeats = 0
    if n_test:
        seen = {tuple(c.strip() for c in row) for _, _, row in body[:n_train]}
        repeats = sum(tuple(c.strip() for c in row) in seen for _, _, row in body[n_train:])
        folder = os.path.dirname(path)
        digest = files_digest(folder, list(PAIR))
        path = folder
    else:
        digest = hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]
    # the same bytes read with another class column, or other columns left out, are another task: another digest (the
    # label last and nothing dropped: as before)
    read_as = ([f"--label {header[k]}"] if not last else []) + ([f"--drop-columns {column_text(sorted(header[j] for j in dropped))}"] if dropped else [])
    if read_as:
        digest = hashlib.sha256("\n".join([digest, *read_as]).encode()).hexdigest()[:DIGEST_CHARS]
    return Table(path=path, x=x.astype(np.float32), y=y, classes=classes, features=names, digest=digest,
                 categories=categories, n_test=n_test, missing=missing, repeats=repeats, label="" if last else header[k],
                 empty_columns=empty, alike=_alike(classes), dropped=[header[j] for j in sorted(dropped)], formats=formats)


def _no_features(path: str, found: list[NoFeature], drop: list[str]) -> None:
    """One DataError for the columns that are no features: one's own line, or every one named, each with why; both say
    how --drop-columns leaves them out."""
    flag = drop_flag([*drop, *(e.column for e in found)])
    if len(found) == 1:
        raise DataError(f"{found[0]}, or pass {flag}")
    listed = "; ".join(f"{e.column!r} ({e.why})" for e in found)
    raise DataError(f"{path}: {len(found)} columns are no features: {listed}; drop them from the file, or pass {flag}")


def _unread_columns(path: str, unread: list[DataError], found: list[NoFeature], drop: list[str]) -> None:
    """One DataError for the columns with a cell they cannot hold (`unread`: each column's first such cell) and those that
    are no features: one column's error as it is, else every one numbered in one line (a file exported from a
    spreadsheet often has several: until now each took a run to find)."""
    if len(unread) == 1 and not found:
        raise unread[0]
    parts = [str(e) for e in unread]
    if found:
        listed = "; ".join(f"{e.column!r} ({e.why})" for e in found)
        parts.append(f"{len(found)} column{'s are' if len(found) > 1 else ' is'} no feature: {listed}; drop "
                     f"{'them' if len(found) > 1 else 'it'} from the file, or pass {drop_flag([*drop, *(e.column for e in found)])}")
    n = len(unread) + len(found)
    raise DataError(f"{path}: {n} columns to fix: " + " ".join(f"({i}) {p}" + ("" if i == len(parts) else ";") for i, p in enumerate(parts, 1)))


def standardise(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """x with every feature centred and scaled by the mean and standard deviation over `rows` of its cells there
    (a feature constant there is centred only); a missing cell (NaN) is then 0, the mean over `rows` (0 too where
    the feature has no cell there)."""
    part = x[rows].astype(np.float64)
    seen = (~np.isnan(part)).sum(0)
    mean = np.where(seen > 0, np.nansum(part, 0) / np.maximum(seen, 1), 0.0)
    std = np.sqrt(np.where(seen > 0, np.nansum((part - mean) ** 2, 0) / np.maximum(seen, 1), 1.0))
    std[std == 0.0] = 1.0
    return np.nan_to_num((x - mean) / std, nan=0.0).astype(np.float32)


def load_table(data_root: str | None = None, data_seed: int = 0, label: str = "", drop_columns: str = ""):
    """The task: the checked table (`label`: its class label's column, '': the last; `drop_columns`: columns left out),
    split 70/10/20 (inner 90/10) by `data_seed`, standardised on the outer training part."""
    import torch

    from . import TensorTask
    from .splits import official_test_splits, outer_inner_splits

    t = read_table(data_root, label, drop_columns)
    if t.n_test:  # a pair: test.csv is the outer test part
        n_train = len(t.y) - t.n_test
        outer, inner = official_test_splits(t.y[:n_train], t.n_test, VAL_FRACTION, data_seed)
    else:
        outer, inner = outer_inner_splits(t.y, seed=data_seed)
    x = standardise(t.x, outer.train)
    task = TensorTask(TASK, torch.from_numpy(x), torch.from_numpy(t.y), outer, inner, num_classes=len(t.classes))
    task.data_digest = t.digest
    task.classes = t.classes
    return task
