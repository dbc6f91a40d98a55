"""The production tracking path, without Docker.

PostgreSQL from Debian's package on 127.0.0.1; `mlflow server` on it with the
basic-auth app, started by the same script and with the same allowed hosts
as docker-compose.yml's `mlflow` service; the sweep user created by the same
script as the compose `mlflow-user` job; a smoke sweep that logs through the
server with that user's credentials.
"""
from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest
import requests
import yaml

from conftest import run_awnn
from servers import CLUSTER_BIN, ROOT, ServerUnavailable, mlflow_server, postgres_server

# every test here needs the PostgreSQL and MLflow server processes
pytestmark = pytest.mark.slow

SWEEP_USER = "awnn-cluster"


def _compose_allowed_hosts() -> str:
    """The --allowed-hosts value of docker-compose.yml's mlflow service."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for arg in compose["services"]["mlflow"]["command"]:
        if str(arg).startswith("--allowed-hosts="):
            return str(arg).split("=", 1)[1]
    raise AssertionError("docker-compose.yml: the mlflow service sets no --allowed-hosts")


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """PostgreSQL + MLflow with basic auth + the sweep user, for this module."""
    tmp = tmp_path_factory.mktemp("tracking-server")
    try:
        with postgres_server(tmp) as pg, mlflow_server(pg.uri, tmp, auth=True, allowed_hosts=_compose_allowed_hosts()) as ml:
            password = os.urandom(16).hex()
            env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
            env.update(MLFLOW_TRACKING_URI=ml.url, MLFLOW_AUTH_ADMIN_USERNAME=ml.admin_username,
                       MLFLOW_AUTH_ADMIN_PASSWORD=ml.admin_password, AWNN_MLFLOW_USERNAME=SWEEP_USER,
                       AWNN_MLFLOW_PASSWORD=password, AWNN_MLFLOW_USER_WAIT_S="30")
            p = subprocess.run([sys.executable, str(CLUSTER_BIN / "awnn-mlflow-user")], capture_output=True, text=True, env=env, timeout=120)
            assert p.returncode == 0, p.stderr[-3000:]
            assert f"created MLflow user '{SWEEP_USER}'" in p.stdout
            yield {"pg": pg, "server": ml, "user": SWEEP_USER, "password": password, "dir": tmp}
    except ServerUnavailable as e:
        pytest.skip(str(e))


def test_tracking_server_refuses_requests_without_credentials(tracking):
    url = tracking["server"].url
    search = url + "/api/2.0/mlflow/experiments/search?max_results=1"
    assert requests.get(search, timeout=10).status_code == 401
    assert requests.post(url + "/api/2.0/mlflow/experiments/create", json={"name": "intruder"}, timeout=10).status_code == 401
    assert requests.get(search, headers=_basic(tracking["user"], "wrong-password"), timeout=10).status_code == 401
    assert requests.get(search, headers=_basic(tracking["user"], tracking["password"]), timeout=10).status_code == 200
    # the health check (compose healthcheck, awnn's reachability probe) needs no credentials
    assert requests.get(url + "/health", timeout=10).status_code == 200


def test_tracking_server_answers_only_the_compose_host_names(tracking):
    url = tracking["server"].url
    search = url + "/api/2.0/mlflow/experiments/search?max_results=1"
    auth = _basic(tracking["user"], tracking["password"])
    for host in ("mlflow:5000", "mlflow", "localhost:5000", "127.0.0.1:5000"):
        assert requests.get(search, headers={**auth, "Host": host}, timeout=10).status_code == 200, host
    r = requests.get(search, headers={**auth, "Host": "attacker.example"}, timeout=10)
    assert r.status_code == 403
    assert "Invalid Host header" in r.text


def test_tracking_server_sweep_user_is_not_admin(tracking):
    # creating users is for the admin only
    r = requests.post(tracking["server"].url + "/api/2.0/mlflow/users/create", json={"username": "eve", "password": "x" * 16},
                      headers=_basic(tracking["user"], tracking["password"]), timeout=10)
    assert r.status_code == 403


def test_tracking_server_user_logs_runs_and_proxied_artifacts(tracking, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    ml = tracking["server"]
    for k, v in ml.client_env(tracking["user"], tracking["password"]).items():
        monkeypatch.setenv(k, v)
    client = MlflowClient(ml.url)
    exp = client.create_experiment("awnn-tracking-server-probe")
    run = client.create_run(exp, tags={"awnn.kind": "probe"})
    client.log_param(run.info.run_id, "width", 8)
    client.log_metric(run.info.run_id, "val_acc", 0.5, step=1)
    (tmp_path / "note.txt").write_text("through the server")
    client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
    client.set_terminated(run.info.run_id)
    got = client.get_run(run.info.run_id)
    assert got.data.params["width"] == "8" and got.data.metrics["val_acc"] == 0.5
    # artifacts went through the server (--serve-artifacts) to its artifact store
    assert [p.read_text() for p in ml.artifacts_dir.rglob("note.txt")] == ["through the server"]


def test_tracking_server_smoke_sweep_logs_with_credentials(tracking, tmp_path, monkeypatch):
    ml = tracking["server"]
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--num-cpus", "2",
                  "--tracking-uri", ml.url, "--storage", str(tmp_path / "ray-results")],
                 cwd=tmp_path, timeout=400, env=ml.client_env(tracking["user"], tracking["password"]), check=True)
    assert not (tmp_path / "mlflow.db").exists()  # nothing went to the default SQLite file
    # MLflow's two "View run/experiment at" lines per ended run (against a server) are off (tracking/contract.py client)
    noise = [line for line in (p.stdout + p.stderr).splitlines() if "View run" in line or "View experiment" in line]
    assert not noise, noise[:4]

    from mlflow.server import get_app_client
    from mlflow.tracking import MlflowClient

    for k, v in ml.client_env().items():  # read back as the admin
        monkeypatch.setenv(k, v)
    client = MlflowClient(ml.url)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    kinds = [r.data.tags.get("awnn.kind") for r in runs]
    assert kinds.count("comparison") == 1
    # where the runs are: the server's experiment page (not `mlflow ui --backend-store-uri http://...`)
    assert f"(a tracking server: open {ml.url.rstrip('/')}/#/experiments/{exp.experiment_id} in a browser)" in " ".join(p.stdout.split()), p.stdout[-1500:]
    sweeps = [r for r in runs if r.data.tags.get("awnn.kind") == "sweep"]
    assert sorted(r.data.tags["awnn.phase"] for r in sweeps) == ["assessment", "selection"]
    assert {r.data.tags["awnn.strategy"] for r in sweeps} == {"awnn"}
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    assert len(trials) == 6 + 2  # doublemoon's AWNN grid, then 2 smoke re-training runs
    assert {t.data.tags["awnn.status"] for t in trials} == {"ok"}
    sweep_ids = {r.info.run_id for r in sweeps}
    assert all(t.data.tags["mlflow.parentRunId"] in sweep_ids for t in trials)
    comparison = {r.data.tags["awnn.comparison"] for r in runs}
    assert len(comparison) == 1
    # the sweep user created the experiment, so it manages it
    perm = get_app_client("basic-auth", tracking_uri=ml.url).get_user_permission(tracking["user"], "experiment", exp.experiment_id)
    assert perm.permission == "MANAGE"


def test_tracking_server_sweep_without_credentials_fails_fast(tracking, tmp_path):
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--tracking-uri", tracking["server"].url],
                 cwd=tmp_path, timeout=120, env={"MLFLOW_TRACKING_USERNAME": "", "MLFLOW_TRACKING_PASSWORD": ""})
    assert p.returncode == 2
    assert "refused the credentials (HTTP 401)" in p.stderr
    assert not (tmp_path / "awnn-results").exists()


def test_tracking_server_credentials_file_is_enough(tracking, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    home = tmp_path / "home"
    (home / ".mlflow").mkdir(parents=True)
    (home / ".mlflow" / "credentials").write_text(
        f"[mlflow]\nmlflow_tracking_username = {tracking['user']}\nmlflow_tracking_password = {tracking['password']}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    url = tracking["server"].url
    MlflowClient(url).search_experiments(max_results=1)  # MLflow's client signs in from the file
    from tracking.store import check_tracking

    check_tracking(url)  # so must awnn's fail-fast check
