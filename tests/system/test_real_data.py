"""Comparisons on datasets in their real on-disk formats (issue #16): TU raw
text files (NCI1) and IDX files (MNIST), given by a relative `--data-root`
from another working directory, through real Ray and MLflow; and a data
error inside the trials (a file removed once the driver has checked the
data) that ends the comparison at once, without retries."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from data_helpers import make_mnist, write_tu
from fault_helpers import Driver, store_client, wait_for

pytest.importorskip("torch_geometric", reason="the graph tasks need torch-geometric")
pytest.importorskip("torchvision", reason="the image tasks need torchvision")
pytestmark = pytest.mark.slow


def runs(tracking: str, task: str) -> list:
    c = store_client(tracking)  # (polled while a driver makes the store)
    exp = c.get_experiment_by_name(f"awnn-{task}")
    return c.search_runs([exp.experiment_id], max_results=5000) if exp else []


@pytest.mark.parametrize("task", ["nci1", "mnist"])
def test_compare_reads_a_relative_data_root_from_another_folder(tmp_path, task):
    data = tmp_path / "datasets"
    if task == "nci1":
        write_tu(str(data), "NCI1", n_graphs=40)
    else:
        make_mnist(str(data), n_train=60, n_test=20)
    work = tmp_path / "work"
    work.mkdir()
    tracking = f"sqlite:///{work / 'mlflow.db'}"
    p = run_awnn(["compare", "--task", task, "--budget", "smoke", "--strategies", "awnn", "--data-root", "../datasets",
                  "--num-cpus", "2", "--tracking-uri", tracking], cwd=work, check=True, timeout=900)
    assert "Report:" in p.stdout
    found = runs(tracking, task)
    kinds = {r.data.tags["awnn.kind"] for r in found}
    assert kinds == {"comparison", "sweep", "trial"}
    assert {r.info.status for r in found} == {"FINISHED"}, [(r.info.run_name, r.info.status) for r in found if r.info.status != "FINISHED"]
    root = str((tmp_path / "datasets").resolve())
    cmp_run = next(r for r in found if r.data.tags["awnn.kind"] == "comparison")
    assert cmp_run.data.params["data_root"] == root
    assert {r.data.params["data_root"] for r in found if r.data.tags["awnn.kind"] == "trial"} == {root}
    assert all(r.data.tags["awnn.status"] == "ok" for r in found if r.data.tags["awnn.kind"] == "trial")
    report = next((work / "awnn-results" / "reports").glob("*/report.md")).read_text()
    # the copy's digest: saved, checked by every trial (all ok above), and in the report
    from awnn.data import load_task

    digest = load_task(task, str(data)).data_digest
    assert cmp_run.data.params["data_digest"] == digest and f"Data: the {task} files under `--data-root {root}` (SHA-256 `{digest}`" in report
    assert f"data: the {task} files under {root} (SHA-256 {digest})" in p.stdout + p.stderr
    if task == "mnist":  # a CPU budget: the grid's cpu values, in MLflow and in the report's header
        assert json.loads(cmp_run.data.params["cpu"]) == {"mnist-awnn.yaml": {"max_train_examples": 5000}}
        assert {r.data.params["max_train_examples"] for r in found if r.data.tags["awnn.kind"] == "trial"} == {"5000"}
        assert "CPU budget: the paper's setup scaled down" in report and "mnist-awnn.yaml: max_train_examples=5000" in report
    else:  # the graph grids have no cpu values: a CPU trains the paper's setup
        assert "cpu" not in cmp_run.data.params and "CPU budget" not in report


def test_a_data_error_in_the_trials_stops_the_comparison_at_once_and_resume_runs_those_trials(tmp_path):
    """No retry fixes unreadable data: the comparison stops at the first
    trial that cannot read it (exit 2, one line naming the file), that trial's
    run is interrupted (no outcome of its config), and once the data is back
    `--resume` runs it and the rest: every config ends with one run of its own."""
    data = tmp_path / "datasets"
    write_tu(str(data), "NCI1", n_graphs=40)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["compare", "--task", "nci1", "--budget", "smoke", "--strategies", "awnn", "--data-root", str(data),
            "--num-cpus", "2", "--tracking-uri", tracking, "--max-failures", "3"]
    d = Driver(args, cwd=tmp_path)
    labels = data / "NCI1" / "raw" / "NCI1_graph_labels.txt"
    original = labels.read_bytes()
    try:
        # the driver has read the data (it checks it before Ray starts): now a file goes missing for the trials
        wait_for(lambda: "comparison nci1-" in d.output(), 120, "the comparison to start", proc=d.proc, output=d.output)
        labels.unlink()
        code = d.wait(timeout=300)
        out = d.output()
    finally:
        d.cleanup()
    assert code == 2, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn compare: error:")]
    assert len(errors) == 1 and "NCI1_graph_labels.txt" in errors[0] and str(labels.parent) in errors[0] and "--resume" in errors[0], out[-3000:]
    found = runs(tracking, "nci1")
    assert found and not [r.info.run_name for r in found if r.info.status == "RUNNING"]
    trials = [r for r in found if r.data.tags["awnn.kind"] == "trial"]
    hit = [r for r in trials if "NCI1_graph_labels.txt" in r.data.tags.get("awnn.last_error", "")]
    assert hit and all((r.info.status, r.data.tags["awnn.status"]) == ("KILLED", "interrupted") for r in hit)  # no outcome of its config
    assert all(r.data.tags.get("awnn.retries", "0") == "0" and r.data.metrics.get("retries", 0) == 0 for r in hit)  # not retried
    assert all(r.data.tags["awnn.status"] == "interrupted" for r in trials)  # nothing failed, nothing ran on after the error
    assert len(trials) < 12  # the grid has 12 configs: the comparison stopped at the first failures
    others = [r for r in found if r.data.tags["awnn.kind"] != "trial"]
    assert {r.info.status for r in others} == {"FAILED"} and {r.data.tags["awnn.state"] for r in others} == {"failed"}

    labels.write_bytes(original)  # the data is back: the same command with --resume finishes the comparison
    run_awnn(args + ["--resume"], cwd=tmp_path, check=True, timeout=900)
    after = [r for r in runs(tracking, "nci1") if r.data.tags["awnn.kind"] == "trial"]
    done = [r for r in after if r.info.status != "KILLED"]
    keys = [(r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in done]
    assert len(keys) == len(set(keys)) and len([k for k in keys if k[0] == "selection"]) == 12, sorted(keys)
    assert {r.data.tags["awnn.status"] for r in done} == {"ok"} and {r.info.status for r in done} == {"FINISHED"}
    assert {(r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in hit} <= set(keys)  # the interrupted ones ran again


def test_cv10_comparison_on_tu_files_selects_and_retrains_per_fold_and_resumes_on_the_same_folds(tmp_path):
    """`--protocol cv10` through real Ray and MLflow on TU raw files: every
    fold's own selection (its inner hold-out) and re-training runs of the
    config selected for it, the summary over folds, the protocol in MLflow
    and the report; a --resume on data that draws other folds is refused."""
    import json
    import statistics

    import numpy as np
    import yaml

    from awnn.data.graphs import folds_digest
    from search.grid import GRID_DIR

    data = tmp_path / "datasets"
    write_tu(str(data), "NCI1", n_graphs=60)
    grids = tmp_path / "grids"
    grids.mkdir()
    g = yaml.safe_load((GRID_DIR / "nci1-awnn.yaml").read_text())
    g["grid"] = {"pooling": ["sum", "mean"]}  # 2 configs: 10 folds x (2 selection + 2 re-training) trials
    (grids / "nci1-awnn.yaml").write_text(yaml.safe_dump(g))
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["compare", "--task", "nci1", "--budget", "smoke", "--protocol", "cv10", "--strategies", "awnn", "--grid-dir", str(grids),
            "--data-root", str(data), "--num-cpus", "2", "--tracking-uri", tracking]
    p = run_awnn(args, cwd=tmp_path, check=True, timeout=900)
    found = runs(tracking, "nci1")
    assert {r.info.status for r in found} == {"FINISHED"}
    trials = [r for r in found if r.data.tags["awnn.kind"] == "trial"]
    sel = {r.data.tags["awnn.trial_key"]: r for r in trials if r.data.tags["awnn.phase"] == "selection"}
    ass = {r.data.tags["awnn.trial_key"]: r for r in trials if r.data.tags["awnn.phase"] == "assessment"}
    assert sorted(sel) == sorted(f"f{k}-sel-{i:04d}" for k in range(10) for i in range(2))
    assert sorted(ass) == sorted(f"f{k}-ass-{r:02d}" for k in range(10) for r in (1, 2))
    assert all(r.data.params["fold"] == key[1:key.index("-")] for key, r in {**sel, **ass}.items())
    assert {r.data.params["split"] for r in sel.values()} == {"inner"} and {r.data.params["split"] for r in ass.values()} == {"outer"}
    labels = np.loadtxt(data / "NCI1" / "raw" / "NCI1_graph_labels.txt", dtype=int)
    cmp_run = next(r for r in found if r.data.tags["awnn.kind"] == "comparison")
    assert cmp_run.data.params["protocol"] == "cv10" and cmp_run.data.params["folds"] == "10"
    assert cmp_run.data.params["folds_digest"] == folds_digest(np.where(labels < 0, 0, labels))  # (TU labels -1/1 are read as 0/1)
    selection = next(r for r in found if r.data.tags.get("awnn.phase") == "selection" and r.data.tags["awnn.kind"] == "sweep")
    by_fold = json.loads(selection.data.tags["awnn.selected_by_fold"])
    for k in range(10):  # each fold re-trains the pooling its own selection chose
        chosen = sel[by_fold[str(k)]]
        assert by_fold[str(k)].startswith(f"f{k}-")
        assert {ass[f"f{k}-ass-{r:02d}"].data.params["pooling"] for r in (1, 2)} == {chosen.data.params["pooling"]}
    fold_means = [statistics.fmean(ass[f"f{k}-ass-{r:02d}"].data.metrics["test_acc"] for r in (1, 2)) for k in range(10)]
    assessment = next(r for r in found if r.data.tags.get("awnn.phase") == "assessment" and r.data.tags["awnn.kind"] == "sweep")
    assert assessment.data.metrics["test_acc_mean"] == pytest.approx(statistics.fmean(fold_means))
    assert assessment.data.metrics["test_acc_std"] == pytest.approx(statistics.stdev(fold_means))
    report = next((tmp_path / "awnn-results" / "reports").glob("*/report.md")).read_text()
    assert "protocol `cv10` (10 stratified outer folds" in report
    summary = json.loads(next((tmp_path / "awnn-results" / "reports").glob("*/summary.json")).read_text())
    assert summary["protocol"] == {"name": "cv10", "folds": 10, "train_seed": 0}
    assert summary["test_acc_mean"]["awnn"] == pytest.approx(statistics.fmean(fold_means))

    # a driver that died: the comparison is unfinished; the data then changes under it
    client = MlflowClient(tracking)
    client.set_tag(cmp_run.info.run_id, "awnn.state", "interrupted")
    raw = data / "NCI1" / "raw" / "NCI1_graph_labels.txt"
    original = raw.read_text()
    values = original.split()
    values[0], values[1] = values[1], values[0]
    raw.write_text("\n".join(values) + "\n")
    p = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=600)
    errors = [line for line in p.stderr.splitlines() if line.startswith("awnn compare: error:")]
    assert p.returncode == 2 and len(errors) == 1 and "draws other outer folds" in errors[0] and str(data) in errors[0], p.stderr[-3000:]
    raw.write_text(original)  # the data as it was: the resume goes on, on the same folds, with nothing to re-run
    p = run_awnn(args + ["--resume"], cwd=tmp_path, check=True, timeout=600)
    after = runs(tracking, "nci1")
    assert len([r for r in after if r.data.tags["awnn.kind"] == "trial"]) == len(trials)
    assert {r.info.status for r in after} == {"FINISHED"}
