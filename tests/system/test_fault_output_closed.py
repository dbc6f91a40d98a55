"""The reader of a driver's output goes away (`awnn compare ... 2>&1 | head`,
a `tee` that ended, a log shipper restarted): the driver stops as for Ctrl-C,
with every run it had open closed as interrupted, exits 141 (as a command
SIGPIPE ended) and `--resume` finishes the comparison.

Before (search/signals.py): each later write raised BrokenPipeError wherever
the driver printed; raised in a Ray Tune callback (a sweep's closing line) it
was swallowed by Tune, the sweep stayed RUNNING, and the driver ran on to mark
the comparison `finished` over it.  Likewise an output that cannot be written
for another reason (a file on a full disk: /dev/full here; exit 2).  The class: any error in the driver's hooks
for a trial's end (tracking/hooks.py), tested last with an injected bug."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import AWNN, ROOT, run_awnn
from fault_helpers import resume_finishes, store_client, sweep_args, write_inputs
from servers import _processes_with_marker, stop_process_group

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def _start(args: list[str], cwd: Path, stdout, stderr) -> tuple[subprocess.Popen, str]:
    marker = secrets.token_hex(8)
    env = os.environ.copy()
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    env["AWNN_TEST_RAY_CLUSTER"] = marker  # (every process it spawns carries it: see _end)
    return subprocess.Popen(AWNN + args, cwd=cwd, env=env, stdout=stdout, stderr=stderr, start_new_session=True), marker


def _all_runs(tracking: str) -> list:
    c = store_client(tracking)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return c.search_runs([exp.experiment_id], max_results=1000) if exp else []


def _end(proc: subprocess.Popen, marker: str) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
    stop_process_group(proc.pid, timeout=5)
    for pid in _processes_with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.timeout(400)
def test_the_reader_of_its_output_gone_mid_sweep_interrupts_the_driver_and_resume_finishes(tmp_path):
    epochs = 5
    grids, budget = write_inputs(tmp_path, epochs)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking)
    proc, marker = _start(args, tmp_path, subprocess.PIPE, subprocess.STDOUT)  # as `awnn sweep ... 2>&1 | head`
    seen = []
    try:
        for raw in proc.stdout:  # (a deadline: the test's timeout)
            seen.append(raw.decode(errors="replace"))
            if "awnn selection: 0/" in seen[-1]:  # its first progress line: the sweep runs
                break
        proc.stdout.close()  # the reader goes away: the driver's next line finds no reader
        code = proc.wait(timeout=240)
    finally:
        _end(proc, marker)
    assert seen and "awnn selection: 0/" in seen[-1], "".join(seen)[-3000:]
    assert code == 141, code
    runs = _all_runs(tracking)
    open_ = [(r.data.tags.get("awnn.kind"), r.data.tags.get("awnn.key")) for r in runs if r.info.status == "RUNNING"]
    assert not open_, open_  # (before: the sweep whose closing line raised stayed RUNNING)
    by_kind = {}
    for r in runs:
        by_kind.setdefault(r.data.tags["awnn.kind"], []).append(r)
    (cmp_run,) = by_kind["comparison"]
    assert (cmp_run.info.status, cmp_run.data.tags["awnn.state"]) == ("KILLED", "interrupted")  # (before: FINISHED, finished)
    assert not [r for r in by_kind.get("trial", []) if r.data.tags["awnn.status"] == "failed"]
    assert not [r for r in by_kind.get("trial", []) if r.info.status == "KILLED" and r.data.tags["awnn.status"] != "interrupted"]
    resume_finishes(args, tmp_path, tracking, epochs)


def _unwritable_stdout(how: str) -> int:
    """A write end for the driver's stdout: a pipe whose reader is already gone, or /dev/full (every write: ENOSPC)."""
    if how == "closed":
        read, write = os.pipe()
        os.close(read)
        return write
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    return os.open("/dev/full", os.O_WRONLY)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("how, code, why", [("closed", 141, "was closed by its reader"),
                                            ("full", 2, "could not be written (No space left on device)")])
def test_stdout_unwritable_at_the_summary_leaves_the_comparison_finished_and_says_how_to_get_the_report(tmp_path, how, code, why):
    grids, budget = write_inputs(tmp_path, 5)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["compare", "--task", "doublemoon", "--strategies", "awnn", "--budget", str(budget), "--grid-dir", str(grids),
            "--storage", str(tmp_path / "results"), "--tracking-uri", tracking, "--num-cpus", "2"]
    out = _unwritable_stdout(how)  # the summary (the first line on stdout) cannot be written
    with open(tmp_path / "stderr.txt", "w+") as err:
        proc, marker = _start(args, tmp_path, out, err)
        os.close(out)
        try:
            exit_code = proc.wait(timeout=300)
        finally:
            _end(proc, marker)
        err.seek(0)
        stderr = err.read()
    assert exit_code == code, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    line = stderr.strip().splitlines()[-1]
    assert line.startswith(f"awnn compare: its output (stdout) {why} after comparison "), line
    assert "its results are complete in MLflow; the report was not written" in line, line
    runs = _all_runs(tracking)
    assert runs and all(r.info.status == "FINISHED" for r in runs)
    assert {r.data.tags["awnn.kind"] for r in runs} == {"comparison", "sweep", "trial"}
    if how == "closed":  # --resume writes the report of the finished comparison (once: the same path for both)
        p = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=300, check=True)
        assert "Report: " in p.stdout


@pytest.mark.timeout(300)
def test_stderr_on_a_full_disk_stops_the_driver_resumably_and_says_so_on_stdout(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    grids, budget = write_inputs(tmp_path, 5)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking)
    full = os.open("/dev/full", os.O_WRONLY)  # as `awnn sweep ... 2> log` with no room left for log
    proc, marker = _start(args, tmp_path, subprocess.PIPE, full)
    os.close(full)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        _end(proc, marker)
    assert proc.returncode == 2, out[-3000:]
    assert out.decode().strip().splitlines()[-1] == ("awnn sweep: error: cannot write its output (stderr): No space left on device; "
                                                     "interrupted as by Ctrl-C; run the same command with --resume to continue")
    runs = _all_runs(tracking)  # closed as for Ctrl-C, resumable (the resume itself: the first test)
    assert runs and not [r for r in runs if r.info.status == "RUNNING"]
    assert {r.data.tags.get("awnn.state") for r in runs if r.data.tags["awnn.kind"] == "comparison"} == {"interrupted"}


def test_a_command_without_a_sweep_ends_quietly_when_its_reader_is_gone(tmp_path):
    read, write = os.pipe()
    os.close(read)
    proc, marker = _start(["grids"], tmp_path, write, subprocess.PIPE)
    os.close(write)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        _end(proc, marker)
    assert proc.returncode == 141 and err == b"", err


def test_a_closed_output_met_in_another_thread_interrupts_the_main_thread():
    """A write from a helper thread (the stall watch, the heartbeat) that finds
    the reader gone interrupts the main thread, where the driver stops."""
    from search import signals

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w", buffering=1)
    saved = sys.stderr
    try:
        sys.stderr = stream
        signals.enable()
        with signals.guard_output():
            helper = threading.Thread(target=lambda: print("a line from a helper thread", file=sys.stderr))
            with pytest.raises(KeyboardInterrupt):
                helper.start()
                helper.join()
                for _ in range(100):  # the interrupt lands at one of the main thread's next bytecodes
                    time.sleep(0.01)
            print("later lines go nowhere, without an error", file=sys.stderr)
        assert signals.output_closed() == "stderr"
    finally:
        sys.stderr = saved
        for s, h in handlers.items():
            signal.signal(s, h)
        stream.close()


# a bug in the driver's bookkeeping of a trial's end, injected into a real driver: SweepRuns.sweep_ended raises once
BUGGY_DRIVER = """
import sys
import search.sweep_runs as m
def sweep_ended(self, *args, **kwargs):
    raise RuntimeError("injected: a bug in closing a sweep")
m.SweepRuns.sweep_ended = sweep_ended
from search.cli import entry
entry()
"""


@pytest.mark.timeout(400)
def test_an_error_in_the_drivers_handling_of_a_trials_end_stops_it_loudly_not_swallowed_by_tune(tmp_path):
    """The class the closed output belonged to (tracking/hooks.py): an error in a Tune hook for a trial's end.
    Before: Tune logged it and ran on; the sweep stayed RUNNING under a comparison marked finished."""
    epochs = 5
    grids, budget = write_inputs(tmp_path, epochs)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking)
    env = os.environ.copy()
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", BUGGY_DRIVER, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "tracking.hooks.DriverBug:" in p.stderr and "RuntimeError: injected: a bug in closing a sweep" in p.stderr, p.stderr[-3000:]
    runs = _all_runs(tracking)
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    (cmp_run,) = [r for r in runs if r.data.tags["awnn.kind"] == "comparison"]
    assert (cmp_run.info.status, cmp_run.data.tags["awnn.state"]) == ("FAILED", "failed")
    resume_finishes(args, tmp_path, tracking, epochs)
