"""Comparisons on datasets in their real on-disk formats (issue #16): TU raw
text files (NCI1) and IDX files (MNIST), given by a relative `--data-root`
from another working directory, through real Ray and MLflow; and a data
error inside the trials (a file removed once the driver has checked the
data) that ends the comparison at once, without retries."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from data_helpers import make_mnist, write_tu
from fault_helpers import Driver, wait_for

pytest.importorskip("torch_geometric", reason="the graph tasks need torch-geometric")
pytest.importorskip("torchvision", reason="the image tasks need torchvision")
pytestmark = pytest.mark.slow


def runs(tracking: str, task: str) -> list:
    c = MlflowClient(tracking)
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


def test_a_data_error_in_the_trials_stops_the_comparison_at_once(tmp_path):
    data = tmp_path / "datasets"
    write_tu(str(data), "NCI1", n_graphs=40)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    d = Driver(["compare", "--task", "nci1", "--budget", "smoke", "--strategies", "awnn", "--data-root", str(data),
                "--num-cpus", "2", "--tracking-uri", tracking, "--max-failures", "3"], cwd=tmp_path)
    try:
        # the driver has read the data (it checks it before Ray starts): now a file goes missing for the trials
        wait_for(lambda: "comparison nci1-" in d.output(), 120, "the comparison to start", proc=d.proc, output=d.output)
        labels = data / "NCI1" / "raw" / "NCI1_graph_labels.txt"
        labels.unlink()
        code = d.wait(timeout=300)
        out = d.output()
    finally:
        d.cleanup()
    assert code == 2, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn compare: error:")]
    assert len(errors) == 1 and "NCI1_graph_labels.txt" in errors[0] and str(labels.parent) in errors[0], out[-3000:]
    found = runs(tracking, "nci1")
    assert found and not [r.info.run_name for r in found if r.info.status == "RUNNING"]
    trials = [r for r in found if r.data.tags["awnn.kind"] == "trial"]
    failed = [r for r in trials if r.data.tags.get("awnn.status") == "failed"]
    assert failed and all("NCI1_graph_labels.txt" in r.data.tags["awnn.error"] for r in failed)
    assert all(r.data.tags.get("awnn.retries", "0") == "0" and r.data.metrics.get("retries", 0) == 0 for r in failed)  # not retried
    assert all(r.data.tags["awnn.status"] in ("failed", "interrupted") for r in trials)  # nothing ran on after the error
    assert len(trials) < 12  # the grid has 12 configs: the comparison stopped at the first failures
    others = [r for r in found if r.data.tags["awnn.kind"] != "trial"]
    assert {r.info.status for r in others} == {"FAILED"} and {r.data.tags["awnn.state"] for r in others} == {"failed"}
