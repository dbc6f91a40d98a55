"""awnn report / tracking.report: the files a reader gets, rebuilt from MLflow alone.

Runs on the session's real smoke comparison and on a tiny comparison of
its own whose grids make one trial fail (a width whose weight matrix cannot
be allocated on the worker) and one diverge (SGD with lr 1e6)."""
from __future__ import annotations

import base64
import filecmp
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT, run_awnn
from tracking import analysis as A
from tracking.report import PLOTS, SUMMARY_KEYS, validate_summary

pytestmark = pytest.mark.slow

PNG = b"\x89PNG\r\n\x1a\n"
FILES = ["report.md", "report.html", "summary.json", *PLOTS.values()]

FAILING_FIXED = """\
task: doublemoon
strategy: fixed
epochs: 500
retrain_runs: 2
fixed: {model: fixed, optimizer: sgd, batch_size: 64, hidden_layers: 1, lr: 0.05}
grid:
  width: [8, 32, 1099511627776]   # the last cannot be allocated: the trial fails on the worker
"""
FAILING_AWNN = """\
task: doublemoon
strategy: awnn
epochs: 500
retrain_runs: 2
fixed: {model: awnn, optimizer: sgd, batch_size: 64, hidden_layers: 1, rate: 0.05}
grid:
  lr: [0.01, 1000000.0]           # the second diverges
"""


def _report(uri: str, out: Path, cwd: Path, *extra: str):
    return run_awnn(["report", "--tracking-uri", uri, "--out", str(out), *extra], cwd=cwd)


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def smoke_report(smoke_comparison, tmp_path_factory):
    """The smoke comparison's report, built twice by `awnn report` in fresh processes."""
    work = tmp_path_factory.mktemp("report")
    uri = smoke_comparison["tracking_uri"]
    cid = A.find_comparison(uri)[0].data.tags["awnn.comparison"]
    runs = [_report(uri, work / name, work, "--comparison", cid) for name in ("a", "b")]
    for p in runs:
        assert p.returncode == 0, p.stderr[-3000:]
    return {"uri": uri, "id": cid, "a": work / "a", "b": work / "b", "stdout": runs[0].stdout, "work": work}


@pytest.fixture(scope="module")
def failing_comparison(tmp_path_factory):
    work = tmp_path_factory.mktemp("failing-compare")
    grids = work / "grids"
    grids.mkdir()
    (grids / "doublemoon-fixed.yaml").write_text(FAILING_FIXED)
    (grids / "doublemoon-awnn.yaml").write_text(FAILING_AWNN)
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--grid-dir", str(grids), "--max-failures", "0", "--num-cpus", "2"], cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    uri = f"sqlite:///{work / 'mlflow.db'}"
    out = work / "report"
    r = _report(uri, out, work)
    assert r.returncode == 0, r.stderr[-3000:]
    return {"dir": work, "uri": uri, "out": out, "stdout": r.stdout, "summary": json.loads((out / "summary.json").read_text())}


# ------------------------------------------------------------------- files
def test_compare_writes_the_report_and_logs_it_to_the_comparison_run(smoke_comparison, smoke_report):
    from mlflow.tracking import MlflowClient

    out = smoke_comparison["dir"] / "awnn-results" / "reports" / smoke_report["id"]
    root = A.find_comparison(smoke_report["uri"], comparison=smoke_report["id"])[0]
    assert f"Report: {out / 'report.html'}" in smoke_comparison["stdout"]
    assert f"logged to MLflow as artifact 'report' of the comparison run {root.info.run_id}" in smoke_comparison["stdout"]
    for name in FILES:
        assert (out / name).is_file(), name
    logged = {Path(f.path).name for f in MlflowClient(smoke_report["uri"]).list_artifacts(root.info.run_id, "report")}
    assert logged == set(FILES)
    # written at the end of the comparison, it is the report `awnn report` rebuilds later
    assert (out / "summary.json").read_bytes() == (smoke_report["a"] / "summary.json").read_bytes()


def test_a_report_from_a_given_read_reads_nothing_more_and_is_the_same_files(smoke_report, tmp_path, monkeypatch):
    """`awnn compare` reads the finished comparison from MLflow once (search.summary.read_back), prints its summary
    from that read and writes the report from it: given the read, write_report reads nothing more from MLflow, and
    writes byte for byte the files `awnn report` writes in a process of its own; the read's summary stays without
    the report's `files`."""
    from tracking import report as R

    read = R.read_comparison(smoke_report["uri"], comparison=smoke_report["id"])
    assert "files" not in read.summary and read.summary["verdict"]["text"]

    def no_read(*args, **kwargs):
        raise AssertionError("write_report read MLflow again")

    monkeypatch.setattr(A, "load_comparison", no_read)
    monkeypatch.setattr(R, "load_budget_records", no_read)
    paths = R.write_report(smoke_report["uri"], tmp_path / "out", comparison=smoke_report["id"], read=read)
    assert "files" not in read.summary and paths["summary"]["files"]["summary_json"] == "summary.json"
    match, mismatch, errors = filecmp.cmpfiles(smoke_report["a"], tmp_path / "out", FILES, shallow=False)
    assert mismatch == [] and errors == [] and sorted(match) == sorted(FILES)
    with pytest.raises(AssertionError, match="read MLflow again"):  # (the check can fail: without the read, it reads)
        R.write_report(smoke_report["uri"], tmp_path / "again", comparison=smoke_report["id"])


def test_compare_prints_the_verdict_of_its_report(smoke_comparison, smoke_report):
    """The terminal summary's verdict is summary.json's (one read for both), word for word, wrapped."""
    from search.summary import _plain

    out = smoke_comparison["dir"] / "awnn-results" / "reports" / smoke_report["id"]
    verdict = json.loads((out / "summary.json").read_text())["verdict"]["text"]
    printed = "Verdict: " + smoke_comparison["stdout"].split("\nVerdict: ", 1)[1].split("\n\n", 1)[0]
    assert " ".join(printed.split()) == " ".join(_plain(verdict).split())


def test_report_cli_writes_every_file_and_prints_where(smoke_report):
    for name in FILES:
        assert (smoke_report["a"] / name).is_file(), name
    assert f"report of comparison {smoke_report['id']} (doublemoon, budget smoke, finished): {smoke_report['a'] / 'report.html'}" in smoke_report["stdout"]
    for name in PLOTS.values():
        assert (smoke_report["a"] / name).read_bytes().startswith(PNG)


def test_report_rebuilt_in_a_fresh_process_is_identical(smoke_report):
    match, mismatch, errors = filecmp.cmpfiles(smoke_report["a"], smoke_report["b"], FILES, shallow=False)
    assert mismatch == [] and errors == [] and sorted(match) == sorted(FILES)


def test_summary_json_validates_against_the_documented_keys(smoke_report):
    summary = json.loads((smoke_report["a"] / "summary.json").read_text())
    assert validate_summary(summary) == []
    assert list(summary["strategies"]) == ["fixed", "awnn"]
    for s in ("fixed", "awnn"):
        assert summary["device_hours"][s]["total"] > 0
        assert 0 <= summary["test_acc_mean"][s] <= 1 and summary["test_acc_std"][s] >= 0
    sv = summary["savings"]["awnn"]
    assert summary["baseline"] == "fixed" and sv["baseline"] == "fixed" and list(summary["savings"]) == ["awnn"]
    assert sv["selection"] > 0 and sv["selection_ci"][0] <= sv["selection"] <= sv["selection_ci"][1]
    assert summary["verdict"]["text"].startswith("**Verdict:**") and summary["verdict"]["within_points"] == 1.0
    # every key is documented for README readers
    doc = (ROOT / "docs" / "report.md").read_text()
    for key in SUMMARY_KEYS:
        assert f"`{key}`" in doc, key
    # and the validator notices a broken file
    broken = {k: v for k, v in summary.items() if k != "verdict"}
    broken["strategies"] = {"fixed": {}}
    broken["savings"] = {"awnn": {**sv, "baseline": "awnn", "total_ci": [1.0]}}
    errs = validate_summary(broken)
    assert "missing key 'verdict'" in errs and "strategies.fixed: missing key 'device_hours'" in errs
    assert "savings.awnn: against 'awnn', not the baseline 'fixed'" in errs and "savings.awnn.total_ci: expected [low, high]" in errs


def test_summary_json_numbers_are_those_mlflow_holds(smoke_report):
    from mlflow.tracking import MlflowClient

    summary = json.loads((smoke_report["a"] / "summary.json").read_text())
    client = MlflowClient(smoke_report["uri"])
    exp = client.get_experiment_by_name("awnn-doublemoon")
    trials = [r for r in client.search_runs([exp.experiment_id], f"tags.`awnn.comparison` = '{smoke_report['id']}' and tags.`awnn.kind` = 'trial'", max_results=5000)]
    hours = {(s, ph): sum(r.data.metrics["device_hours"] for r in trials if r.data.tags["awnn.strategy"] == s and r.data.tags["awnn.phase"] == ph)
             for s in ("fixed", "awnn") for ph in ("selection", "assessment")}
    for (s, ph), h in hours.items():
        assert summary["device_hours"][s][ph] == pytest.approx(h, rel=1e-12)
    # awnn's savings vs fixed: fixed's device-hours / awnn's, to 3 significant digits
    assert summary["savings"]["awnn"]["selection"] == float(f"{hours['fixed', 'selection'] / hours['awnn', 'selection']:.3g}")
    assert summary["strategies"]["fixed"]["trials"] == {"selection": 30, "assessment": 2}
    assert summary["strategies"]["awnn"]["status_counts"] == {"selection": {"ok": 6}, "assessment": {"ok": 2}}


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.external = {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images[a.get("data-plot")] = a.get("src", "")
        for key in ("src", "href"):
            if key in a and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])


def test_report_html_is_self_contained_with_every_plot_embedded(smoke_report):
    page = (smoke_report["a"] / "report.html").read_text()
    parser = _Images()
    parser.feed(page)
    assert parser.external == []  # nothing to fetch: the file can be mailed or attached as is
    assert set(parser.images) == set(PLOTS)
    for name, src in parser.images.items():
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert base64.b64decode(src[len(prefix):]) == (smoke_report["a"] / PLOTS[name]).read_bytes()


def test_report_md_numbers_carry_units_and_run_counts(smoke_report):
    md = (smoke_report["a"] / "report.md").read_text()
    for name in PLOTS.values():
        assert f"]({name})" in md
    assert re.search(r"\*\*`awnn` vs `fixed`\.\*\* Model selection [0-9.]+x[^(]* \(95% bootstrap CI [0-9.]+x to [0-9.]+x; "
                     r"[0-9.e-]+ vs [0-9.e-]+ device-hours over 6 and 30 trials\)", md)
    assert re.search(r"fixed [0-9.]+% \+- [0-9.]+% \(n=2 of 2 re-training runs\)", md)
    assert "| fixed | selection | 30 | 30 | 30 ok | 30 |" in md
    assert "This is a projection, not a measurement." in md
    assert "Every sweep and trial finished ok." in md and "## Problems" not in md


def test_report_html_shows_every_plot_in_headless_chromium(smoke_report, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs Debian's chromium package (apt-get install chromium); tests/system_deps.sh installs it")
    # a copy of the page with a probe that records which images the browser decoded, and their sizes
    probe = ('<script>window.addEventListener("load",function(){document.body.setAttribute("data-loaded",'
             'Array.from(document.querySelectorAll("img[data-plot]")).filter(function(i){return i.complete&&i.naturalWidth>100&&i.naturalHeight>100;})'
             '.map(function(i){return i.dataset.plot;}).sort().join(","));});</script>')
    page = tmp_path / "report.html"
    page.write_text((smoke_report["a"] / "report.html").read_text().replace("</body>", probe + "</body>"))
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--virtual-time-budget=10000",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'data-loaded="([^"]*)"', p.stdout)
    assert m, f"chromium printed no DOM (exit {p.returncode}): {p.stderr[-2000:]}"
    assert m.group(1).split(",") == sorted(PLOTS)


def test_report_from_a_tracking_server_equals_the_one_from_its_database(smoke_report, tmp_path):
    servers = pytest.importorskip("servers")
    db = tmp_path / "copy.db"
    shutil.copy(smoke_report["uri"][len("sqlite:///"):], db)
    try:
        server = servers.mlflow_server(f"sqlite:///{db}", tmp_path, auth=False)
        ml = server.__enter__()
    except servers.ServerUnavailable as e:
        pytest.skip(str(e))
    try:
        p = _report(ml.url, tmp_path / "via-server", tmp_path, "--comparison", smoke_report["id"])
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        server.__exit__(None, None, None)
    # the same numbers and plots; only where the runs are differs: the rebuild command's URI, and the
    # MLflow runs section (UI links on a server, run ids and the `mlflow ui` command for a local store)
    for name in PLOTS.values():
        assert (tmp_path / "via-server" / name).read_bytes() == (smoke_report["a"] / name).read_bytes(), name
    via_server = json.loads((tmp_path / "via-server" / "summary.json").read_text())
    local = json.loads((smoke_report["a"] / "summary.json").read_text())
    links = via_server.pop("mlflow")
    local.pop("mlflow")
    assert via_server == local
    run = links["comparison"]
    assert run["url"] == f"{ml.url}/#/experiments/{links['experiment_id']}/runs/{run['run_id']}" and links["serve"] is None
    assert all(e["url"].endswith(e["run_id"]) for phases in links["sweeps"].values() for e in phases.values())

    def without_links(text: str, uri: str) -> str:
        head, _, rest = text.replace(uri, "URI").partition("## MLflow runs")
        return head + rest[rest.index("## How to read"):]

    md_server = (tmp_path / "via-server" / "report.md").read_text()
    assert f"]({ml.url}/#/experiments/" in md_server
    assert without_links(md_server, ml.url) == without_links((smoke_report["a"] / "report.md").read_text(), smoke_report["uri"])


# ------------------------------------------------------------ bad news shown
def test_report_shows_a_failed_and_a_diverged_trial(failing_comparison):
    s = failing_comparison["summary"]
    assert validate_summary(s) == []
    assert s["strategies"]["fixed"]["status_counts"]["selection"] == {"ok": 2, "failed": 1}
    assert s["strategies"]["awnn"]["status_counts"]["selection"] == {"ok": 1, "diverged": 1}
    assert s["strategies"]["fixed"]["configs"] == 3 and s["strategies"]["awnn"]["configs"] == 2
    failed = [p for p in s["problems"] if "sel-0002 failed" in p]
    assert len(failed) == 1 and "allocate" in failed[0]  # the worker's error, as MLflow recorded it
    assert any("awnn selection trial sel-0001 diverged" in p for p in s["problems"])
    md = (failing_comparison["out"] / "report.md").read_text()
    assert md.index("## Problems") < md.index("## What each strategy spent")  # bad news first
    assert "fixed selection trial sel-0002 failed" in md and "awnn selection trial sel-0001 diverged" in md
    assert "| fixed | selection | 3 | 3 | 2 ok, 1 failed | 3 |" in md
    assert "| awnn | selection | 2 | 2 | 1 ok, 1 diverged | 2 |" in md
    assert "sel-0002 failed" in (failing_comparison["out"] / "report.html").read_text()
    assert "2 problems are listed in the report" in failing_comparison["stdout"]


def test_report_counts_the_compute_of_failed_and_diverged_trials(failing_comparison):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(failing_comparison["uri"])
    exp = client.get_experiment_by_name("awnn-doublemoon")
    trials = client.search_runs([exp.experiment_id], "tags.`awnn.kind` = 'trial'", max_results=1000)
    diverged = [r for r in trials if r.data.tags["awnn.status"] == "diverged"]
    assert len(diverged) == 1 and diverged[0].data.metrics["device_hours"] > 0
    s = failing_comparison["summary"]
    for strategy in ("fixed", "awnn"):
        expected = sum(r.data.metrics["device_hours"] for r in trials if r.data.tags["awnn.strategy"] == strategy and r.data.tags["awnn.phase"] == "selection")
        assert s["device_hours"][strategy]["selection"] == pytest.approx(expected, rel=1e-12)


def test_report_says_which_runs_are_missing(failing_comparison, tmp_path):
    from mlflow.tracking import MlflowClient

    db = tmp_path / "mlflow.db"
    shutil.copy(failing_comparison["dir"] / "mlflow.db", db)
    uri = f"sqlite:///{db}"
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    victim = client.search_runs([exp.experiment_id], "tags.`awnn.kind` = 'trial' and tags.`awnn.strategy` = 'fixed' and tags.`awnn.trial_key` = 'sel-0000'")[0]
    client.delete_run(victim.info.run_id)
    p = _report(uri, tmp_path / "out", tmp_path)
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "out" / "report.md").read_text()
    assert "fixed selection: the sweep declares 3 trials but MLflow holds 2; 1 trial is missing from every number below." in md
    assert "| fixed | selection | 2 | 2 of 3 |" in md


def test_report_cli_errors_are_one_line_with_exit_code_2(smoke_report, tmp_path, capsys):
    from search.cli import main

    def awnn_report(uri, out, *extra):
        code = main(["report", "--tracking-uri", uri, "--out", str(out), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        return code, err[-1] if err else ""

    code, err = awnn_report(smoke_report["uri"], tmp_path / "x", "--comparison", "nope")
    assert code == 2 and err.startswith("awnn report: error: --comparison nope: not found in the tracking store; newest comparisons there: [")
    code, err = awnn_report(smoke_report["uri"], tmp_path / "x", "--experiment", "awnn-nope")
    assert code == 2 and err.startswith("awnn report: error: --experiment awnn-nope: no such experiment in the tracking store; found [")
    code, err = awnn_report(f"sqlite:///{tmp_path / 'absent.db'}", tmp_path / "x")
    assert code == 2 and f"--tracking-uri sqlite:///{tmp_path / 'absent.db'}: no such SQLite file" in err
    (tmp_path / "file").write_text("")
    code, err = awnn_report(smoke_report["uri"], tmp_path / "file")
    assert code == 2 and err == f"awnn report: error: --out {tmp_path / 'file'}: {tmp_path / 'file'} is a file, not a folder"
    code, err = awnn_report(smoke_report["uri"], tmp_path / "x", "--target-margin", "2")
    assert code == 2 and err == "awnn report: error: --target-margin: expected a number in [0, 1), found 2.0"
    assert not (tmp_path / "x").exists()


def test_report_setup_names_the_awnn_profile_and_its_choices(smoke_report):
    text = (smoke_report["a"] / "report.md").read_text()
    header = text.split("## Setup", 1)[1].split("\n## ", 1)[0]
    assert "AWNN profile: `authors` (renormalise_importances=True, width_rule=floor+2, prior_on_readout=True, n_obs=2000" in header
    assert "reset_optimizer_on_resize=True" in header and "best_epoch_ties=later" in header
