"""How long task `table` takes to read and check a CSV file (awnn/data/table.py `read_table`).

The driver reads the file once before anything starts, and every trial reads it again on its node (its own copy,
checked against the driver's digest), before its CPU clock starts: so this is wall time in each trial's start, not
device-hours.  The file is generated here, in a temporary folder: `--rows` rows of `--numeric` numeric columns (normal
draws written with 5 decimals, `--gaps` of their cells missing as ''), `--text` text columns (3-4 categories each)
and a class label of 3 classes last, written with the csv module as pandas' `to_csv(index=False)` would.

Each of `--repeats` runs reads the file in this process (the OS's file cache is warm after the first).  Prints one
JSON object as its last line:

    rows, numeric, text, gaps, bytes     the file
    features                             what read_table made of it (one-hot and missing-indicator features included)
    seconds                              each run's wall time
    median_s, rows_per_s                 their median, and rows read per second at it

Measured 2026-12-06 on the 2-core AMD EPYC VM (`python benchmarks/read_table.py`, the defaults: 100,000 rows, 18
numeric and 2 text columns): 2.3-2.5 s a read (docs/measurements.md).

Usage:  python benchmarks/read_table.py [--rows 100000] [--numeric 18] [--text 2] [--gaps 0.0] [--repeats 3]
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from awnn.data.table import read_table  # noqa: E402
from tracking.fmt import json_text  # noqa: E402

CATEGORIES = (("red", "green", "blue"), ("S", "M", "L", "XL"))


def write_table(path: Path, rows: int, numeric: int, text: int, gaps: float, seed: int = 0) -> None:
    """The benchmark's CSV file (see the module docstring)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, numeric))
    missing = rng.random((rows, numeric)) < gaps
    y = rng.integers(0, 3, rows)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{j}" for j in range(numeric)] + [f"t{j}" for j in range(text)] + ["label"])
        for i in range(rows):
            cells = ["" if missing[i, j] else f"{x[i, j]:.5f}" for j in range(numeric)]
            cells += [CATEGORIES[j % 2][(7 * i + j) % len(CATEGORIES[j % 2])] for j in range(text)]
            w.writerow(cells + [f"c{y[i]}"])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--numeric", type=int, default=18)
    p.add_argument("--text", type=int, default=2)
    p.add_argument("--gaps", type=float, default=0.0, help="fraction of the numeric cells left empty")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    if args.rows < 60 or args.numeric + args.text < 1 or args.repeats < 1 or not 0.0 <= args.gaps < 1.0:
        p.error("expected --rows >= 60 (10 of each class in every split), a feature column, --repeats >= 1, 0 <= --gaps < 1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table.csv"
        write_table(path, args.rows, args.numeric, args.text, args.gaps)
        seconds, table = [], None
        for r in range(args.repeats):
            start = time.perf_counter()
            table = read_table(str(path))
            seconds.append(time.perf_counter() - start)
            print(f"[read_table] run {r + 1}/{args.repeats}: {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
        size = path.stat().st_size
    median = statistics.median(seconds)
    result = {"rows": args.rows, "numeric": args.numeric, "text": args.text, "gaps": args.gaps, "bytes": size,
              "features": len(table.features), "seconds": [round(s, 3) for s in seconds], "median_s": round(median, 3),
              "rows_per_s": round(args.rows / median)}
    print(json_text(result))
    return result


if __name__ == "__main__":
    main()
