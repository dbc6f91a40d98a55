"""Metric and param names have one owner, tracking/contract.py: every name a
real comparison wrote (the golden smoke comparison's store, written by
`awnn compare`) is declared there, and the modules that write metrics name
them through the contract, never as strings."""
from __future__ import annotations

import ast
import gzip
import shutil
import sqlite3
from pathlib import Path

from awnn.config import TrainConfig
from golden_report import GOLDEN
from tracking import contract as C
from tracking.reader import SEARCH_PARAMS

ROOT = Path(__file__).resolve().parents[2]
WRITERS = ("tracking/callback.py", "search/sweep_runs.py", "search/sweep.py")


def stored_names(tmp_path, table: str) -> dict[str, set[str]]:
    db = tmp_path / "golden.db"
    if not db.exists():
        with gzip.open(GOLDEN / "smoke-comparison.db.gz", "rb") as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    out: dict[str, set[str]] = {}
    rows = con.execute(f"select t.value, m.key from {table} m join tags t on t.run_uuid = m.run_uuid and t.key = ? group by 1, 2", (C.Tag.KIND,))
    for kind, name in rows:
        out.setdefault(kind, set()).add(name)
    con.close()
    return out


def test_every_stored_metric_is_in_the_contract(tmp_path):
    names = stored_names(tmp_path, "metrics")
    assert set(names) == set(C.KINDS)
    unknown = {n for ns in names.values() for n in ns if not C.is_metric(n)}
    assert not unknown, f"metrics written but not declared in tracking/contract.py: {sorted(unknown)}"
    assert {"width_l0", "rate_l0"} <= names["trial"]  # the per-layer names the contract declares as PER_LAYER
    assert C.is_metric("width_l3") and not C.is_metric("width_") and not C.is_metric("wall_clock")


def test_every_stored_param_is_in_the_contract(tmp_path):
    names = stored_names(tmp_path, "params")
    config = set(TrainConfig.keys())
    # (keys added to TrainConfig after the store was written are absent from it)
    assert set(C.TRIAL_PARAMS) <= names["trial"] <= config | set(C.TRIAL_PARAMS)
    unknown = {n for kind in ("sweep", "comparison") for n in names[kind] if n not in C.PARAMS}
    assert not unknown, f"params written but not declared in tracking/contract.py: {sorted(unknown)}"
    assert SEARCH_PARAMS == C.SEARCH_OPTIONS and set(C.SEARCH_OPTIONS) <= set(C.PARAMS)


def test_metric_writers_use_the_contract_names():
    spelled = []
    for rel in WRITERS:
        for node in ast.walk(ast.parse((ROOT / rel).read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in C.METRICS:
                spelled.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not spelled, "metric names spelled as strings (use tracking.contract.Metric):\n" + "\n".join(spelled)


def test_summary_names_are_the_sweep_metrics():
    s = C.assessment_summary([0.5, 0.7])
    assert list(s) == [C.Metric.TEST_ACC_MEAN, C.Metric.TEST_ACC_STD, C.Metric.RUNS_OK]
    assert s[C.Metric.TEST_ACC_MEAN] == 0.6 and abs(s[C.Metric.TEST_ACC_STD] - 0.1414213562373095) < 1e-15 and s[C.Metric.RUNS_OK] == 2
    one, none = C.assessment_summary([0.5]), C.assessment_summary([])
    assert one[C.Metric.TEST_ACC_STD] == 0.0 and none[C.Metric.RUNS_OK] == 0 and none[C.Metric.TEST_ACC_MEAN] != none[C.Metric.TEST_ACC_MEAN]
