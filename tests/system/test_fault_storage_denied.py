"""`--storage` that this user may no longer write, for real: while trials
write checkpoints, the storage is made immutable (`chattr +i`, as root: the
kernel refuses every write with EPERM, root included) or read-only for the
user (`chmod a-w`, as anyone else: EACCES).  What a chmod by a colleague, a
remount read-only, or a node whose NFS export maps the user to nobody does.

What must hold, as for a full disk (tests/system/test_fault_storage_full.py):
the driver stops at the first trial that cannot write (no retry on the same
folder can), in one line that names the trial, the error, where, and says to
make it writable and `--resume` (exit 2, no traceback); the trials in flight
are `interrupted`, none is recorded as a failure of its config, nothing stays
RUNNING: what `--resume` runs again (that it then finishes every config once
is the full-disk test's, the same path from the trial's StorageFault on).
(Before: Ray retried the trial on the same folder, then it was `failed`, the
comparison went on, every later trial failed the same way, and it exited 0
with "Verdict: none".)"""
from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from fault_helpers import Driver, checkpoints, epochs_lasting, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def epochs() -> int:
    """Trials of ~3 s on this machine (fault_helpers.epochs_lasting; at least 120 epochs): a trial checkpoints every 0.5 s for seconds after its first checkpoint, so a copy into the storage comes after the denial."""
    return epochs_lasting(3.0, at_least=120)


def deny_writes(folder: Path):
    """Make `folder` and everything under it unwritable for this process; returns the undo."""
    if os.geteuid() == 0:  # root ignores permission bits: the immutable flag stops it
        p = subprocess.run(["chattr", "-R", "+i", str(folder)], capture_output=True, text=True)
        if p.returncode != 0:
            subprocess.run(["chattr", "-R", "-i", str(folder)], capture_output=True)
            pytest.skip(f"chattr +i is not supported here ({p.stderr.strip()[:200]})")
        return lambda: subprocess.run(["chattr", "-R", "-i", str(folder)], check=True, capture_output=True)
    dirs = [folder, *[p for p in folder.rglob("*") if p.is_dir()]]
    for d in dirs:
        d.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)

    def undo():
        for d in dirs:
            d.chmod(0o755)
        for d in folder.rglob("*"):  # (made by Ray before the chmod reached them)
            if d.is_dir():
                d.chmod(0o755)
    return undo


def test_a_storage_that_becomes_unwritable_stops_the_sweep_in_one_line_and_interrupts_its_trials(tmp_path):
    grids, budget = write_inputs(tmp_path, epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = sweep_args(tmp_path, grids, budget, tracking, extra=["--fuse", "1"])
    storage = tmp_path / "results"
    driver = Driver(args, cwd=tmp_path)
    undo = None
    try:
        wait_for(lambda: checkpoints(storage, before_epoch=epochs() // 2), 240, "a trial's first checkpoint", driver.proc,
                 interval=0.1, output=driver.output)
        undo = deny_writes(storage)
        rc = driver.wait(timeout=300)
        out = driver.output()
    finally:
        driver.cleanup()
        if undo is not None:
            undo()
    assert rc == 2, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("awnn sweep: error:")]
    assert len(errors) == 1, out[-4000:]
    line = errors[0]
    assert re.search(r"error: trial \w+/selection/sel-\d+: StorageFault: cannot copy a checkpoint into the storage \(--storage\): "
                     r"(Operation not permitted|Permission denied) \(at " + re.escape(str(storage)), line), line
    assert "make it writable by this user on every node" in line and "make room" not in line and "--resume" in line, line
    assert "Traceback" not in out, out[-4000:]

    runs = trial_runs(tracking)
    assert runs and not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    assert not [r.info.run_name for r in runs if r.data.tags["awnn.status"] == "failed"]  # no config's failure
    hit = [r for r in runs if re.search("Operation not permitted|Permission denied", r.data.tags.get("awnn.last_error", ""))]
    assert hit and all((r.info.status, r.data.tags["awnn.status"]) == ("KILLED", "interrupted") for r in hit)
    assert all(r.data.metrics.get("retries", 0) == 0 for r in hit)  # not retried on the same folder
