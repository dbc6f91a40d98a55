"""A cluster node whose Python cannot import the trial's code (this project not
installed there, another version of it, a module it needs missing): a real
two-node Ray cluster on 127.0.0.1 whose only node with CPUs for trials has a
PYTHONPATH that makes the project's `search` package fail to import, as on a
node where it is missing.

Ray cannot load Tune's trial actor class on that node's workers: it gives the
actor a placeholder that raises, the worker exits, and the trial's error is
the actor's death.  Before (2026-12-07): 597 lines (the import's traceback
twice per attempt, through the driver), three attempts, then "its worker
process was lost 3 times ... the process was killed, ran out of memory, or its
node died ... raise --max-failures".  Now: the comparison stops at the first
attempt, in a few lines naming the missing module, the node and the remedy,
exit 2; with that node replaced by a good one, --resume finishes it.

The same for a node whose copy of the project imports but differs from the
driver's (search/code_identity.py)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, run_awnn
from servers import ServerUnavailable, ray_cluster

pytestmark = [pytest.mark.slow, pytest.mark.fault]

EXPECTED_TRIALS = 6 + 2  # doublemoon's AWNN grid plus the smoke budget's 2 re-training runs


def _runs(tracking: str) -> list:
    client = MlflowClient(tracking)
    return client.search_runs([client.get_experiment_by_name("awnn-doublemoon").experiment_id], max_results=1000)


def _stopped_on_the_node_then_resumed(tmp_path, node_python: Path | None, last_line: str, wrap: list[str] | None = None) -> str:
    """A smoke sweep on a cluster whose only node with CPUs for trials runs `node_python` first on its PYTHONPATH
    (and its `ray start` under `wrap`): it must stop at the first trial (exit 2, a few lines, the last matching
    `last_line`, every trial run closed interrupted, none trained); then, that node replaced by one with the driver's
    Python and files, --resume finishes every trial once.  Returns the first run's output."""
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "cluster").mkdir()
    try:
        with ray_cluster(tmp_path / "cluster", nodes=1, cpus_per_node=0) as cluster:  # a head that runs no trial
            cluster.add_node(1, env={"PYTHONPATH": str(node_python)} if node_python else None, wrap=wrap)
            env = cluster.client_env()
            env.pop("RAY_ADDRESS")
            args = ["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--address", cluster.address,
                    "--storage", str(tmp_path / "storage"), "--tracking-uri", tracking, "--cpus-per-trial", "1"]
            p = run_awnn(args, cwd=tmp_path, timeout=300, env=env)
            out = p.stdout + p.stderr
            assert p.returncode == 2, out[-5000:]
            assert "Traceback" not in out and len(out.strip().splitlines()) <= 8, out[-5000:]
            last = p.stderr.strip().splitlines()[-1]
            assert re.fullmatch(last_line, last), last
            assert "lost" not in last and "max-failures" not in last, last
            runs = _runs(tracking)
            trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
            # no attempt waited for: the failed trial's run (and any other in flight) closed as interrupted, none failed
            assert trials and all(r.info.status == "KILLED" and r.data.tags["awnn.status"] == "interrupted" for r in trials), \
                [(r.data.tags.get("awnn.trial_key"), r.info.status, r.data.tags.get("awnn.status")) for r in trials]
            assert not any(k.startswith("val_acc") or k == "epoch" for r in trials for k in r.data.metrics), "a trial trained"
            assert all(r.info.status != "RUNNING" for r in runs)

            # the node replaced by one whose Python has the driver's project: --resume runs every trial, each once
            cluster.kill_node(1)
            cluster.add_node(1)
            again = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=400, env=env)
            assert again.returncode == 0, (again.stdout + again.stderr)[-5000:]
    except ServerUnavailable as e:
        pytest.skip(str(e))
    runs = _runs(tracking)
    done = [r for r in runs if r.data.tags.get("awnn.kind") == "trial" and r.data.tags["awnn.status"] == "ok"]
    assert len(done) == EXPECTED_TRIALS and len({r.data.tags["awnn.trial_key"] for r in done}) == EXPECTED_TRIALS
    assert all(r.info.status != "RUNNING" for r in runs)
    return out


@pytest.mark.timeout(600)
def test_a_node_that_cannot_import_the_trials_code_stops_the_comparison_in_a_few_lines_and_resume_finishes_it(tmp_path):
    shadow = tmp_path / "node-python" / "search"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'search\'", name="search")\n')
    out = _stopped_on_the_node_then_resumed(
        tmp_path, shadow.parent,
        r"awnn sweep: error: trial awnn/selection/sel-\d+: ModuleNotFoundError: No module named 'search' \(on [0-9a-f.:]+\): "
        r"that node's Python cannot import the trial's code: install this project there as here .*; the comparison stopped "
        r".*then run the same command with --resume")
    # one line of the node's report, not its tracebacks
    assert sum("(raylet) a Ray worker could not import a trial's code: ModuleNotFoundError: No module named 'search'" in ln
               for ln in out.splitlines()) == 1, out[-5000:]


@pytest.mark.timeout(600)
def test_a_node_whose_copy_of_the_project_differs_stops_the_comparison_before_training_and_resume_finishes_it(tmp_path):
    """The node imports the project fine, but from a copy that differs from the driver's in a file trials run (an image
    built before the checkout moved on).  Before: its trials ran that code and their results counted as the driver's.
    Now (search/code_identity.py) the first trial ends before it trains: one line naming the file, exit 2; with the node
    replaced by one with the driver's copy, --resume finishes the comparison."""
    copy = tmp_path / "node-python"
    for package in ("awnn", "search", "tracking"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    step = copy / "awnn" / "train_step.py"
    step.write_text(step.read_text() + "\n# an older version of this file\n")
    _stopped_on_the_node_then_resumed(
        tmp_path, copy,
        r"awnn sweep: error: trial awnn/selection/sel-\d+: CodeMismatch: this node's copy of the project differs from the "
        r"driver's in the code a trial runs: awnn/train_step\.py differs \(on [0-9a-f.:]+\): install the driver's version of "
        r"this project on that node .*; the comparison stopped .*then run the same command with --resume")


@pytest.mark.timeout(600)
def test_a_node_that_does_not_see_the_drivers_storage_stops_the_comparison_before_training_and_resume_finishes_it(tmp_path):
    """--storage a folder on each node's own disk (the same path, not shared): the trial node runs in a mount
    namespace of its own (`unshare -m`) where another folder is mounted at --storage's path.  Before
    (search/shared_storage.py): 396 lines, every re-training trial failed three times in Ray's "Unable to set up
    cluster storage", exit 0 and "Verdict: none"; now the first trial ends before it trains, one line naming
    --storage, exit 2 (AWNN_STORAGE_CHECK=0 gives the old ending: this test then fails)."""
    storage, own = tmp_path / "storage", tmp_path / "the-nodes-own-disk"
    storage.mkdir()
    own.mkdir()
    wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"',
            "sh", str(own), str(storage)]
    if shutil.which("unshare") is None or subprocess.run([*wrap, "true"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("needs `unshare -m` and a bind mount in it (root, or a user namespace that may mount)")
    _stopped_on_the_node_then_resumed(
        tmp_path, None,
        r"awnn sweep: error: trial awnn/selection/sel-\d+: StorageNotShared: this node does not see the driver's --storage "
        + re.escape(str(storage)) + r": a file the driver wrote there \(\.awnn-driver-[0-9a-f]+\) is missing on this node, "
        r"so the folder is this node's own, not one every node shares \(on [0-9a-f.:]+\): give --storage a folder every "
        r"node mounts at the same path .*; the comparison stopped .*then run the same command with --resume",
        wrap=wrap)
