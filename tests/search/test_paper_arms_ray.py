"""Acceptance of issue #18 on a real local Ray and a real MLflow SQLite
store: a smoke comparison with `--strategies fixed,awnn,fixedplus,awnn-asha`.
Every arm is tagged and counted; fixedplus re-trains a fixed network at the
width the AWNN re-training runs learned (checked against MLflow); awnn-asha
stops some trials and counts their partial cost; the report has the
truncation table and plot, and `awnn report` rebuilds it identically from
MLflow alone."""
from __future__ import annotations

import json
import statistics

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from tracking import contract as C
from tracking.report import PLOTS

pytestmark = pytest.mark.slow

ARGS = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed,awnn,fixedplus,awnn-asha", "--num-cpus", "2",
        "--report-interval", "0"]


@pytest.fixture(scope="module")
def paper_arms(tmp_path_factory):
    work = tmp_path_factory.mktemp("paper-arms")
    p = run_awnn(ARGS, cwd=work, check=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], max_results=5000)
    (report,) = [d for d in (work / "awnn-results" / "reports").iterdir() if d.is_dir()]
    return {"dir": work, "uri": uri, "runs": runs, "stdout": p.stdout, "report": report}


def _trials(runs, arm, phase=None):
    return [r for r in runs if r.data.tags.get(C.Tag.KIND) == "trial" and r.data.tags[C.Tag.ARM] == arm
            and (phase is None or r.data.tags[C.Tag.PHASE] == phase)]


def test_every_arm_is_tagged_and_counted(paper_arms):
    runs = paper_arms["runs"]
    root = next(r for r in runs if r.data.tags.get(C.Tag.KIND) == "comparison")
    assert root.data.tags[C.Tag.ARMS].split(",") == ["fixed", "awnn", "fixedplus", "awnn-asha"]
    sweeps = {(r.data.tags[C.Tag.ARM], r.data.tags[C.Tag.PHASE]): r for r in runs if r.data.tags.get(C.Tag.KIND) == "sweep"}
    assert set(sweeps) == {("fixed", "selection"), ("fixed", "assessment"), ("awnn", "selection"), ("awnn", "assessment"),
                           ("fixedplus", "assessment"), ("awnn-asha", "selection"), ("awnn-asha", "assessment")}
    assert sweeps[("fixedplus", "assessment")].data.tags[C.Tag.DEPENDS_ON] == "awnn"
    assert not _trials(runs, "fixedplus", "selection") and len(_trials(runs, "fixedplus", "assessment")) == 2
    for arm in ("fixed", "awnn", "fixedplus", "awnn-asha"):
        for t in _trials(runs, arm):
            assert t.data.tags[C.Tag.STRATEGY] == arm and t.info.status == "FINISHED"
    summary = json.loads((paper_arms["report"] / "summary.json").read_text())
    dh = summary["device_hours"]
    # fixedplus pays for the AWNN search it re-trains from, then its own runs
    assert dh["fixedplus"]["selection"] == pytest.approx(dh["awnn"]["total"])
    assert dh["fixedplus"]["total"] == pytest.approx(dh["awnn"]["total"] + dh["fixedplus"]["assessment"])
    assert summary["baseline"] == "fixed" and summary["savings"]["fixedplus"]["selection"] > 0
    metrics = MlflowClient(paper_arms["uri"]).get_run(root.info.run_id).data.metrics
    assert {C.arm_metric(a, "total_device_hours") for a in ("fixedplus", "awnn-asha")} <= set(metrics)


def test_fixedplus_retrains_at_the_width_awnn_learned(paper_arms):
    runs = paper_arms["runs"]
    awnn = [json.loads(t.data.tags[C.Tag.WIDTHS_AT_BEST]) for t in _trials(runs, "awnn", "assessment")]
    learned = round(statistics.fmean(statistics.fmean(w) for w in awnn))  # the paper: mean width over hidden layers, over runs
    selected = json.loads(next(r for r in runs if r.data.tags.get(C.Tag.KIND) == "sweep" and r.data.tags[C.Tag.ARM] == "awnn"
                               and r.data.tags[C.Tag.PHASE] == "selection").data.tags[C.Tag.SELECTED_CONFIG])
    for t in _trials(runs, "fixedplus", "assessment"):
        p = t.data.params
        assert p["model"] == "fixed" and int(p["width"]) == max(1, learned), (p["width"], awnn)
        for key in ("hidden_layers", "activation", "batch_size", "lr"):
            assert p[key] == str(selected[key]), key
    assert "fixedplus: no search of its own" in paper_arms["stdout"]


def test_awnn_asha_stops_some_trials_and_counts_their_cost(paper_arms):
    runs = paper_arms["runs"]
    sel = _trials(runs, "awnn-asha", "selection")
    stopped = [t for t in sel if t.data.tags[C.Tag.STATUS] == "stopped"]
    assert sel and all(t.data.params["model"] == "awnn" for t in sel)
    assert stopped and len(stopped) < len(sel)
    assert all(t.data.metrics["device_hours"] > 0 for t in stopped)
    summary = json.loads((paper_arms["report"] / "summary.json").read_text())
    assert summary["device_hours"]["awnn-asha"]["selection"] == pytest.approx(sum(t.data.metrics["device_hours"] for t in sel))
    assert summary["strategies"]["awnn-asha"]["status_counts"]["selection"]["stopped"] == len(stopped)


def test_report_has_the_truncation_table_and_plot_rebuilt_identically(paper_arms, tmp_path):
    md = (paper_arms["report"] / "report.md").read_text()
    assert "## Post-hoc truncation (paper 5.4)" in md and "![" in md and "truncation.png" in md
    summary = json.loads((paper_arms["report"] / "summary.json").read_text())
    assert set(summary["truncation"]) == {"awnn", "awnn-asha"}
    for arm, t in summary["truncation"].items():
        assert [row["kept_pct"] for row in t["curve"]] == [100, 90, 80, 70, 60, 50, 40, 30, 20, 10]
        assert t["runs"] == 2 and 0 <= t["largest_cut_pct"] <= 90
    # a re-training run's untruncated test accuracy is its test_acc (the kept model is the one that scored it)
    c = MlflowClient(paper_arms["uri"])
    for t in _trials(paper_arms["runs"], "awnn", "assessment"):
        full = {m.step: m.value for m in c.get_metric_history(t.info.run_id, C.Metric.TRUNC_TEST_ACC)}[100]
        assert full == pytest.approx(t.data.metrics["test_acc"], abs=1e-12)
    cid = next(r for r in paper_arms["runs"] if r.data.tags.get(C.Tag.KIND) == "comparison").data.tags[C.Tag.COMPARISON]
    p = run_awnn(["report", "--comparison", cid, "--tracking-uri", paper_arms["uri"], "--out", str(tmp_path / "again")],
                 cwd=tmp_path, check=True)
    for name in ("report.md", "summary.json", PLOTS["truncation"]):
        assert (tmp_path / "again" / name).read_bytes() == (paper_arms["report"] / name).read_bytes(), name
