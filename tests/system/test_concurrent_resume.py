"""`--resume` of a comparison whose driver still runs (the terminal was
lost, the job looked dead): the second driver refuses in one line (exit 2)
and touches nothing.  Two `--resume` of a stopped comparison started
together: one runs it, the other refuses.  Either way each config ends with
one finished run.  Before: both drivers ran every unfinished trial and both
exited 0, so each config had two finished runs and its cost counted twice.
(search/lease.py; a driver that died is resumed at once:
tests/system/test_fault_driver.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT, run_awnn
from fault_helpers import Driver, epochs_lasting, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def _epochs() -> int:
    """~3.5 s a trial: the sweep (~10 s) outlives the second driver (~3 s to its refusal, before Ray starts); 500
    epochs were 5 s once, 2.8 s by 2026-11-29."""
    return epochs_lasting(3.5, at_least=500)


def test_resume_while_the_driver_runs_is_refused_and_of_two_resumes_started_together_one_runs_it(tmp_path):
    """1. `--resume` while the comparison's driver runs: refused in one line,
    the driver's trials left alone.  2. That driver stopped (SIGINT), two
    `--resume` started together (two terminals, a scheduler's retry beside the
    user's): between a driver's start and its first tags MLflow shows nothing
    of it, so both went on and every unfinished config ran twice.  Now the
    first to check takes this machine's lock on the comparison
    (search/lease.py hold_comparison) and the other refuses in one line; every
    config ends with one finished run.  (One sequence: one driver start less.)"""
    import signal

    grids, budget = write_inputs(tmp_path, _epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"])
    first = Driver(args, cwd=tmp_path)
    try:
        wait_for(lambda: any(r.data.tags.get("awnn.status") == "running" for r in trial_runs(tracking)), 180,
                 "a running trial", first.proc, output=first.output)
        second = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=300)
        assert first.proc.poll() is None, "the first driver ended before the second one asked: nothing was tested"
        assert second.returncode == 2, second.stderr[-3000:]
        line = second.stderr.strip().splitlines()[-1]
        assert line.startswith("awnn sweep: error: --resume: comparison doublemoon-") and " is running: its driver, process " in line, line
        assert f"process {first.proc.pid} on this machine, is still running" in line and "stop it (Ctrl-C) and then resume" in line
        running = [r for r in trial_runs(tracking) if r.info.status == "RUNNING"]
        assert running  # the first driver's trials were left alone (not closed as interrupted by the second)
        first.proc.send_signal(signal.SIGINT)
        assert first.wait(timeout=120) == 130, first.output()[-3000:]
    finally:
        first.cleanup()
    resumes = [Driver(args + ["--resume"], cwd=tmp_path) for _ in range(2)]
    try:
        codes = [d.wait(timeout=600) for d in resumes]
        outs = [d.output() for d in resumes]
    finally:
        for d in resumes:
            d.cleanup()
    assert sorted(codes) == [0, 2], [o[-2000:] for o in outs]
    refused = outs[codes.index(2)].strip().splitlines()[-1]
    assert refused.startswith("awnn sweep: error: --resume: comparison doublemoon-"), refused
    assert ("another driver on this machine, process " in refused and "works on it" in refused) or " is running: its driver" in refused, refused
    finished = [r for r in trial_runs(tracking) if r.info.status == "FINISHED"]
    per_config = Counter((r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in finished)
    assert per_config == {("selection", "sel-0000"): 1, ("selection", "sel-0001"): 1, ("selection", "sel-0002"): 1, ("assessment", "ass-01"): 1}
    assert {r.data.tags["awnn.status"] for r in finished} == {"ok"}


def test_live_driver_on_this_machine_by_its_process_elsewhere_by_its_heartbeat():
    from search.lease import LEASE_S, driver_tags, live_driver
    from tracking.contract import Tag

    here = os.uname().nodename
    now = time.time()
    assert live_driver({}) is None and live_driver({Tag.DRIVER: "garbage"}) is None
    assert live_driver(driver_tags(now)) is None  # this process itself
    # Each child says it is up before it is asked about: Popen returns once the child's exec has dropped
    # the parent's memory, and until the kernel has set the new program's arguments /proc/<pid>/cmdline
    # reads empty (CI once asked in that window, and the awnn-like child read as not awnn).
    up = "import time; print('up', flush=True); time.sleep(60)"
    awnn_like = subprocess.Popen([sys.executable, "-c", up, "search.cli"], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", up], stdout=subprocess.PIPE, text=True)
    try:
        assert awnn_like.stdout.readline() == "up\n" and other.stdout.readline() == "up\n"
        # on this machine the process decides, however old the heartbeat
        assert "process %d on this machine, is still running" % awnn_like.pid in live_driver({Tag.DRIVER: f"{here}|{awnn_like.pid}", Tag.HEARTBEAT: "0"})
        assert live_driver({Tag.DRIVER: f"{here}|{other.pid}", Tag.HEARTBEAT: str(now)}) is None  # a pid reused by another program
    finally:
        for p in (awnn_like, other):
            p.kill()
            p.wait()
            p.stdout.close()
    assert live_driver({Tag.DRIVER: f"{here}|{awnn_like.pid}", Tag.HEARTBEAT: str(now)}) is None  # gone
    # on another machine the heartbeat decides
    fresh = live_driver({Tag.DRIVER: "node-7|4242", Tag.HEARTBEAT: str(now - 20)}, now=now)
    assert fresh is not None and "process 4242 on node-7, wrote its heartbeat 20 s ago" in fresh
    assert live_driver({Tag.DRIVER: "node-7|4242", Tag.HEARTBEAT: str(now - LEASE_S - 1)}, now=now) is None
    assert live_driver({Tag.DRIVER: "node-7|4242"}, now=now) is None  # no heartbeat recorded


def test_the_comparison_lock_is_one_per_store_and_comparison_and_names_its_holder(tmp_path, monkeypatch):
    from search import lease

    monkeypatch.setattr(lease, "_held", {})
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert lease.hold_comparison(uri, "cmp-1") is None and lease.hold_comparison(uri, "cmp-1") is None  # held: again is fine
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from search.lease import hold_comparison; "
             "print(hold_comparison(sys.argv[2], sys.argv[3]))")

    def other(u: str, c: str) -> str:
        return subprocess.run([sys.executable, "-c", probe, str(ROOT), u, c], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip()
    assert other(uri, "cmp-1") == f"another driver on this machine, process {os.getpid()}, works on it"
    assert other("sqlite:///mlflow.db", "cmp-1").endswith("works on it")  # the same store, written relative
    assert other(uri, "cmp-2") == "None" and other(f"sqlite:///{tmp_path / 'other.db'}", "cmp-1") == "None"
    held = [Path(p) for p in lease._held]
    assert len(held) == 1 and held[0].is_file()
    lease.release_comparisons()  # (as at a driver's exit) the file goes with the lock
    assert not held[0].exists() and lease._held == {}
    assert other(uri, "cmp-1") == "None"


def test_a_comparison_lock_file_is_removed_when_its_holder_ends_and_one_removed_under_a_new_holder_is_taken_again(tmp_path, monkeypatch):
    """Lock files do not pile up in <tmp>/awnn-locks: a driver removes its own as it ends (exit handlers, or
    search/tune.exit_now); a killed one leaves it, for the next holder to reuse.  A file removed between a new
    holder's open and its lock (the last holder ending then) is no lock: the new holder takes the file now there."""
    import signal

    from search import lease

    monkeypatch.setattr(lease, "_held", {})
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (a lock folder of this test's own)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    locks = tmp_path / "awnn-locks"
    hold = ("import sys, os, signal; sys.path.insert(0, sys.argv[1]); from search.lease import hold_comparison; "
            "print(hold_comparison(sys.argv[2], 'cmp-1'), flush=True); sys.argv[3] == 'kill' and os.kill(os.getpid(), signal.SIGKILL)")

    def holder(how: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", hold, str(ROOT), uri, how], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    p = holder("exit")
    assert (p.returncode, p.stdout.strip()) == (0, "None") and list(locks.iterdir()) == []  # removed at its exit
    p = holder("kill")
    assert p.returncode == -signal.SIGKILL and len(list(locks.iterdir())) == 1  # a killed holder leaves its file
    assert lease.hold_comparison(uri, "cmp-1") is None  # ... which the next holder reuses
    (path,) = map(Path, lease._held)
    assert path.parent == locks and path.read_text() == str(os.getpid())
    lease.release_comparisons()
    assert list(locks.iterdir()) == []

    # the race: the file is removed after our open, before our lock (its holder ending): the lock must be on the new file
    import fcntl

    real_flock, calls = fcntl.flock, []

    def flock_after_the_holder_ended(fd, op):
        calls.append(fd)
        if len(calls) == 1:
            os.unlink(path)  # the old holder's release, just before our lock
        return real_flock(fd, op)
    monkeypatch.setattr(fcntl, "flock", flock_after_the_holder_ended)
    assert lease.hold_comparison(uri, "cmp-1") is None
    (fd,) = lease._held.values()
    assert len(calls) == 2 and path.is_file() and os.fstat(fd).st_ino == os.stat(path).st_ino  # locked again, on the file there now
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert holder("exit").stdout.strip().endswith("works on it")  # the lock really is on the file others find
    lease.release_comparisons()
