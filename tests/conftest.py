"""Shared fixtures.  Tests run real components: a local Ray, MLflow on a
SQLite file (or a real server), real files in tmp dirs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AWNN = [sys.executable, "-m", "search.cli"]


def run_awnn(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the `awnn` CLI in a subprocess (a fresh Ray and MLflow client each time)."""
    e = os.environ.copy()
    e.pop("RAY_ADDRESS", None)
    e.pop("MLFLOW_TRACKING_URI", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if env:
        e.update(env)
    p = subprocess.run(AWNN + args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"awnn {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-5000:]}")
    return p


def strict_json(text: str):
    """`text` read as RFC 8259 JSON, as JavaScript, Go or serde_json read it: a NaN, Infinity or -Infinity
    literal (which Python's json writes and reads) fails the test."""
    def refuse(literal):
        raise AssertionError(f"{literal} is not JSON: {text[:300]}")
    return json.loads(text, parse_constant=refuse)


def shared_session_result(tmp_path_factory, name: str, build) -> dict:
    """`build(folder)`'s result (a dict whose "dir" is `folder`), made once for
    the whole test session, also across pytest-xdist's workers: the first
    worker that asks builds it under the session's shared temporary folder
    while holding a lock on it, the others wait and read it back.  (A session
    fixture is otherwise built once per worker: the two real comparisons
    below ran twice in `make test`, ~1 minute.)  Tests only read what it holds."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return build(tmp_path_factory.mktemp(name))
    import fcntl
    import json

    root = tmp_path_factory.getbasetemp().parent  # each worker's basetemp is a folder of this one
    done = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            work = root / f"{name}-{worker}"  # (a worker's build that failed leaves its folder to it alone)
            work.mkdir()
            result = build(work)
            done.write_text(json.dumps({**result, "dir": str(result["dir"])}))
    result = json.loads(done.read_text())
    return {**result, "dir": Path(result["dir"])}


@pytest.fixture(scope="session")
def smoke_comparison(tmp_path_factory):
    """One real `awnn compare --task doublemoon --budget smoke` for the whole session.

    Returns a dict with the working dir, the tracking URI and the CLI's output."""
    def build(work: Path) -> dict:
        p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2"], cwd=work, check=True)
        return {"dir": work, "tracking_uri": f"sqlite:///{work / 'mlflow.db'}", "stdout": p.stdout, "stderr": p.stderr}

    return shared_session_result(tmp_path_factory, "smoke-compare", build)


# one report per epoch: the last epoch's report must be the final one, or ASHA
# (which stops every trial at max_t) records finished trials as stopped
# one config per trial (--fuse 1): the execution whose costs the report tests recompute by hand, and
# under which the smoke budget's 30 fixed trials cost more than AWNN's 6 (fused, they cost less)
ALL_STRATEGIES = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed,awnn,tpe,asha,random", "--repeats", "2",
                  "--num-cpus", "2", "--report-interval", "0", "--fuse", "1"]


@pytest.fixture(scope="session")
def all_strategies_comparison(tmp_path_factory):
    """One real five-strategy comparison (tpe, asha and random twice each) on
    DoubleMoon at the smoke budget, for the whole session.

    Returns a dict with the working dir, the tracking URI, the Optuna storage
    URL and the CLI's output."""
    def build(work: Path) -> dict:
        p = run_awnn(ALL_STRATEGIES, cwd=work, check=True)
        return {"dir": work, "tracking_uri": f"sqlite:///{work / 'mlflow.db'}", "optuna_storage": f"sqlite:///{work / 'optuna.db'}",
                "stdout": p.stdout, "stderr": p.stderr}

    return shared_session_result(tmp_path_factory, "all-strategies", build)



@pytest.fixture(autouse=True)
def _denormals_kept_after_each_test():
    """Float denormal flushing is per process state (awnn/arith.py): a test that
    runs a trial or `awnn train` in this process turns it on, and it stayed on
    for every later test (hypothesis, for one, then refuses to draw floats:
    tests/search/test_fuzz_grid.py failed after such a test).  After each test
    it is off again, as in a fresh process."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_flush_denormal(False)
