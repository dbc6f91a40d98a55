"""Shared fixtures.  Tests run real components: a local Ray, MLflow on a
SQLite file (or a real server), real files in tmp dirs."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from machine import ENV as SLOWDOWN_ENV
from machine import limit, slowdown

ROOT = Path(__file__).resolve().parent.parent
AWNN = [sys.executable, "-m", "search.cli"]

# A suite started with SIGINT ignored (`make test &` from a script, nohup, a CI runner that backgrounds it) hands
# that on to every process its tests start, where the product rightly leaves an ignored SIGINT ignored
# (search/signals.py), so the tests of what a Ctrl-C does would see none (8 failed so on 2026-12-04).  The session
# takes Python's own handler instead: a caught signal is reset to the default at exec, so the processes the tests
# start see a SIGINT as from a terminal.  (The ignored case itself is tested where a test sets it up.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_awnn(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the `awnn` CLI in a subprocess (a fresh Ray and MLflow client each time).  `timeout`: seconds on the
    machine the suite's limits were set on, scaled to this one (tests/machine.py)."""
    e = os.environ.copy()
    e.pop("RAY_ADDRESS", None)
    e.pop("MLFLOW_TRACKING_URI", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if env:
        e.update(env)
    p = subprocess.run(AWNN + args, cwd=cwd, capture_output=True, text=True, timeout=limit(timeout), env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"awnn {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-5000:]}")
    return p


def pytest_collection_modifyitems(config, items):
    """Every pytest-timeout mark scaled to this machine (tests/machine.py): the marks were set in seconds on a faster
    one, and on a CI machine ~3.4x slower a test ran past its mark with nothing hung."""
    marked = [(item, item.get_closest_marker("timeout")) for item in items]
    marked = [(item, m) for item, m in marked if m is not None and m.args and isinstance(m.args[0], (int, float)) and m.args[0] > 0]
    if not marked:
        return
    try:
        factor = slowdown()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    for item, m in marked:
        item.add_marker(pytest.mark.timeout(m.args[0] * factor, *m.args[1:], **m.kwargs), append=False)
        item.user_properties.append(("timeout_as_written", m.args[0]))


def pytest_report_header(config):
    if os.environ.get(SLOWDOWN_ENV):
        return f"time limits scaled by {SLOWDOWN_ENV}={os.environ[SLOWDOWN_ENV]}"
    return "time limits scaled by this machine's slowdown, measured in each test process (tests/machine.py)"


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



_HANDLED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def no_interrupt_left():
    """What runs inside leaves no interrupt behind for the code after it.

    A test that runs `search.cli.main` in this process leaves the command's signal handling on (search/signals.py:
    SIGTERM, SIGINT and SIGHUP raise KeyboardInterrupt; its unraisable hook; its closed-output interrupt): put back
    as it was, the command's state cleared.  A signal re-delivery still pending or a cluster watch still running would
    interrupt whichever test runs next on this worker (pytest-xdist then reports the worker down, "keyboard-interrupt",
    at an unrelated test): cancelled, and an AssertionError names what was left."""
    handlers = {sig: signal.getsignal(sig) for sig in _HANDLED}
    hook = sys.unraisablehook
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
        sys.unraisablehook = hook
        signals = sys.modules.get("search.signals")
        left = []
        if signals is not None:
            left += [f"a re-delivery of signal {t.args[0]} (search/signals.py)" for t in signals.pending_redeliveries()]
            signals.disable()
        for t in threading.enumerate():
            if t.name == "awnn-gcs-watch" and t.is_alive():
                t.join(timeout=limit(5))
                if t.is_alive():
                    left.append("the cluster watch (search/tune.py watch_cluster) still running")
                    t.name += " (left by a test)"  # (a daemon no one can stop now: named once, by the test that left it)
        assert not left, f"left what would interrupt the main thread later: {'; '.join(left)}"


@pytest.fixture(autouse=True)
def _no_interrupt_left_for_the_next_test():
    """no_interrupt_left around every test: the test that leaves an interrupt behind fails, not the next one."""
    with no_interrupt_left():
        yield


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
