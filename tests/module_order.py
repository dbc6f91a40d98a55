"""The order in which the suite's test modules start: the longest first, so that two workers finish together.

`make test` runs the suite on pytest-xdist workers with `--dist loadfile`: a module's tests all go to one worker, and
a worker that is done takes the next module in the queue.  xdist queues the modules by how many tests they hold
(`--loadscope-reorder`, its default), which put the fault and system modules (one to four tests, each 30-95 s of a
CLI process waiting on Ray or MLflow) at the end of the queue: on a fresh clone at 4adcef7 (2026-12-05) one worker ran
alone for the suite's last minutes.  Scheduling the longest module first (LPT) bounds that tail by the last module's
time instead.

The times come from `tests/module_times.json` (seconds per module file, setup included, measured on a 2-core machine
from a JUnit XML report of a run:  python tests/module_order.py --from-junit report.xml).  A module the table does not name
(a new one) is estimated from its marks (`fault`, `slow`: a process started per test) until the table is refreshed.
A stale table costs only balance, never a result: the order within a module is kept, and every test runs.

AWNN_TEST_ORDER=collected keeps pytest's collection order (and xdist's own reordering); AWNN_TEST_TIMES=<file> reads
another table."""
from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TABLE = Path(__file__).resolve().parent / "module_times.json"
ENV = "AWNN_TEST_ORDER"
TABLE_ENV = "AWNN_TEST_TIMES"  # another table's path (the tests of this module use it)
# a module the table does not name: seconds per test by its marks (medians of the measured modules' per-test times)
PER_TEST_S = {"fault": 20.0, "slow": 10.0}
PER_TEST_DEFAULT_S = 0.3


def enabled() -> bool:
    """Longest module first, unless AWNN_TEST_ORDER=collected; another value is an error naming the choices."""
    value = os.environ.get(ENV, "longest-first").strip() or "longest-first"
    if value not in ("longest-first", "collected"):
        raise ValueError(f"{ENV}={value!r}: expected 'longest-first' (the default) or 'collected'")
    return value == "longest-first"


def load_table(path: Path | None = None) -> dict[str, float]:
    """{module path relative to the repository ('tests/...py'): seconds} from `path` (default: AWNN_TEST_TIMES, else
    tests/module_times.json); {} when the default file is absent.  A file that is not such a table, or an
    AWNN_TEST_TIMES that names no file, is an error naming the file and what was expected."""
    if path is None:
        named = os.environ.get(TABLE_ENV, "").strip()
        if named and not Path(named).is_file():
            raise ValueError(f"{TABLE_ENV}={named!r}: no such file (expected a JSON table {{\"tests/<module>.py\": seconds, ...}})")
        path = Path(named) if named else TABLE
    if not path.exists():
        return {}
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable as JSON ({e}); expected {{\"tests/<module>.py\": seconds, ...}}") from None
    if not isinstance(table, dict):
        raise ValueError(f"{path}: expected a JSON object {{\"tests/<module>.py\": seconds, ...}}, found {type(table).__name__}")
    for key, value in table.items():
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0):
            raise ValueError(f"{path}: {key!r} holds {value!r}; expected a number of seconds >= 0")
    return {str(k): float(v) for k, v in table.items()}


def module_of(nodeid: str) -> str:
    """The module file of a test id ('tests/x/test_y.py::test_z[a::b]' -> 'tests/x/test_y.py')."""
    return nodeid.split("::", 1)[0]


def estimate(items, table: dict[str, float]) -> dict[str, float]:
    """Seconds per module of `items` (pytest items: `nodeid`, `get_closest_marker`): the table's figure, or the
    marks' estimate for a module the table does not name."""
    out: dict[str, float] = {}
    for item in items:
        module = module_of(item.nodeid)
        if module in table:
            out[module] = table[module]
            continue
        cost = PER_TEST_DEFAULT_S
        for mark, seconds in PER_TEST_S.items():
            if item.get_closest_marker(mark) is not None:
                cost = seconds
                break
        out[module] = out.get(module, 0.0) + cost
    return out


def longest_first(items, table: dict[str, float]) -> list:
    """`items` with their modules in decreasing estimated time (ties: collection order); each module's tests keep
    their order and stay together."""
    cost = estimate(items, table)
    first_seen: dict[str, int] = {}
    groups: dict[str, list] = {}
    for item in items:
        module = module_of(item.nodeid)
        first_seen.setdefault(module, len(first_seen))
        groups.setdefault(module, []).append(item)
    order = sorted(groups, key=lambda m: (-cost[m], first_seen[m]))
    return [item for m in order for item in groups[m]]


def configure(config) -> None:
    """pytest_configure: xdist keeps the queue in the collected order (tests/conftest.py calls this)."""
    if _enabled(config) and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # (xdist would re-sort the modules by how many tests they hold)


def reorder(config, items: list) -> None:
    """pytest_collection_modifyitems: `items` in place, longest module first (tests/conftest.py calls this)."""
    if _enabled(config):
        try:
            items[:] = longest_first(items, load_table())
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None


def _enabled(config) -> bool:
    try:
        return enabled()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def from_junit(report: Path, root: Path) -> dict[str, float]:
    """Seconds per module from a JUnit XML report (pytest --junitxml; each testcase's time holds its setup, call
    and teardown), keyed by the module's path relative to `root`."""
    try:
        tree = ET.parse(report)
    except (OSError, ET.ParseError) as e:
        raise ValueError(f"{report}: not a JUnit XML report ({e})") from None
    times: dict[str, float] = {}
    for case in tree.iter("testcase"):
        classname, time_s = case.get("classname"), case.get("time")
        if not classname or time_s is None:
            continue
        # classname: the module as a dotted path, then any class names ('tests.system.test_x' or 'tests.x.test_y.Cls')
        parts = classname.split(".")
        for n in range(len(parts), 0, -1):
            candidate = Path(*parts[:n]).with_suffix(".py")
            if (root / candidate).is_file():
                key = candidate.as_posix()
                times[key] = times.get(key, 0.0) + float(time_s)
                break
    if not times:
        raise ValueError(f"{report}: no testcase names a module under {root}")
    return {k: round(v, 1) for k, v in sorted(times.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refresh tests/module_times.json from a JUnit XML report of the suite.")
    parser.add_argument("--from-junit", type=Path, required=True, metavar="REPORT", help="pytest --junitxml output")
    parser.add_argument("--out", type=Path, default=TABLE, help=f"the table to write (default {TABLE})")
    args = parser.parse_args(argv)
    try:
        table = from_junit(args.from_junit, TABLE.parent.parent)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{args.out}: {len(table)} modules, {sum(table.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
