"""`--resume` of a comparison whose driver still runs (the terminal was
lost, the job looked dead): the second driver refuses in one line (exit 2)
and touches nothing; the first finishes with one finished run per config.
Before: both drivers ran every unfinished trial and both exited 0, so each
config had two finished runs and its cost counted twice.  (search/lease.py;
a driver that died is resumed at once: tests/system/test_fault_driver.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter

import pytest

from conftest import run_awnn
from fault_helpers import Driver, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]

EPOCHS = 500  # ~10 ms an epoch: the sweep (~15 s) outlives the second driver (~3 s to its refusal, before Ray starts)


def test_resume_while_the_driver_runs_is_refused_and_the_driver_finishes_alone(tmp_path):
    grids, budget = write_inputs(tmp_path, EPOCHS)
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
        assert first.wait(timeout=600) == 0, first.output()[-3000:]
    finally:
        first.cleanup()
    runs = trial_runs(tracking)
    per_config = Counter((r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in runs)
    assert per_config == {("selection", "sel-0000"): 1, ("selection", "sel-0001"): 1, ("selection", "sel-0002"): 1, ("assessment", "ass-01"): 1}
    assert {(r.info.status, r.data.tags["awnn.status"]) for r in runs} == {("FINISHED", "ok")}


def test_live_driver_on_this_machine_by_its_process_elsewhere_by_its_heartbeat():
    from search.lease import LEASE_S, driver_tags, live_driver
    from tracking.contract import Tag

    here = os.uname().nodename
    now = time.time()
    assert live_driver({}) is None and live_driver({Tag.DRIVER: "garbage"}) is None
    assert live_driver(driver_tags(now)) is None  # this process itself
    awnn_like = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "search.cli"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # on this machine the process decides, however old the heartbeat
        assert "process %d on this machine, is still running" % awnn_like.pid in live_driver({Tag.DRIVER: f"{here}|{awnn_like.pid}", Tag.HEARTBEAT: "0"})
        assert live_driver({Tag.DRIVER: f"{here}|{other.pid}", Tag.HEARTBEAT: str(now)}) is None  # a pid reused by another program
    finally:
        for p in (awnn_like, other):
            p.kill()
            p.wait()
    assert live_driver({Tag.DRIVER: f"{here}|{awnn_like.pid}", Tag.HEARTBEAT: str(now)}) is None  # gone
    # on another machine the heartbeat decides
    fresh = live_driver({Tag.DRIVER: "node-7|4242", Tag.HEARTBEAT: str(now - 20)}, now=now)
    assert fresh is not None and "process 4242 on node-7, wrote its heartbeat 20 s ago" in fresh
    assert live_driver({Tag.DRIVER: "node-7|4242", Tag.HEARTBEAT: str(now - LEASE_S - 1)}, now=now) is None
    assert live_driver({Tag.DRIVER: "node-7|4242"}, now=now) is None  # no heartbeat recorded
