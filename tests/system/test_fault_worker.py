"""A worker node dies mid-sweep: a local two-node Ray cluster (tests/servers.py),
the second node's processes are killed with SIGKILL while a trial runs there.
The sweep completes; every config has exactly one finished run; the trial
that was on the dead node is retried on the surviving node from its last
checkpoint (its epochs continue, they do not start over); the compute of the
lost attempt is still counted and the retry is recorded."""
from __future__ import annotations

import os
import signal

import pytest
from mlflow.tracking import MlflowClient

from fault_helpers import Driver, checkpoints, sweep_args, trial_runs, wait_for, write_inputs
from servers import ServerUnavailable, ray_cluster

pytestmark = pytest.mark.slow

EPOCHS = 250  # selection trials of several seconds: the kill must land on one of them while it runs


@pytest.fixture
def cluster(tmp_path):
    try:
        with ray_cluster(tmp_path, nodes=2, cpus_per_node=1) as c:
            yield c
    except ServerUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.fault
@pytest.mark.timeout(480)
def test_fault_worker_node_killed_trial_retried_from_checkpoint(cluster, tmp_path):
    grids, budget = write_inputs(tmp_path, EPOCHS)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = cluster.client_env()
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--address", cluster.address, "--max-failures", "2"])
    args[args.index("--report-interval") + 1] = "0.1"
    driver = Driver(args, cwd=tmp_path, env=env)
    worker = cluster.node_ids[1]
    try:
        def on_worker_with_checkpoint():
            # a selection trial (one started before the kill; a trial whose node dies as it starts is another fault)
            running = [r for r in trial_runs(tracking) if r.data.tags.get("awnn.status") == "running" and r.data.tags.get("awnn.node_id") == worker
                       and r.data.tags.get("awnn.phase") == "selection"]
            ckpt = {p.parent.name for p in checkpoints(tmp_path / "results")}
            hit = [r for r in running if f"awnn-{r.data.tags['awnn.trial_key']}" in ckpt]
            return hit[0] if hit else None
        victim = wait_for(on_worker_with_checkpoint, 240, "a trial with a checkpoint on the worker node", driver.proc, interval=0.2)
        os.killpg(cluster.pgids[1], signal.SIGKILL)  # the worker node: raylet, its workers, the trial
        rc = driver.wait(timeout=400)
        out = driver.output()
        assert rc == 0, out[-4000:]
    finally:
        driver.cleanup()

    runs = trial_runs(tracking)
    keys = sorted(r.data.tags["awnn.trial_key"] for r in runs)
    assert keys == ["ass-01", "sel-0000", "sel-0001", "sel-0002"], out[-6000:]  # one run per config, none twice
    for r in runs:
        assert r.data.tags["awnn.status"] == "ok" and r.info.status == "FINISHED"
        assert r.data.metrics["epochs_run"] == EPOCHS
    retried = next(r for r in runs if r.data.tags["awnn.trial_key"] == victim.data.tags["awnn.trial_key"])
    m = retried.data.metrics
    assert m["retries"] >= 1 and m["attempts"] >= 2 and int(retried.data.tags["awnn.retries"]) >= 1
    assert retried.data.tags["awnn.node_id"] == cluster.node_ids[0]  # finished on the surviving node
    # resumed, not restarted: epoch 1 was reported once, by the first attempt
    history = MlflowClient(tracking).get_metric_history(retried.info.run_id, "val_acc")
    steps = [h.step for h in history]
    assert steps.count(1) == 1 and max(steps) == EPOCHS and set(steps) == set(range(1, EPOCHS + 1))
    # the lost attempt's compute is counted on top of the training that survived
    assert m["compute_seconds"] >= m["train_seconds"] > 0
    assert m["wall_device_hours"] == pytest.approx(m["compute_seconds"] / 3600)
    # 1 CPU: CPU time, capped at wall time per attempt (tracking/callback.py), so with two attempts the sum of the
    # capped attempts is at most the cap of the sums, and below it only by an attempt's CPU time above its wall time
    cap = min(m["cpu_seconds"], m["compute_seconds"]) / 3600
    assert 0 < m["device_hours"] <= cap * (1 + 1e-9) and m["device_hours"] == pytest.approx(cap, rel=0.02)

    from tracking.analysis import cost_table, load_comparison, problems

    data = load_comparison(tracking)
    key = retried.data.tags["awnn.trial_key"]
    assert any(f" {key} (" in line and "retried" in line for line in problems(data)), problems(data)  # the report says so
    row = data.runs[data.runs["trial_key"] == retried.data.tags["awnn.trial_key"]].iloc[0]
    assert row["retries"] >= 1 and row["attempts"] >= 2
    sel = cost_table(data).query("strategy == 'awnn' and phase == 'selection'").iloc[0]
    assert sel["configs"] == 3 and sel["ok"] == 3
