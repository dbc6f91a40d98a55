"""Bad input to `awnn sweep` not covered by tests/search/test_grid.py and
tests/search/test_sweep.py: an unreachable Ray address, a missing data directory, a
broken budget file.  Each exits 2 in seconds with one line naming what is
wrong and where; no Ray trial starts and nothing is written to MLflow."""
from __future__ import annotations

import time

import pytest

from conftest import run_awnn
from machine import limit
from servers import ServerUnavailable, free_port, ray_cluster


def _one_line_error(p, *fragments: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def _nothing_launched(tmp_path) -> None:
    assert not (tmp_path / "mlflow.db").exists()  # nothing written to MLflow
    assert not (tmp_path / "awnn-results").exists()  # no Ray trial started


@pytest.mark.fault
def test_fault_bad_input_unreachable_address_fails_in_seconds(tmp_path):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--address", f"127.0.0.1:{port}"],
                 cwd=tmp_path, timeout=120)
    _one_line_error(p, f"--address 127.0.0.1:{port}: cannot join the Ray cluster", "nothing answers")
    assert time.monotonic() - t0 < limit(60)  # ray.init alone would retry for minutes
    _nothing_launched(tmp_path)


@pytest.mark.fault
def test_an_address_where_an_http_server_answers_fails_in_seconds(tmp_path):
    """The dashboard's port, an MLflow server, any port but the GCS's: before (2026-12-07) the driver waited more than
    5 minutes, a warning of Ray's every 30 s ("Failed to get cluster ID from GCS server: TimedOut")."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        t0 = time.monotonic()
        address = f"127.0.0.1:{server.server_address[1]}"
        p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--address", address],
                     cwd=tmp_path, timeout=120)
        _one_line_error(p, f"--address {address}: cannot join the Ray cluster (what listens at {address} is an HTTP "
                           "server", "give the cluster head's GCS address (host:6379")
        assert time.monotonic() - t0 < limit(60)
    finally:
        server.shutdown()
    _nothing_launched(tmp_path)


@pytest.mark.fault
def test_a_tracking_uri_where_an_http_server_that_is_not_mlflow_answers_says_so(tmp_path):
    """Before (2026-12-07): `... was refused: API request to endpoint /api/2.0/mlflow/experiments/get-by-name failed
    with error code 404 != 200.`: what the 404 meant was left to the reader."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--tracking-uri", uri],
                     cwd=tmp_path, timeout=120)
        _one_line_error(p, f"MLflow store {uri}: the first request (experiment 'awnn-doublemoon') was refused: ",
                        "error code 404 != 200; nothing at that URL answers MLflow's REST API: it is not an MLflow "
                        "tracking server (another service's port?), or the server is under another path")
    finally:
        server.shutdown()
    assert not (tmp_path / "awnn-results").exists()


@pytest.mark.fault
@pytest.mark.parametrize("given", ["flag", "environment"])
def test_a_ray_client_address_is_refused_before_anything_starts(tmp_path, given):
    """`ray://host:10001` (Ray Client, which sweep's help once showed): under it Ray Tune runs the search in an actor
    on the cluster, so the driver's MLflow records and watches would run there.  Before (2026-12-07): a line naming
    the `ray[client]` package it lacks (or, nothing listening, "nothing answers"); with the package, the search ran
    away from its driver."""
    address = f"ray://127.0.0.1:{free_port()}"
    args = ["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke"]
    if given == "flag":
        p = run_awnn([*args, "--address", address], cwd=tmp_path, timeout=120)
        _one_line_error(p, f"--address {address}: a Ray Client address, which awnn cannot use", "host:6379")
    else:
        p = run_awnn(args, cwd=tmp_path, timeout=120, env={"RAY_ADDRESS": address})
        _one_line_error(p, f"RAY_ADDRESS={address}: a Ray Client address, which awnn cannot use", "host:6379")
    _nothing_launched(tmp_path)


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_cluster_that_refuses_the_drivers_token_is_one_line_naming_the_token(tmp_path):
    """A real cluster with token authentication on (tests/servers.py): a driver that sends no token, or another
    token.  Before (2026-12-07): 20 lines of Ray's C++ warnings ("... InvalidAuthToken ..."), then `cannot join the
    Ray cluster (Failed to connect to Ray cluster at ...)`: the token never named.  (Ray retries for ~20 s;
    RAY_gcs_server_port_wait_time_s, its operators' setting for that wait, shortens it here.)"""
    (tmp_path / "cluster").mkdir()
    args = ["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke"]
    cases = [({"RAY_AUTH_MODE": "disabled"}, "it sent none, as RAY_AUTH_MODE is not `token`: set RAY_AUTH_MODE=token"),
             ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}, "the token in RAY_AUTH_TOKEN is not the cluster's")]
    try:
        with ray_cluster(tmp_path / "cluster", nodes=1) as cluster:
            for env, says in cases:
                env = {**env, "HOME": str(tmp_path), "RAY_gcs_server_port_wait_time_s": "3"}
                env.setdefault("RAY_AUTH_TOKEN", "")
                p = run_awnn([*args, "--address", cluster.address], cwd=tmp_path, timeout=120, env=env)
                _one_line_error(p, f"--address {cluster.address}: the Ray cluster there requires a token (its token "
                                   "authentication is on) and refused this driver: " + says, "ray get-auth-token")
                _nothing_launched(tmp_path)
            # the cluster's own token joins (what the line says to do)
            p = run_awnn([*args, "--address", cluster.address, "--storage", str(tmp_path / "joined"), "--tracking-uri",
                          f"sqlite:///{tmp_path / 'joined.db'}"], cwd=tmp_path, timeout=300,
                         env={**cluster.client_env(), "HOME": str(tmp_path)})
            assert p.returncode == 0, p.stderr[-3000:]
    except ServerUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.fault
def test_fault_bad_input_missing_data_directory_exits_2(tmp_path):
    p = run_awnn(["sweep", "--task", "mnist", "--strategy", "fixed", "--budget", "smoke"], cwd=tmp_path, timeout=120)
    line = _one_line_error(p, "MNIST: expected files", "(missing: ")
    assert " in data" in line or "/data" in line, line  # the folder it looked in
    _nothing_launched(tmp_path)


@pytest.mark.fault
@pytest.mark.parametrize(
    "text, fragments",
    [
        ("epoch_scale: [0.1\n", ["b.yaml: malformed YAML"]),
        ("epoch_scale: 0.1\nmax_epochs: ten\n", ["b.yaml: key 'max_epochs': expected an integer >= 1, found 'ten'"]),
        ("min_epochs: 5\nmax_epochs: 2\n", ["b.yaml: key 'max_epochs': expected a value >= min_epochs=5, found 2"]),
        ("- 1\n- 2\n", ["b.yaml: expected a mapping"]),
    ],
    ids=["malformed", "wrong-type", "out-of-range", "not-a-mapping"],
)
def test_fault_bad_input_broken_budget_file_exits_2(tmp_path, text, fragments):
    budget = tmp_path / "b.yaml"
    budget.write_text(text)
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", str(budget)], cwd=tmp_path, timeout=120)
    _one_line_error(p, *fragments)
    _nothing_launched(tmp_path)


# ---------------------------------------------------------------- found by trying it: inputs that used to get past
# validation, start Ray and end in a traceback with the comparison run left RUNNING


@pytest.mark.fault
@pytest.mark.parametrize(
    "content, fragments",
    [
        (b"epoch_scale: .nan\n", ["b.yaml: key 'epoch_scale': expected a number >= 0, found nan"]),
        (b"retrain_runs: 2\npatience_scale: .inf\n", ["b.yaml: key 'patience_scale': expected a number >= 0, found inf"]),
        (b"epoch_scale: 0.1 # \xff\xfe latin-1\n", ["b.yaml: not a UTF-8 text file (byte "]),
        (None, ["--budget ", "b.yaml: expected a YAML file, found a folder"]),
    ],
    ids=["nan", "inf", "not-utf8", "folder"],
)
def test_fault_bad_input_budget_file_checked_like_grid_files(tmp_path, content, fragments):
    budget = tmp_path / "b.yaml"
    if content is None:
        budget.mkdir()
    else:
        budget.write_bytes(content)
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", str(budget)], cwd=tmp_path, timeout=120)
    _one_line_error(p, *fragments)
    _nothing_launched(tmp_path)


@pytest.mark.fault
def test_fault_bad_input_storage_under_a_file_exits_2(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--storage", str(tmp_path / "afile" / "results")], cwd=tmp_path, timeout=120)
    _one_line_error(p, f"--storage {tmp_path / 'afile' / 'results'}: {tmp_path / 'afile'} is a file, not a folder")
    _nothing_launched(tmp_path)


@pytest.mark.fault
def test_fault_bad_input_unwritable_tracking_folder_fails_before_ray(tmp_path):
    """A SQLite store on a read-only mount (/sys is one, even for root): one
    line in seconds, not ~115 s of Ray start-up and tracebacks."""
    import os

    if os.access("/sys", os.W_OK) and _can_write("/sys"):
        pytest.skip("/sys is writable here; no read-only mount to test with")
    t0 = time.monotonic()
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--tracking-uri", "sqlite:////sys/awnn-mlflow.db"], cwd=tmp_path, timeout=120)
    _one_line_error(p, "--tracking-uri sqlite:////sys/awnn-mlflow.db: cannot write in /sys (")
    assert time.monotonic() - t0 < limit(60)
    assert not (tmp_path / "awnn-results").exists()


def _can_write(folder: str) -> bool:
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--cpus-per-trial", "nan", "--cpus-per-trial: expected a number > 0, found nan"),
        ("--gpus-per-trial", "-1", "--gpus-per-trial: expected a number >= 0, found -1.0"),
        ("--gpus-per-trial", "inf", "--gpus-per-trial: expected a number >= 0, found inf"),
        ("--report-interval", "nan", "--report-interval: expected a number of seconds >= 0, found nan"),
        ("--checkpoint-interval", "-1", "--checkpoint-interval: expected a number of seconds >= 0 (0: at every report), found -1.0"),
        ("--num-cpus", "0", "--num-cpus: expected an integer >= 1, found 0"),
        ("--stall-warning", "-5", "--stall-warning: expected a number of seconds >= 0 (0: never warn), found -5.0"),
        ("--stall-warning", "nan", "--stall-warning: expected a number of seconds >= 0 (0: never warn), found nan"),
        ("--stall-timeout", "-1", "--stall-timeout: expected a number of seconds >= 0 (0: never end a trial), found -1.0"),
        ("--stall-timeout", "inf", "--stall-timeout: expected a number of seconds >= 0 (0: never end a trial), found inf"),
        ("--max-failures", "-2", "--max-failures: expected an integer >= -1 (-1: retry without end), found -2"),
    ],
)
def test_bad_input_numeric_run_flags_fail_before_anything_starts(tmp_path, monkeypatch, capsys, flag, value, expected):
    """Numbers argparse accepts (nan, inf, negatives) used to reach Ray."""
    from search.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["compare", "--task", "doublemoon", "--budget", "smoke", flag, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"awnn compare: error: {expected}"]
    _nothing_launched(tmp_path)
