"""`awnn report` is deterministic across code changes: a stored smoke
comparison (tests/fixtures/golden/smoke-comparison.db.gz, a real MLflow
SQLite store written by `awnn compare --task doublemoon --budget smoke`)
gives, byte for byte, the report.md and summary.json kept beside it.

A refactoring of tracking/ must leave them identical.  A change meant to
alter the report regenerates them (tests/fixtures/make_golden_report.py)
and commits them with the change, so the diff shows what a reader sees
differently.  The store's path in report.md is replaced by a placeholder
(tests/golden_report.py builds the report for this test and for that script)."""
from __future__ import annotations

import difflib

from golden_report import FILES, GOLDEN, PLACEHOLDER, build


def test_report_of_the_stored_comparison_is_unchanged(tmp_path):
    built = build(tmp_path)
    for name in FILES:
        expected = (GOLDEN / name).read_text()
        if built[name] != expected:
            diff = "".join(list(difflib.unified_diff(expected.splitlines(True), built[name].splitlines(True), f"golden/{name}", f"now/{name}"))[:80])
            raise AssertionError(f"{name} differs from the golden report (intended? run tests/fixtures/make_golden_report.py and commit):\n{diff}")
    assert "doublemoon" in built["report.md"] and PLACEHOLDER in built["report.md"]
