"""The golden report of tests/tracking/test_report_golden.py: the stored smoke
comparison (tests/fixtures/golden/smoke-comparison.db.gz) and the report.md
and summary.json kept beside it.  Shared by that test and by
tests/fixtures/make_golden_report.py, which regenerates the files."""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"
PLACEHOLDER = "sqlite:///GOLDEN.db"
FILES = ("report.md", "summary.json")


def golden_store(tmp: Path) -> str:
    """The stored comparison unpacked into `tmp` as an MLflow SQLite store, upgraded first when this MLflow is
    newer than its schema (as a user would); its tracking URI."""
    from tracking.reader import load_comparison

    db = tmp / "golden.db"
    with gzip.open(GOLDEN / "smoke-comparison.db.gz", "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    uri = f"sqlite:///{db}"
    try:
        load_comparison(uri, history_keys=())
    except Exception as e:
        if "out-of-date" not in str(e) and "upgrade" not in str(e):
            raise
        subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", uri], check=True, capture_output=True)
    return uri


def build(tmp: Path) -> dict[str, str]:
    """Unpack the stored comparison into `tmp` and write its report there;
    returns the text of FILES with the store's path replaced."""
    from tracking.report import write_report

    uri = golden_store(tmp)
    write_report(uri, tmp / "report")
    return {name: (tmp / "report" / name).read_text().replace(uri, PLACEHOLDER) for name in FILES}
