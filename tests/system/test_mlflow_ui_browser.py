"""MLflow's own UI as the comparison view (issue #17), in a real headless browser.

`mlflow server` on a smoke comparison's SQLite store; headless Chromium
(Debian's `chromium` package, driven over the DevTools protocol on a pipe by
docs/mlflow_ui_screenshot.py, the script that takes docs/mlflow-ui.png) goes
through docs/tracking.md's "Comparing runs in the MLflow UI": the Model training
runs table, the page's filter typed into the search box, the page's
columns ticked in the Columns menu.  The table must then hold the comparison
run and nothing else, with the headline numbers MLflow stores."""
from __future__ import annotations

import importlib.util
import math
import re
import struct
import sys
from pathlib import Path

import pytest

from servers import mlflow_server
from tracking import contract as C

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "mlflow_ui_screenshot.py"
SECTION = "### Comparing runs in the MLflow UI"
DOC = ROOT / "docs" / "tracking.md"  # the page that holds SECTION (moved from the README, issue #32)


def _load_script():
    spec = importlib.util.spec_from_file_location("mlflow_ui_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


shot = _load_script()


def _readme_section() -> str:
    text = DOC.read_text()
    assert SECTION in text, f"{DOC.name} has no {SECTION!r}"
    body = text.split(SECTION, 1)[1]
    return re.split(r"^#{1,3} ", body, maxsplit=1, flags=re.M)[0]


def test_the_readme_names_the_filter_the_columns_and_the_screenshot():
    section = _readme_section()
    assert f"`{shot.COMPARISON_FILTER}`" in section, "the README's comparison filter is not the one the browser test types"
    missing = [c for c in shot.HEADLINE_COLUMNS if f"`{c}`" not in section]
    assert not missing, f"columns the README does not tell to add: {missing}"
    assert all(C.is_metric(c) for c in shot.HEADLINE_COLUMNS), [c for c in shot.HEADLINE_COLUMNS if not C.is_metric(c)]
    assert "Model training" in section
    assert "](mlflow-ui.png)" in section  # relative to docs/
    png = (ROOT / "docs" / "mlflow-ui.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 400_000


def _shown_as(text: str, value: float) -> bool:
    """Whether the table's `text` is `value` (to the digits shown, and to at least 3 significant digits)."""
    try:
        shown = float(text.replace(",", ""))
    except ValueError:
        return False
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    rounding = 0.5 * 10.0 ** (int(exponent or 0) - decimals)
    return abs(shown - value) <= rounding * (1 + 1e-9) and math.isclose(shown, value, rel_tol=1e-3, abs_tol=1e-12)


@pytest.mark.slow
def test_the_comparison_view_shows_the_headline_numbers_in_chromium(smoke_comparison, tmp_path):
    chromium = shot.find_chromium()
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    section = _readme_section()
    assert f"`{shot.COMPARISON_FILTER}`" in section

    from mlflow.tracking import MlflowClient

    client = MlflowClient(smoke_comparison["tracking_uri"])
    exp = client.get_experiment_by_name(C.experiment_name("doublemoon"))
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    kinds = {r.info.run_id: r.data.tags.get(C.Tag.KIND) for r in runs}
    comparisons = {i for i, k in kinds.items() if k == "comparison"}
    assert len(comparisons) == 1 and {"sweep", "trial"} <= set(kinds.values()), "the filter would have nothing to leave out"
    (comparison,) = comparisons
    stored = client.get_run(comparison).data.metrics

    with mlflow_server(smoke_comparison["tracking_uri"], tmp_path, auth=False) as ml, \
            shot.Chromium(chromium, width=1400, height=800) as page:
        table = shot.show_comparisons(page, ml.url, exp.experiment_id)
        # the screenshot's own steps, on the same page
        shot.fit_columns(page)
        shot.tidy_for_screenshot(page)
        png = page.screenshot(tmp_path / "mlflow-ui.png").read_bytes()

    assert set(table.rows) == {comparison}, (
        f"the filtered table shows {sorted(table.rows)} ({[kinds.get(i) for i in table.rows]}), not just the comparison run {comparison}")
    # the table folds child runs (a comparison's sweeps) under their parent: the count says what matched
    assert table.matching == "1 matching run", f"the filter {shot.COMPARISON_FILTER!r} matched {table.matching!r}"
    row = table.rows[comparison]
    wrong = {c: (row.get(c), stored.get(c)) for c in shot.HEADLINE_COLUMNS
             if c not in stored or not _shown_as(row.get(c, ""), stored[c])}
    assert not wrong, f"shown vs stored: {wrong}; the row reads {row}"
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1400, 800)


@pytest.mark.parametrize("text,value,ok", [("0.03581398126222818", 0.03581398126222818, True), ("1", 1.0, True),
                                           ("2.71", 2.7097, True), ("2.7", 2.7097, False), ("2.72", 2.7097, False),
                                           ("4.47e-4", 0.000447375, True), ("-", 1.0, False), ("", 1.0, False)])
def test_shown_numbers_are_compared_to_the_digits_shown(text, value, ok):
    assert _shown_as(text, value) is ok
