"""Consistency checks of the raw dataset files, run before any library reads them.

torch-geometric, torchvision and our own readers are forgiving in ways that
train on the wrong data: `TUDataset` drops a last line without its newline
and every graph after the last one with an edge, a short label file ends in
a raw RuntimeError.  Each loader therefore calls the check of its format
first, on the raw files with cheap numpy/pandas reads, and every finding is
a `DataError` of one line that names the file, the line (or item) where it
applies, what was expected and what was found:

    check_tu         TU text files: columns, numbers, counts across files,
                     node ids in range, sorted contiguous graph ids, edges
                     inside one graph, one label per graph
    check_mnist      IDX files: magic numbers, header counts against the
                     file size, as many labels as images, labels 0..9
    cifar_batch      one unpickled CIFAR batch: keys, shape, labels
    check_text_pair  two parallel text files: not empty, valid utf-8, a
                     complete last line, the same number of lines

Each check reads the files itself, so a truncation or a count mismatch is
caught whatever the library would have made of it (docs/domains.md, "What
is checked").
"""
from __future__ import annotations

import io
import os
import shlex

import numpy as np

from . import DataError

__all__ = ["url_problem", "file_problem", "file_problems", "missing_files_error", "read_rows", "check_tu", "TU_OPTIONAL", "check_idx", "check_mnist", "cifar_batch", "read_text", "check_text_pair"]


def file_problem(path: str) -> str | None:
    """None when `path` is a regular file (through any symbolic link) this
    process may read; else what it is instead, for an error line: "missing",
    "a broken symbolic link to ...", "a folder", "a named pipe (FIFO)", ...

    Data files are read by the driver and again by every trial: a named pipe
    would block each later read for ever, a folder or a device is no data
    file; each is named as what it is, not as "missing"."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a broken symbolic link to {os.readlink(path)}"
        return "missing"
    except NotADirectoryError:  # a folder on its way is a file (missing_files_error names which)
        return "missing"
    except PermissionError:
        return "not reachable by this user (permission denied on a folder above it)"
    except OSError as e:  # a gone mount (ESTALE, EIO), a loop of links
        return f"unreadable here ({e.strerror or e})"
    if stat.S_ISREG(st.st_mode):
        return None if os.access(path, os.R_OK) else "not readable by this user (permission denied)"
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((f"{name}, not a regular file" for test, name in kinds if test(st.st_mode)), "not a regular file")


def file_problems(folder: str, files: list[str]) -> str | None:
    """The problems of `files` in `folder` (file_problem) in one phrase, or
    None when every one is a readable regular file: "missing: a, b; c is a
    folder, not a regular file"."""
    found = {f: file_problem(os.path.join(folder, f)) for f in files}
    missing = [f for f, p in found.items() if p == "missing"]
    parts = [f"missing: {', '.join(missing)}"] if missing else []
    parts += [f"{f} is {p}" for f, p in found.items() if p and p != "missing"]
    return "; ".join(parts) or None


# how a copy of a URL's data is made, by scheme (the rest: "download it")
_FETCH = {"http": "curl -L -O URL", "https": "curl -L -O URL", "ftp": "curl -O URL", "s3": "aws s3 cp --recursive URL .",
          "gs": "gcloud storage cp -r URL .", "hf": "huggingface-cli download"}


def url_problem(text: str) -> str | None:
    """What is wrong with a data root that is a URL (`https://.../wine.csv`, `s3://bucket/data`), or None for a path.
    The data is read from each node's own disk or a shared mount and nothing is downloaded, so a URL was taken for a
    relative path (`./https:/...`) and reported missing there."""
    import re

    m = re.match(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://", text or "")
    if not m:
        return None
    scheme = m.group(1).lower()
    if scheme == "file":
        return "a file:// URL; expected a local path: write it without file://"
    how = _FETCH.get(scheme, "download it")
    return (f"a URL ({scheme}://); expected a local path: trials read the data from their node's disk or a shared mount and "
            f"download nothing: copy it there first ({how}) and name the copy")


ARCHIVE_SUFFIXES = (".gz", ".tgz", ".zip", ".tar", ".bz2", ".xz", ".7z")


def compressed_near(what: str, folder: str) -> list[str]:
    """Archives that may hold the data `folder` should: every archive in `folder`, and those in its parent and
    grandparent whose name carries `what` ("CIFAR-10" matches cifar-10-python.tar.gz, not cifar-100-python.tar.gz)."""
    import re

    key = re.compile(re.escape(re.sub(r"[^a-z0-9]", "", what.lower())) + r"(?!\d)")
    found: list[str] = []
    for depth, place in enumerate((folder, os.path.dirname(folder), os.path.dirname(os.path.dirname(folder)))):
        try:
            names = sorted(os.listdir(place)) if place and os.path.isdir(place) else []
        except OSError:
            continue
        for name in names:
            path = os.path.join(place, name)
            if not name.lower().endswith(ARCHIVE_SUFFIXES) or path in found or not os.path.isfile(path):
                continue
            if depth == 0 or key.search(re.sub(r"[^a-z0-9]", "", name.lower())):
                found.append(path)
    return found


def _data_root_too_deep(folder: str, files: list[str], layout: str) -> str | None:
    """Where `--data-root` names a folder inside the layout (`data/MNIST` or `data/MNIST/raw` for the layout
    `MNIST/raw`, the CIFAR folder itself): the files are there; which `--data-root` reads them."""
    parts = os.path.normpath(layout).split(os.sep)
    root = folder
    for _ in parts:
        root = os.path.dirname(root)
    for k in range(1, len(parts) + 1):
        here = os.path.join(root, *parts[k:])
        if here == folder or not all(file_problem(os.path.join(here, f)) is None for f in files):
            continue
        right = here
        for _ in parts:
            right = os.path.dirname(right)
        if os.path.normpath(os.path.join(right, layout)) == os.path.normpath(here):
            return f"they are in {here}: --data-root {shlex.quote(right or '.')} reads them"
        return f"they are in {here}: move them to a folder {layout} and give --data-root the folder that holds it"
    return None


def missing_files_error(what: str, folder: str, files: list[str], layout: str, hint: str = "", kind: str = "files") -> DataError | None:
    """The one-line error for the `files` of `folder` that are missing or no
    readable regular file (None if every one is): it names the folder, the
    files, what is wrong with each, and the `--data-root` that must hold
    `layout` (the folder relative to the data root)."""
    problems = file_problems(folder, files)
    if not problems:
        return None
    above = folder
    while above and not os.path.lexists(above) and os.path.dirname(above) != above:
        above = os.path.dirname(above)
    if above and os.path.lexists(above) and not os.path.isdir(above):  # e.g. --data-root names a file
        problems = f"{above} is a file, not a folder"
    deeper = _data_root_too_deep(folder, files, layout)
    if deeper:
        problems += f"; {deeper}"
    archives = compressed_near(what, folder)
    if archives:  # the data is there, still packed (MNIST's .gz, CIFAR's tar.gz, a TU zip): say so, not only "missing"
        shown = ", ".join(archives[:4]) + (f" and {len(archives) - 4} more" if len(archives) > 4 else "")
        problems += f"; found compressed files: {shown}: extract them so that {layout} holds the files"
    extra = f"; {hint}" if hint else ""
    return DataError(f"{what}: expected {kind} {', '.join(files)} in {folder} ({problems}){extra}; "
                     f"--data-root must name the folder that holds {layout} (nothing is downloaded)")


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None


def _show(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= 60 else text[:57] + "...")


# ------------------------------------------------------------ text rows
def read_rows(path: str, columns: int | None = None, integer: bool = True) -> np.ndarray:
    """The comma-separated numbers of a TU text file, one row per line, as
    (lines, columns): int64 when `integer`, float64 otherwise.  `columns`
    None: as many as the first line has.  Every line must end with a newline
    (torch-geometric silently drops a last line without one: a cut file)."""
    raw = _read_bytes(path)
    if not raw:
        raise DataError(f"{path}: empty file; expected one line of comma-separated numbers per entry")
    if not raw.endswith(b"\n"):
        last, tail = raw.count(b"\n") + 1, raw[raw.rfind(b"\n") + 1 :]
        raise DataError(f"{path}, line {last}: cut mid-line (the file does not end with a newline; its last line is {_show(tail)}); "
                        "expected every line to end with a newline")
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))  # (lines,) byte offset of each line's newline
    commas = np.diff(np.searchsorted(np.flatnonzero(buf == ord(",")), ends), prepend=0)  # (lines,) commas per line
    want = int(commas[0]) if columns is None else columns - 1
    bad = np.flatnonzero(commas != want)
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{path}, line {i + 1}: expected {want + 1} comma-separated values, found {int(commas[i]) + 1} ({_show(_line(raw, ends, i))})")
    values = _parse_fast(raw, want + 1)
    if values is None or len(values) != len(ends):
        values = _parse_slowly(path, raw, ends, want + 1)
    if integer:
        bad = np.flatnonzero(~np.all(np.isfinite(values) & (values == np.round(values)), axis=1))
        if bad.size:
            i = int(bad[0])
            raise DataError(f"{path}, line {i + 1}: expected integers, found {_show(_line(raw, ends, i))}")
        return values.astype(np.int64)
    return values


def _line(raw: bytes, ends: np.ndarray, i: int) -> bytes:
    start = int(ends[i - 1]) + 1 if i else 0
    return raw[start : int(ends[i])]


def _parse_fast(raw: bytes, columns: int) -> np.ndarray | None:
    import pandas as pd

    try:
        frame = pd.read_csv(io.BytesIO(raw), header=None, sep=",", skipinitialspace=True, skip_blank_lines=False, na_filter=False, dtype=np.float64, engine="c")
    except (ValueError, pd.errors.ParserError):
        return None  # the slow reader finds the line
    return frame.to_numpy() if frame.shape[1] == columns else None


def _parse_slowly(path: str, raw: bytes, ends: np.ndarray, columns: int) -> np.ndarray:
    """Line by line, as torch-geometric parses (float() of every field): the first bad line is the error."""
    out = np.empty((len(ends), columns))
    for i, line in enumerate(raw[: int(ends[-1])].split(b"\n")):
        try:
            out[i] = [float(x) for x in line.split(b",")]
        except ValueError:
            raise DataError(f"{path}, line {i + 1}: expected {columns} comma-separated numbers, found {_show(line)}") from None
    return out


# ------------------------------------------------------------ TU graphs
TU_OPTIONAL = {"node_labels": ("nodes", True), "node_attributes": ("nodes", False), "edge_labels": ("edges", True),
               "edge_attributes": ("edges", False), "graph_attributes": ("graphs", False)}  # part: (one line per, integer)


def check_tu(raw: str, name: str) -> int:
    """Check the TU raw files `<raw>/<name>_*.txt` against each other; returns the number of graphs."""
    path = {part: os.path.join(raw, f"{name}_{part}.txt") for part in ("A", "graph_indicator", "graph_labels", *TU_OPTIONAL)}
    graph_of = read_rows(path["graph_indicator"], 1)[:, 0]  # (nodes,) 1-based graph id of every node
    _check_indicator(path["graph_indicator"], graph_of)
    n_nodes, n_graphs = len(graph_of), int(graph_of[-1])
    counts = {"nodes": n_nodes, "graphs": n_graphs}
    _check_count(path["graph_labels"], len(read_rows(path["graph_labels"], 1)), n_graphs, "graph", path["graph_indicator"])
    edges = read_rows(path["A"], 2)  # (edges, 2) 1-based node ids
    bad = np.flatnonzero(((edges < 1) | (edges > n_nodes)).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{path['A']}, line {i + 1}: node id out of range: expected ids 1..{n_nodes} ({path['graph_indicator']} has {n_nodes} lines), "
                        f"found {edges[i, 0]}, {edges[i, 1]}")
    ga, gb = graph_of[edges[:, 0] - 1], graph_of[edges[:, 1] - 1]
    bad = np.flatnonzero(ga != gb)
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{path['A']}, line {i + 1}: edge {edges[i, 0]}, {edges[i, 1]} joins graph {ga[i]} to graph {gb[i]}; expected both ends in one graph")
    loops = edges[:, 0] == edges[:, 1]
    last = int(ga[~loops].max()) if (~loops).any() else 0
    if last < n_graphs:  # torch-geometric keeps only the graphs up to the last one with an edge
        raise DataError(f"{path['A']}: the last edge (line {len(edges)}) belongs to graph {last}, but {path['graph_indicator']} numbers {n_graphs} graphs; "
                        f"expected edges for the last graph too (graphs {last + 1}..{n_graphs} have none: is the file cut?)")
    counts["edges"] = len(edges)
    for part, (per, integer) in TU_OPTIONAL.items():
        problem = file_problem(path[part])
        if problem not in (None, "missing"):  # an optional file that is there but no readable file is no absent one
            raise DataError(f"{path[part]}: {problem}; expected a readable text file (or no file: it is optional)")
        if problem is None:
            _check_count(path[part], len(read_rows(path[part], None, integer)), counts[per], per[:-1], path["A" if per == "edges" else "graph_indicator"])
    return n_graphs


def _check_indicator(path: str, graph_of: np.ndarray) -> None:
    """Graph ids: 1 on the first line, then never decreasing and never skipping one."""
    if graph_of[0] != 1:
        raise DataError(f"{path}, line 1: expected graph id 1 (ids are 1-based, nodes sorted by graph), found {graph_of[0]}")
    step = np.diff(graph_of)
    bad = np.flatnonzero((step < 0) | (step > 1))
    if bad.size:
        i = int(bad[0]) + 1
        prev = int(graph_of[i - 1])
        raise DataError(f"{path}, line {i + 1}: expected graph id {prev} or {prev + 1} (nodes sorted by graph, ids contiguous), found {graph_of[i]}")


def _check_count(path: str, found: int, expected: int, per: str, source: str) -> None:
    if found == expected:
        return
    where = f"line {expected + 1}" if found > expected else f"line {found}"
    raise DataError(f"{path}, {where}: expected one line per {per}, {expected} lines ({source} has {expected} {per}s), found {found}"
                    + ("" if found > expected else " (is the file cut?)"))


# ------------------------------------------------------------ IDX (MNIST)
def check_idx(path: str, ndim: int) -> tuple[int, ...]:
    """The dimensions an IDX file of unsigned bytes announces, checked against its size."""
    what = {1: "labels", 3: "images"}.get(ndim, f"{ndim}-d arrays")
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4 + 4 * ndim)
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    want = bytes([0, 0, 0x08, ndim])
    if len(head) < 4 or head[:4] != want:
        raise DataError(f"{path}: magic number 0x{head[:4].hex() or 'none'}; expected 0x{want.hex()} (an uncompressed IDX file of {what}: unsigned bytes, {ndim} dimensions)")
    if len(head) < 4 + 4 * ndim:
        raise DataError(f"{path}: cut inside the header ({size} bytes); expected {4 + 4 * ndim} header bytes")
    dims = tuple(int(d) for d in np.frombuffer(head[4:], dtype=">u4"))
    item = int(np.prod(dims[1:], dtype=np.int64))
    expected = 4 + 4 * ndim + dims[0] * item
    if size != expected:
        cut = f"cut inside item {(size - len(head)) // max(item, 1)} (0-based) of " if size < expected else ""
        raise DataError(f"{path}: {size} bytes; expected {expected}: the header announces {cut}{dims[0]} {what}"
                        + (f" of {'x'.join(map(str, dims[1:]))} bytes" if ndim > 1 else "") + (" (is the file cut?)" if size < expected else ""))
    return dims


def check_mnist(folder: str, prefixes=("train", "t10k"), classes: int = 10) -> None:
    """The four MNIST IDX files: images and labels agree, labels in 0..classes-1, one image size."""
    sizes = {}
    for prefix in prefixes:
        images, labels = (os.path.join(folder, f"{prefix}-{kind}") for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"))
        n, *size = check_idx(images, 3)
        (m,) = check_idx(labels, 1)
        if n != m:
            raise DataError(f"{labels}: {m} labels, but {images} holds {n} images; expected one label per image")
        values = np.frombuffer(_read_bytes(labels), dtype=np.uint8, offset=8)
        bad = np.flatnonzero(values >= classes)
        if bad.size:
            raise DataError(f"{labels}: label {values[bad[0]]} at item {bad[0]} (0-based); expected labels 0..{classes - 1}")
        sizes[images] = tuple(size)
    if len(set(sizes.values())) > 1:
        raise DataError(f"MNIST: expected one image size, found {', '.join(f'{p}: {s[0]}x{s[1]}' for p, s in sizes.items())}")


# ------------------------------------------------------------ CIFAR batches
def cifar_batch(path: str, entry, label_key: str, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 3, 32, 32) uint8, labels (N,) int64) of one unpickled CIFAR python batch, checked."""
    if not isinstance(entry, dict) or "data" not in entry or label_key not in entry:
        keys = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
        raise DataError(f"{path}: expected a CIFAR python batch, a dict with keys 'data' and {label_key!r}; found {keys}")
    data = np.asarray(entry["data"])
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.dtype.kind not in "ui":
        raise DataError(f"{path}: 'data' of shape {data.shape} ({data.dtype}); expected (images, 3072) bytes, one 3x32x32 image per row")
    if data.size and (data.min() < 0 or data.max() > 255):
        raise DataError(f"{path}: 'data' holds values {data.min()}..{data.max()}; expected bytes 0..255")
    labels = np.asarray(entry[label_key])
    if labels.ndim != 1 or len(labels) != len(data) or (labels.size and labels.dtype.kind not in "ui"):
        raise DataError(f"{path}: {label_key!r} holds {labels.size} {labels.dtype} values for {len(data)} images; expected one integer label per image")
    bad = np.flatnonzero((labels < 0) | (labels >= classes))
    if bad.size:
        raise DataError(f"{path}: {label_key!r} has label {labels[bad[0]]} at position {bad[0]} (0-based); expected labels 0..{classes - 1}")
    return data.astype(np.uint8).reshape(-1, 3, 32, 32), labels.astype(np.int64)


# ------------------------------------------------------------ parallel text
def read_text(path: str) -> tuple[list[str], bool]:
    """(the lines of a utf-8 text file without their newlines, whether the last line ended with one)."""
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}, line {line}: expected utf-8 text, found the byte 0x{raw[e.start]:02x}") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as open() reads them
    lines = text.split("\n")
    complete = lines[-1] == ""
    return (lines[:-1] if complete else lines), complete


def check_text_pair(first: str, second: str, what: str = "sentence") -> tuple[list[str], list[str]]:
    """The lines of two parallel files (line i of one pairs with line i of the other), checked."""
    (a, a_done), (b, b_done) = read_text(first), read_text(second)
    for path, lines in ((first, a), (second, b)):
        if not lines:
            raise DataError(f"{path}: empty file; expected one {what} per line")
    for path, lines, done, other, other_done in ((first, a, a_done, second, b_done), (second, b, b_done, first, a_done)):
        if other_done and not done:
            raise DataError(f"{path}, line {len(lines)}: cut mid-line (no newline at the end, but {other} ends with one); "
                            f"expected a complete last line, found {_show(lines[-1].encode())}")
    if len(a) != len(b):
        longer, n = (first, len(b)) if len(a) > len(b) else (second, len(a))
        raise DataError(f"{first} has {len(a)} lines but {second} has {len(b)}; expected one {what} per line in both, "
                        f"line i of one translating line i of the other ({longer}, line {n + 1} has no pair)")
    return a, b
