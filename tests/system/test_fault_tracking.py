"""The MLflow tracking server goes away for a while during a sweep (the test
stops and restarts a real `mlflow server` on the same port and database):
no trial fails because of it, every epoch reported during the outage reaches
MLflow once the server is back, and the sweep finishes."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from mlflow.tracking import MlflowClient

from fault_helpers import Driver, epochs_lasting, sweep_args, trial_runs, wait_for, write_inputs
from servers import VENV_BIN, free_port, stop_process_group

pytestmark = pytest.mark.slow


def _epochs() -> int:
    """~4 s a trial (200 epochs of ~10 ms left 6 s of sweep after the restart): the sweep outlasts the 8 s outage and
    the server's restart.  Sized in seconds: 400 epochs were 2.3 s by 2026-11-29."""
    return epochs_lasting(4.0, at_least=400)


def _start_server(db: Path, port: int, tmp_path: Path) -> subprocess.Popen:
    log = open(tmp_path / "mlflow-server.log", "ab")
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "TMPDIR": str(tmp_path), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
                             "--artifacts-destination", (tmp_path / "artifacts").as_uri(), "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    url = f"http://127.0.0.1:{port}/health"

    def up():
        assert proc.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-3000:]
        return requests.get(url, timeout=2).ok
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if up():
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.5)
    stop_process_group(proc.pid, proc=proc)
    raise AssertionError("mlflow server did not start within 120 s")


@pytest.mark.fault
@pytest.mark.timeout(400)
def test_fault_tracking_outage_delays_writes_but_loses_nothing(tmp_path):
    grids, budget = write_inputs(tmp_path, _epochs())
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    db = tmp_path / "server.db"
    server = _start_server(db, port, tmp_path)
    driver = None
    try:
        args = sweep_args(tmp_path, grids, budget, uri, extra=["--num-cpus", "2"])
        # MLflow's client gives up quickly, so the sweep's writer (tracking/store.py) must do the retrying
        driver = Driver(args, cwd=tmp_path, env={"MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"})
        wait_for(lambda: any(r.data.tags.get("awnn.status") == "running" for r in trial_runs(uri)), 180, "a running trial", driver.proc)
        stop_process_group(server.pid, timeout=5, proc=server)  # the outage: trials go on reporting
        outage_start = time.time()
        time.sleep(8)
        server = _start_server(db, port, tmp_path)
        outage_end = time.time()
        assert driver.proc.poll() is None, "the sweep ended before the server came back: no outage was tested"
        rc = driver.wait(timeout=300)
        out = driver.output()
        assert rc == 0, out[-4000:]
        assert "MLflow write failed" in out  # the writer saw the outage ...
        assert "warning: MLflow did not take" not in out  # ... and got everything through after it
    finally:
        if driver is not None:
            driver.cleanup()
        if server.poll() is not None:  # read back what the store holds
            server = _start_server(db, port, tmp_path)
    try:
        assert not (tmp_path / "mlflow.db").exists()  # nothing went to the default SQLite file
        runs = trial_runs(uri)
        client = MlflowClient(uri)
        assert sorted(r.data.tags["awnn.trial_key"] for r in runs) == ["ass-01", "sel-0000", "sel-0001", "sel-0002"]
        during = 0
        for r in runs:
            assert r.data.tags["awnn.status"] == "ok" and r.info.status == "FINISHED"
            assert r.data.metrics["epochs_run"] == _epochs()
            history = client.get_metric_history(r.info.run_id, "val_acc")
            assert sorted(m.step for m in history) == list(range(1, _epochs() + 1))  # every epoch once, the outage's included
            during += sum(1 for m in history if outage_start * 1000 <= m.timestamp <= outage_end * 1000)
        assert during > 0  # epochs reported while the server was down reached it afterwards
        exp = client.get_experiment_by_name("awnn-doublemoon")
        cmp = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("awnn.kind") == "comparison"]
        assert len(cmp) == 1 and cmp[0].data.tags["awnn.state"] == "finished"
    finally:
        stop_process_group(server.pid, timeout=5, proc=server)


@pytest.mark.fault
@pytest.mark.timeout(400)
def test_fault_tracking_down_until_the_end_spools_writes_and_resume_applies_them(tmp_path):
    grids, budget = write_inputs(tmp_path, 60)
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    db = tmp_path / "server.db"
    server = _start_server(db, port, tmp_path)
    driver = None
    args = sweep_args(tmp_path, grids, budget, uri, extra=["--num-cpus", "2"])
    try:
        driver = Driver(args, cwd=tmp_path, env={"MLFLOW_HTTP_REQUEST_TIMEOUT": "3", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                                                 "AWNN_TRACKING_FLUSH_TIMEOUT": "3"})
        wait_for(lambda: any(r.data.tags.get("awnn.status") == "running" for r in trial_runs(uri)), 180, "a running trial", driver.proc)
        stop_process_group(server.pid, timeout=5, proc=server)  # down until the sweep has ended
        rc = driver.wait(timeout=300)
        out = driver.output()
        # the sweep ran to its end but MLflow lacks writes: not a success, and no summary numbers read from the incomplete store
        assert rc == 1, out[-4000:]
        assert "warning: MLflow did not take the writes of" in out and "they are saved in" in out, out[-3000:]
        last = out.strip().splitlines()[-1]
        assert last.startswith("awnn sweep: comparison ") and "ran to its end, but MLflow did not take the writes of" in last, out[-3000:]
        assert "run the same command with --resume: it applies them" in last
        assert out.count("Traceback") == 0, out[-3000:]  # one warning per outage, not MLflow's error log of every retry
    finally:
        if driver is not None:
            driver.cleanup()
        stop_process_group(server.pid, timeout=5, proc=server)
    spools = list((tmp_path / "results").glob("pending-mlflow-*.jsonl"))
    assert len(spools) == 1
    server = _start_server(db, port, tmp_path)
    try:
        from conftest import run_awnn

        p = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=240, check=True)
        assert "resume: applied" in p.stderr, p.stderr[-3000:]
        assert not spools[0].exists()  # applied, then removed
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("awnn-doublemoon")
        all_runs = client.search_runs([exp.experiment_id], max_results=1000)
        cmp = [r for r in all_runs if r.data.tags.get("awnn.kind") == "comparison"]
        assert len(cmp) == 1 and cmp[0].data.tags["awnn.state"] == "finished"  # the same comparison, not a new one
        runs = trial_runs(uri)
        assert sorted(r.data.tags["awnn.trial_key"] for r in runs) == ["ass-01", "sel-0000", "sel-0001", "sel-0002"]
        for r in runs:  # each config once, complete
            assert r.data.tags["awnn.status"] == "ok" and r.info.status == "FINISHED"
            steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, "val_acc"))
            assert steps == list(range(1, 61))
    finally:
        stop_process_group(server.pid, timeout=5, proc=server)
