"""MLflow's own UI as the comparison view (issue #17), in a real headless browser.

`mlflow server` on a smoke comparison's SQLite store; headless Chromium
(Debian's `chromium` package, driven over the DevTools protocol on a pipe by
docs/mlflow_ui_screenshot.py, the script that takes docs/mlflow-ui.png) goes
through docs/tracking.md's "Comparing runs in the MLflow UI": the Model training
runs table, the page's filter typed into the search box, the page's
columns ticked in the Columns menu.  The table must then hold the comparison
run and nothing else, with the headline numbers MLflow stores.  Its trial
steps (issue #32: the trial filter alone shows the sweep runs, collapsed, the
trials nested under them) must list one comparison's trials, the re-training
ones in view with the test_acc MLflow stores."""
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
        table = shot.show_comparisons(page, ml.url, exp.experiment_id, matching=len(comparisons))
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


@pytest.mark.slow
def test_the_trial_steps_list_a_comparisons_trials_with_their_test_acc_in_chromium(smoke_comparison, tmp_path):
    chromium = shot.find_chromium()
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    section = _readme_section()
    assert f"`{shot.TRIAL_FILTER.format(comparison='<id>')}`" in section, "the README's trial filter is not the one the browser test types"
    assert f"pick the metric `{shot.TRIAL_SORT}`" in section, "the README does not tell to sort the trials by the metric the test sorts by"
    missing = [c for c in shot.TRIAL_COLUMNS if f"`{c}`" not in section]
    assert not missing, f"trial columns the README does not tell to add: {missing}"

    from mlflow.tracking import MlflowClient
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    client = MlflowClient(smoke_comparison["tracking_uri"])
    exp = client.get_experiment_by_name(C.experiment_name("doublemoon"))
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    (comparison_run,) = [r for r in runs if r.data.tags.get(C.Tag.KIND) == "comparison"]
    comparison = comparison_run.data.tags[C.Tag.COMPARISON]
    trials = {r.info.run_id: r for r in runs
              if r.data.tags.get(C.Tag.KIND) == "trial" and r.data.tags.get(C.Tag.COMPARISON) == comparison}
    retrained = {i: r for i, r in trials.items() if r.data.tags.get(C.Tag.PHASE) == "assessment"}
    assert retrained and all("test_acc" in r.data.metrics for r in retrained.values()), "no re-training trial with a test_acc to look for"
    # what the user saw: the trials are child runs of sweep runs, which MLflow nests them under
    parents = {r.data.tags.get(MLFLOW_PARENT_RUN_ID) for r in trials.values()}
    assert None not in parents and {client.get_run(p).data.tags.get(C.Tag.KIND) for p in parents} == {"sweep"}

    with mlflow_server(smoke_comparison["tracking_uri"], tmp_path, auth=False) as ml, \
            shot.Chromium(chromium, width=1400, height=800) as page:
        table = shot.show_trials(page, ml.url, exp.experiment_id, comparison, matching=len(trials))

    names = {i: (table.rows[i].get("Run Name", "").splitlines() or [i])[-1] for i in table.rows}
    hidden = [trials[i].info.run_name for i in retrained if i not in table.visible]
    assert not hidden, (f"re-training trials not in view: {hidden}; the rows in view are {[names[i] for i in table.visible]} "
                        f"({table.matching}), e.g. {table.rows[table.visible[0]] if table.visible else {}}")
    others = sorted(names[i] for i in table.rows if i not in trials)
    assert not others, f"the table shows runs that are not this comparison's trials: {others}"
    assert table.matching == f"{len(trials)} matching runs", f"{table.matching!r}, not the comparison's {len(trials)} trials"
    wrong = {}
    for i in retrained:
        row, run = table.rows[i], trials[i]
        for metric in ("test_acc", "device_hours"):
            if not _shown_as(row.get(metric, ""), run.data.metrics[metric]):
                wrong[f"{run.info.run_name} {metric}"] = (row.get(metric), run.data.metrics[metric])
        for tag in (C.Tag.ARM, C.Tag.PHASE):
            if row.get(tag) != run.data.tags.get(tag):
                wrong[f"{run.info.run_name} {tag}"] = (row.get(tag), run.data.tags.get(tag))
    assert not wrong, f"shown vs stored: {wrong}"
    # sorted by test_acc, descending: the re-training trials (the only ones with one) are the top rows
    assert set(table.order[:len(retrained)]) == set(retrained), [names[i] for i in table.order[:len(retrained) + 2]]


# every unfiltered runs search of the page is answered `ms` late; window.__delayed counts them
_SLOW_FIRST_LOAD = """(() => { window.__delayed = 0; const fetch = window.fetch;
  window.fetch = async (...args) => { const answer = await fetch(...args); const body = args[1] && args[1].body;
    if (String(args[0]).includes('runs/search') && typeof body === 'string' && !body.includes('"filter"')) {
      window.__delayed++; await new Promise(r => setTimeout(r, MS)); }
    return answer; }; })()"""


@pytest.mark.slow
def test_a_first_load_answered_late_does_not_leave_its_count_under_the_filtered_rows(smoke_comparison, tmp_path):
    """Two loaded CI runs read "45 matching runs" under the filtered comparison row: MLflow's UI takes the count
    from whichever search answer lands last, and the filter had been typed while the unfiltered first load was on
    its way.  Here that answer comes 6 s late, every time: the steps wait for the table to load before typing."""
    chromium = shot.find_chromium()
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    from mlflow.tracking import MlflowClient

    exp = MlflowClient(smoke_comparison["tracking_uri"]).get_experiment_by_name(C.experiment_name("doublemoon"))
    with mlflow_server(smoke_comparison["tracking_uri"], tmp_path, auth=False) as ml, \
            shot.Chromium(chromium, width=1400, height=800) as page:
        page.call("Page.enable")
        page.call("Page.addScriptToEvaluateOnNewDocument", source=_SLOW_FIRST_LOAD.replace("MS", "6000"))
        table = shot.show_comparisons(page, ml.url, exp.experiment_id, matching=1)
        delayed = page.evaluate("window.__delayed")
    assert delayed >= 1, "no unfiltered search was answered late: the test did not test the race"
    assert len(table.rows) == 1 and table.matching == "1 matching run", (table.matching, list(table.rows))


@pytest.mark.parametrize("text,value,ok", [("0.03581398126222818", 0.03581398126222818, True), ("1", 1.0, True),
                                           ("2.71", 2.7097, True), ("2.7", 2.7097, False), ("2.72", 2.7097, False),
                                           ("4.47e-4", 0.000447375, True), ("-", 1.0, False), ("", 1.0, False)])
def test_shown_numbers_are_compared_to_the_digits_shown(text, value, ok):
    assert _shown_as(text, value) is ok


def test_a_poll_that_throws_while_the_page_loads_counts_as_not_yet():
    """A CI run failed reading `document.body.innerText` while the page navigated
    (body null): every wait treats a throwing expression as not yet, and one
    that never stops throwing fails with its error in the message."""
    chromium = shot.find_chromium()
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    throws_twice = "(() => { window.__n = (window.__n || 0) + 1; if (window.__n < 3) throw new Error('no body yet'); return window.__n; })()"
    with shot.Chromium(chromium, width=400, height=300) as page:
        assert page.wait_for(throws_twice, "the third try", timeout=10) == 3
        with pytest.raises(shot.BrowserError, match="within 1 s; the last try threw .*always"):
            page.wait_for("(() => { throw new Error('always'); })()", "a value", timeout=1)
        # a missing body reads as no count, not an error
        assert page.evaluate("(document.body?.innerText.match(/\\d+ matching runs?/)?.[0] || '')") == ""


def test_a_count_that_never_comes_is_waited_for_over_reloads_then_left_to_the_caller(tmp_path):
    """wait_for_count reloads the page while the count line is wrong, `first` s a reload (a real reload: until
    2026-12-04 it went to the page's own address, which on MLflow's '#' routes stays on the same document), and
    returns after `timeout` s without raising: the caller checks the line.  The page's loads are counted by its
    server: a count kept in the page's localStorage lost its increments on a loaded CI run (0 reloads in 4.2 s),
    each reloaded page reading the store before the last one's write had reached it."""
    import http.server
    import threading
    import time

    chromium = shot.find_chromium()
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    # a table row and a count that stays wrong
    body = b"<div class='ag-root'><div class='ag-row' row-id='r1'>row</div></div><span>45 matching runs</span>"
    loads = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/count.html"):
                loads.append(time.monotonic())
            self.send_response(200 if self.path.startswith("/count.html") else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with shot.Chromium(chromium, width=400, height=300) as page:
            # an address like MLflow's, its route after '#': going to it again would not load the page again
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/count.html#/experiments/1/runs?searchFilter=x")
            page.wait_for(f"{shot._MATCHING} === '45 matching runs'", "the first load", timeout=30)
            first = len(loads)
            t0 = time.monotonic()
            shot.wait_for_count(page, 1, timeout=4, first=1)
            took = time.monotonic() - t0
    finally:
        server.shutdown()
        server.server_close()
    assert first == 1, loads
    assert 4 <= took <= 15, took
    reloads = len(loads) - first
    assert reloads >= 2, f"{reloads} reloads in {took:.1f} s"  # (one reload a `first` s and its load, not one in all)
