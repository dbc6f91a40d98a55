"""A trial that no node can hold (more CPUs or GPUs per trial than any node
has) used to wait for ever: "0 running" on the progress line, Tune's warning
hidden below the driver's log level (`awnn compare --gpus-per-trial 1` on a
CPU-only machine).  A local Ray stops the command at once, before any MLflow
run; a cluster's driver says what is missing and waits for a node that can
hold a trial to join, then runs."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import AWNN, ROOT, run_awnn
from machine import limit
from servers import ServerUnavailable, ray_cluster

pytestmark = pytest.mark.slow


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("command,args,ask", [
    (["compare", "--task", "doublemoon"], ["--gpus-per-trial", "1"], "a trial needs 1 CPU and 1 GPU on one node"),
    (["sweep", "--task", "doublemoon", "--strategy", "awnn"], ["--gpus-per-trial", "0.25"], "a trial needs 1 CPU and 0.25 GPUs on one node"),
])  # more CPUs per trial than the node has: test_more_cpus_than_the_machine_has_is_said
def test_a_local_ray_that_cannot_hold_a_trial_stops_the_command_at_once(tmp_path, command, args, ask):
    if "--gpus-per-trial" in args and _cuda():
        pytest.skip("this machine has a GPU: the trial fits")
    t0 = time.monotonic()
    p = run_awnn([*command, "--budget", "smoke", "--num-cpus", "2", *args], cwd=tmp_path, timeout=180)
    took = time.monotonic() - t0
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert lines[-1].startswith(f"awnn {command[0]}: error: {ask} (--cpus-per-trial, --gpus-per-trial), "
                                "but the local Ray has 1 node with 2 CPUs and 0 GPUs"), lines[-1]
    assert "Traceback" not in p.stderr
    assert ("torch sees no CUDA device" in lines[-1]) == ("--gpus-per-trial" in args)
    assert not (tmp_path / "mlflow.db").exists(), "no MLflow run before the check"
    assert took < limit(90), f"took {took:.0f} s"


def test_a_cluster_driver_says_no_node_holds_a_trial_and_runs_once_one_joins(tmp_path):
    """One 1-CPU node, trials of 2 CPUs: the warning, then a 2-CPU node joins
    and every trial runs there."""
    try:
        cm = ray_cluster(tmp_path, nodes=1, cpus_per_node=1)
        cluster = cm.__enter__()
    except ServerUnavailable as e:
        pytest.skip(str(e))
    try:
        tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
        env.update(cluster.client_env(), PYTHONPATH=str(ROOT), RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
        err = tmp_path / "driver.err"
        with open(err, "wb") as out:
            driver = subprocess.Popen([*AWNN, "sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke",
                                       "--tracking-uri", tracking, "--storage", str(tmp_path / "storage"),
                                       "--cpus-per-trial", "2"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=out)
        try:
            deadline = time.monotonic() + 120
            warning = ""
            while not warning:
                assert driver.poll() is None, f"the driver ended ({driver.returncode}) without waiting:\n{err.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no warning within 120 s:\n{err.read_text()[-3000:]}"
                warning = next((line for line in err.read_text().splitlines() if line.startswith("warning: a trial needs")), "")
                time.sleep(0.5)
            assert "a trial needs 2 CPUs and 0 GPUs on one node" in warning and "the cluster has 1 node with 1 CPU and 0 GPUs" in warning
            assert "trials wait until a node that can hold one joins" in warning
            time.sleep(3)
            assert driver.poll() is None, "the driver waits for a node"
            cluster.add_node(num_cpus=2)
            rc = driver.wait(timeout=400)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        assert rc == 0, err.read_text()[-3000:]
        client = MlflowClient(tracking)
        exp = client.get_experiment_by_name("awnn-doublemoon")
        trials = [r for r in client.search_runs([exp.experiment_id], max_results=1000) if r.data.tags.get("awnn.kind") == "trial"]
        assert len(trials) == 6 + 2 and {t.data.tags["awnn.status"] for t in trials} == {"ok"}
        assert {t.data.tags["awnn.node_id"] for t in trials} == {cluster.node_ids[1]}, "every trial ran on the node that joined"
    finally:
        cm.__exit__(None, None, None)


def test_more_cpus_than_the_machine_has_is_said(tmp_path):
    """--num-cpus above the CPUs this process may use: trials share cores and their device-hours grow; said in one
    warning (here followed by the no-node-fits line, so no comparison has to run)."""
    usable = len(os.sched_getaffinity(0))
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", str(usable + 1),
                  "--cpus-per-trial", str(usable + 2)], cwd=tmp_path, timeout=180)
    assert p.returncode == 2, p.stderr[-2000:]
    assert (f"warning: --num-cpus {usable + 1} is more than the {usable} CPUs this process may use: up to {usable + 1} "
            "trials share them") in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"awnn compare: error: a trial needs {usable + 2} CPUs and 0 GPUs on one node (--cpus-per-trial, "
                           f"--gpus-per-trial), but the local Ray has 1 node with {usable + 1} CPUs and "), line
    assert "torch sees no CUDA device" not in line and "Traceback" not in p.stderr
    assert not (tmp_path / "mlflow.db").exists()
