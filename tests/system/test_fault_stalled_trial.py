"""A trial that neither reports nor ends: its worker process stopped (SIGSTOP -
what a read blocked on a dead network mount, a deadlock or a debugger look like
from the driver).

Before, the driver waited without a word: the progress line is only redrawn on
a report.  Now one warning names the trial, how long it has been silent and
its process (search/stall.py); the sweep goes on waiting, and once the process
runs again (SIGCONT) one line says it reported again and the sweep finishes
with every config once.  With `--stall-timeout`, the driver ends the stopped
trial's worker and Ray Tune retries it from its checkpoint: the sweep
finishes without anyone's help."""
from __future__ import annotations

import os
import re
import signal

import pytest

from fault_helpers import Driver, epochs_lasting, running_selection_trial, sweep_args, trial_runs, wait_for, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def epochs() -> int:
    """Trials of ~3 s on this machine (fault_helpers.epochs_lasting; at least 150 epochs): the stop lands while the victim runs."""
    return epochs_lasting(3.0, at_least=150)


def _sweep_with_a_stopped_trial(tmp_path, *flags: str):
    """A sweep (`flags` added) one of whose running selection trials has its process stopped (SIGSTOP):
    (driver, tracking URI, the trial's key, its pid)."""
    grids, budget = write_inputs(tmp_path, epochs())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    driver = Driver(sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2", *flags]), cwd=tmp_path)
    try:
        victim = running_selection_trial(driver, tracking, before_epoch=epochs() // 3)
        key, pid = victim.data.tags["awnn.trial_key"], int(victim.data.tags["awnn.pid"])
        os.kill(pid, signal.SIGSTOP)
    except BaseException:
        driver.cleanup()
        raise
    return driver, tracking, key, pid


def _one_ok_run_per_config(tracking: str) -> dict:
    """Each config's one trial run (trial key -> run); fails unless every config has one, ok."""
    by_key = {}
    for r in trial_runs(tracking):
        by_key.setdefault(r.data.tags["awnn.trial_key"], []).append(r)
    assert all(len(rs) == 1 and rs[0].data.tags["awnn.status"] == "ok" for rs in by_key.values()), \
        {k: [r.data.tags["awnn.status"] for r in rs] for k, rs in by_key.items()}
    return {k: rs[0] for k, rs in by_key.items()}


@pytest.mark.timeout(360)
def test_a_stopped_trial_is_named_once_the_sweep_waits_and_finishes_when_it_runs_again(tmp_path):
    driver, tracking, key, pid = _sweep_with_a_stopped_trial(tmp_path, "--stall-warning", "3")
    try:
        warning = re.compile(rf"^warning: trial awnn/selection/{key} has reported nothing for (\S+) \(.*pid {pid}\b.*\)\n  it may be hung", re.M)
        wait_for(lambda: warning.search(driver.output()), 120, f"the warning about the stopped trial {key}", driver.proc,
                 interval=0.5, output=driver.output)
        assert driver.proc.poll() is None  # the sweep waits for it
        os.kill(pid, signal.SIGCONT)
        pid = None
        rc = driver.wait(timeout=240)
        out = driver.output()
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        driver.cleanup()
    assert rc == 0, out[-4000:]
    assert len(warning.findall(out)) == 1, out[-4000:]  # once per silence
    assert re.search(rf"^trial awnn/selection/{key} reported again after \S+ of silence$", out, re.M), out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    assert _one_ok_run_per_config(tracking)[key].data.metrics["epochs_run"] == epochs()


@pytest.mark.timeout(360)
def test_stall_timeout_ends_a_stopped_trials_process_and_ray_retries_it_from_its_checkpoint(tmp_path):
    """`--stall-timeout`: the stopped trial's worker is ended (through its Ray
    actor; it is stopped, not in an uninterruptible read: it goes), Ray Tune
    retries the trial from its last checkpoint, and the sweep finishes on its
    own with every config once, ok (before: it waited for as long as the
    process stayed stopped)."""
    driver, tracking, key, pid = _sweep_with_a_stopped_trial(tmp_path, "--stall-warning", "2", "--stall-timeout", "5")
    try:
        rc = driver.wait(timeout=240)
        out = driver.output()
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        driver.cleanup()
    assert rc == 0, out[-4000:]
    ended = re.compile(rf"^warning: trial awnn/selection/{key} has reported nothing for \S+, past --stall-timeout 5s:\n"
                       rf"  its process \(pid {pid}\b.*\) was ended; Ray Tune retries it from its last checkpoint", re.M)
    assert len(ended.findall(out)) == 1, out[-4000:]
    assert len(re.findall(rf"^warning: trial awnn/selection/{key} has reported nothing for \S+ \(", out, re.M)) == 1, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the stopped process is gone
    run = _one_ok_run_per_config(tracking)[key]
    assert run.data.metrics["epochs_run"] == epochs() and run.data.metrics.get("retries") == 1, run.data.metrics
    # the run says why it was retried (MLflow UI: its last_error tag)
    assert re.match(r"ended by --stall-timeout 5s after \S+ without a report: ", run.data.tags.get("awnn.last_error", "")), run.data.tags
