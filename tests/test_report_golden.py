"""`awnn report` is deterministic across code changes: a stored smoke
comparison (tests/fixtures/golden/smoke-comparison.db.gz, a real MLflow
SQLite store written by `awnn compare --task doublemoon --budget smoke`)
gives, byte for byte, the report.md and summary.json kept beside it.

A refactoring of tracking/ must leave them identical.  A change meant to
alter the report regenerates them (tests/fixtures/make_golden_report.py)
and commits them with the change, so the diff shows what a reader sees
differently.  The store's path in report.md is replaced by a placeholder."""
from __future__ import annotations

import difflib
import gzip
import shutil
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"
PLACEHOLDER = "sqlite:///GOLDEN.db"
FILES = ("report.md", "summary.json")


def build(tmp: Path) -> dict[str, str]:
    """Unpack the stored comparison into `tmp` and write its report there;
    returns the text of FILES with the store's path replaced."""
    from tracking.report import write_report

    db = tmp / "golden.db"
    with gzip.open(GOLDEN / "smoke-comparison.db.gz", "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    uri = f"sqlite:///{db}"
    try:
        write_report(uri, tmp / "report")
    except Exception as e:  # an MLflow newer than the store's schema: upgrade it as a user would
        if "out-of-date" not in str(e) and "upgrade" not in str(e):
            raise
        subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", uri], check=True, capture_output=True)
        write_report(uri, tmp / "report")
    return {name: (tmp / "report" / name).read_text().replace(uri, PLACEHOLDER) for name in FILES}


def test_report_of_the_stored_comparison_is_unchanged(tmp_path):
    built = build(tmp_path)
    for name in FILES:
        expected = (GOLDEN / name).read_text()
        if built[name] != expected:
            diff = "".join(list(difflib.unified_diff(expected.splitlines(True), built[name].splitlines(True), f"golden/{name}", f"now/{name}"))[:80])
            raise AssertionError(f"{name} differs from the golden report (intended? run tests/fixtures/make_golden_report.py and commit):\n{diff}")
    assert "doublemoon" in built["report.md"] and PLACEHOLDER in built["report.md"]
