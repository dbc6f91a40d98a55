"""`awnn compare --task table`: a user's CSV file (here scikit-learn's wine data, 178 real rows, 13 features, three
cultivars named by text) through Ray Tune, fused fixed trials, MLflow and the report, end to end."""
from __future__ import annotations

import csv
import hashlib
import json

import pytest

sklearn_datasets = pytest.importorskip("sklearn.datasets", reason="the wine data is scikit-learn's bundled data set")
from mlflow.tracking import MlflowClient  # noqa: E402

from conftest import run_awnn  # noqa: E402

pytestmark = pytest.mark.slow


def test_compare_on_a_users_csv_file_runs_fused_records_its_digest_and_reports_it(tmp_path):
    d = sklearn_datasets.load_wine()
    data = tmp_path / "my data"
    data.mkdir()
    path = data / "wine.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*d.feature_names, "cultivar"])
        for x, y in zip(d.data, d.target):
            w.writerow([*x.tolist(), ["barolo", "grignolino", "barbera"][y]])
    work = tmp_path / "work"
    work.mkdir()
    p = run_awnn(["compare", "--task", "table", "--data-root", "../my data/wine.csv", "--budget", "smoke",
                  "--strategies", "fixed,awnn", "--num-cpus", "2"], cwd=work, check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    exp = client.get_experiment_by_name("awnn-table")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    (root,) = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    assert root.data.tags["awnn.comparison"].startswith("table-wine-")  # which file, at a glance (ids, report folders)
    assert root.data.params["data_digest"] == digest and root.data.params["data_root"] == str(path)
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    count: dict = {}
    for t in trials:
        key = (t.data.tags["awnn.strategy"], t.data.tags["awnn.phase"])
        count[key] = count.get(key, 0) + 1
        assert t.data.tags["awnn.status"] == "ok", t.data.tags
    # the table grids (the paper's Spiral grids): 60 fixed, 6 AWNN configs; smoke: R = 2 re-training runs
    assert count == {("fixed", "selection"): 60, ("awnn", "selection"): 6, ("fixed", "assessment"): 2, ("awnn", "assessment"): 2}
    assert int(root.data.params["fuse"]) > 1  # the CPU default fuses the fixed grid: a table trains stacked too
    summary = json.loads(next((work / "awnn-results" / "reports").glob("table-*/summary.json")).read_text())
    assert summary["task"] == "table" and set(summary["arms"]) >= {"fixed", "awnn"}
    report = next((work / "awnn-results" / "reports").glob("table-*/report.md")).read_text()
    read = "178 rows; 13 features from 13 columns (13 numeric); 3 classes: barbera (48), barolo (59), grignolino (71)"
    assert root.data.params["data_summary"] == read and f"data: {path}: {read}" in p.stderr + p.stdout
    assert f"Data: the CSV data of `--data-root {path}` (SHA-256 `{digest}`...): {read}; features standardised" in report


def test_label_and_drop_columns_reach_every_trial_and_the_report(tmp_path):
    """`--label cultivar --drop-columns sample` on the wine data with its class first and a sample number (an id): the
    driver, every Ray trial (whose node reads the file as the command said, or fails its data check: the digest names
    the columns), MLflow and the report read the same table; `awnn train` takes both too; --label on a task without a
    file is one line, exit 2."""
    d = sklearn_datasets.load_wine()
    path = tmp_path / "wine.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["cultivar", "sample", *d.feature_names])
        for i, (x, y) in enumerate(zip(d.data, d.target)):
            w.writerow([["barolo", "grignolino", "barbera"][y], i + 1, *x.tolist()])
    p = run_awnn(["compare", "--task", "table", "--data-root", str(path), "--label", "cultivar", "--drop-columns", "sample",
                  "--budget", "smoke", "--strategies", "awnn", "--num-cpus", "2"], cwd=tmp_path, check=True)
    read = ("178 rows; 13 features from 13 columns (13 numeric); 3 classes in column 'cultivar': barbera (48), barolo (59), "
            "grignolino (71); 1 column left out (--drop-columns): sample")
    assert f"data: {path}: {read}" in p.stderr + p.stdout
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("awnn-table").experiment_id], max_results=1000)
    (root,) = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    assert root.data.params["label"] == "cultivar" and root.data.params["drop_columns"] == "sample"
    assert root.data.params["data_summary"] == read
    assert root.data.params["data_digest"] != hashlib.sha256(path.read_bytes()).hexdigest()[:16]  # (the column is in it)
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    assert len(trials) == 8 and all(t.data.tags["awnn.status"] == "ok" and t.data.params["label"] == "cultivar"
                                    and t.data.params["drop_columns"] == "sample" for t in trials)
    report = next((tmp_path / "awnn-results" / "reports").glob("table-*/report.md")).read_text()
    assert f"Data: the CSV data of `--data-root {path}` (SHA-256 `{root.data.params['data_digest']}`...): {read}" in report
    t = run_awnn(["train", "--task", "table", "--model", "fixed", "--data-root", str(path), "--label", "cultivar",
                  "--drop-columns", "sample", "--epochs", "2", "--quiet"], cwd=tmp_path, check=True)
    assert "Traceback" not in t.stderr
    bad = run_awnn(["compare", "--task", "doublemoon", "--label", "cultivar", "--budget", "smoke", "--strategies", "awnn",
                    "--num-cpus", "2"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "awnn compare: error: --label cultivar: task doublemoon has no CSV file; a CSV file's columns are named only for --task table")
