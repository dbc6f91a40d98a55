"""The local Ray's node ends under a sweep: SIGKILL to its raylet (an
out-of-memory killer picks it as readily as a trial), no --address.

Before, the actors already running went on without their raylet until the
GCS declared the node dead (~20 s after the kill); then they died, Ray Tune
retried their trials and waited for a node that could hold them, which a
local Ray never gets: the driver hung without end and printed nothing more
(reproduced with trials of a minute).  Trials as short as this test's could
finish on those actors first, by luck.  Now the driver's watch (search/tune.py
local_node_gone) sees the raylet gone within seconds and stops as on Ctrl-C:
one line naming the raylet and --resume, every trial run it had open closed
`interrupted`, nothing left RUNNING, and `--resume` (on a new local Ray)
finishes the comparison with every config once."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from fault_helpers import Driver, epochs_lasting, resume_finishes, sweep_args, trial_runs, wait_for, write_inputs
from machine import limit
from servers import _processes_with_marker

pytestmark = [pytest.mark.slow, pytest.mark.fault]


WATCH_SLACK_S = 4.0  # the driver's watch of its node (search/tune.watch_cluster: every 2 s) and its MLflow write of a trial's end


def epochs() -> int:
    """Trials of ~3.5 s on this machine (fault_helpers.epochs_lasting; at least 250 epochs): the raylet dies while both slots' trials run."""
    return epochs_lasting(3.5, at_least=250)


def _raylet(marker: str) -> int | None:
    for pid in _processes_with_marker(marker):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if os.path.basename(args[0]) == b"raylet":
            return pid
    return None


@pytest.mark.timeout(300)
def test_the_local_rays_raylet_killed_mid_sweep_stops_the_driver_and_resume_finishes(tmp_path):
    grids, budget = write_inputs(tmp_path, epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"])
    driver = Driver(args, cwd=tmp_path)
    try:
        wait_for(lambda: [r for r in trial_runs(tracking) if r.data.tags.get("awnn.status") == "running" and r.data.tags.get("awnn.pid")],
                 240, "a running trial", driver.proc, interval=0.2, output=driver.output)
        raylet = _raylet(driver.marker)
        assert raylet, "no raylet among the driver's processes"
        os.kill(raylet, signal.SIGKILL)
        killed, killed_at = time.monotonic(), time.time()
        rc = driver.wait(timeout=120)  # was: no end
        took = time.monotonic() - killed
        out = driver.output()
    finally:
        driver.cleanup()
    if rc == 0:  # finished: only right if its trials were done (or all but done) before the watch could see the kill
        runs = trial_runs(tracking)
        ends = [r.info.end_time / 1000 for r in runs if r.info.status == "FINISHED" and r.data.tags.get("awnn.status") == "ok"]
        assert len(ends) == len(runs) and max(ends) < killed_at + WATCH_SLACK_S, (killed_at, ends, out[-4000:])
        # (CI once ended 0, trials ending 3-9 s after the kill: the raylet's pid was looked up at the watch's first
        # poll, after the kill, so its death was never seen; search/tune.init_ray now finds it as the node starts)
        pytest.skip(f"the sweep's last trial ended {max(ends) - killed_at:+.1f} s from the raylet's kill, before the "
                    "driver's watch could see it: the window this test is for was missed")
    assert rc in (130, 1), out[-4000:]
    assert took < limit(60), took
    assert f"awnn: the local Ray's node ended: its raylet (pid {raylet}) exited" in out and "--resume" in out, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    runs = trial_runs(tracking)
    assert runs and all(r.info.status != "RUNNING" for r in runs), [(r.data.tags["awnn.trial_key"], r.info.status) for r in runs]
    assert {r.data.tags["awnn.status"] for r in runs if r.info.status == "KILLED"} == {"interrupted"}

    resume_finishes(args, tmp_path, tracking, epochs(), timeout=240)
