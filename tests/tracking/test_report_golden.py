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


def test_the_rebuild_command_in_the_report_reads_back_the_store_when_its_path_has_a_space(tmp_path):
    """The report's `awnn report ... --tracking-uri URI` line is pasted into a shell: a store in 'my runs/' was two
    words until the URI was quoted."""
    import shlex

    from golden_report import golden_store
    from tracking.report import write_report

    tmp = tmp_path / "my runs"
    tmp.mkdir()
    uri = golden_store(tmp)
    write_report(uri, tmp / "report")
    line = next(l for l in (tmp / "report" / "report.md").read_text().splitlines() if "Rebuild from the tracking store alone" in l)
    words = shlex.split(line.split("`")[1])
    assert words[words.index("--tracking-uri") + 1] == uri and words[-2:] == ["--out", "DIR"], line
