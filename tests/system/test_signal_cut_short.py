"""An interrupt lands at whatever bytecode the driver runs (search/signals.py); each place below is injected into a
real driver, where the probes and CI found it:

* inside Ray Tune's bookkeeping, which then raises another error as it unwinds (CI: a SIGINT during a lazy import, then
  `KeyError: <PlacementGroup ...>`): that traceback, exit 1, the runs closed as failed.  Now (`interrupted_by`) the
  runs close as interrupted, one line, exit 130;
* inside a finalizer, where Python ignores it: the command ran to its end, exit 0.  Now delivered again;
* inside `ray.init`'s core-worker constructor: a crash in Ray's exit handlers (SIGSEGV, or SIGTERM's abort);
* inside the flush of a finished comparison's last MLflow writes (CI): they were lost, the comparison left RUNNING.
  Now kept until the writes are in (signals.deferred).
"""
from __future__ import annotations

import re
import signal
import sqlite3
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from fault_helpers import Driver, sweep_args, trial_runs, wait_for, write_inputs
from search import signals

pytestmark = [pytest.mark.slow, pytest.mark.fault]

EPOCHS = 1000  # the sweep is still running when the signal comes
LAST = "awnn sweep: interrupted; run the same command with --resume to continue"


def _injected_sweep(tmp_path, script_text: str, env: dict | None = None, once_running=None) -> tuple[int, str, list]:
    """A 1000-epoch AWNN sweep run by `script_text` (`awnn` with a fault injected); `once_running(driver)` is called
    when a trial runs.  Returns its exit code, its output and its trial runs in MLflow."""
    grids, budget = write_inputs(tmp_path, EPOCHS)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = tmp_path / "awnn_injected.py"
    script.write_text(script_text)
    d = Driver(sweep_args(tmp_path, grids, budget, tracking, extra=["--num-cpus", "2"]), cwd=tmp_path,
               command=[sys.executable, str(script)], env=env)
    try:
        if once_running is not None:
            wait_for(lambda: any(r.data.tags.get("awnn.status") == "running" for r in trial_runs(tracking)), 180,
                     "a running trial", d.proc, output=d.output)
            once_running(d)
        code = d.wait(timeout=180)
        out = d.output()
    finally:
        d.cleanup()
    return code, out, trial_runs(tracking)


# `awnn`, whose Ray Tune raises a KeyError of its own as an interrupt unwinds it
CUT_SHORT = '''
import sys
from search.tune import tune_environment

tune_environment()
from ray.tune.impl import tuner_internal

run = tuner_internal.run


def run_cut_short(*args, **kwargs):
    try:
        return run(*args, **kwargs)
    except KeyboardInterrupt:
        raise KeyError("<PlacementGroup object at 0x7f8eb472d390>")


tuner_internal.run = run_cut_short
from search.cli import entry

entry()
'''


def test_an_error_tune_raises_as_the_interrupt_unwinds_it_still_ends_the_command_interrupted(tmp_path):
    # (SIGINT, as in CI; SIGTERM and SIGHUP run the same handler: the fault matrix sends each)
    code, out, runs = _injected_sweep(tmp_path, CUT_SHORT, once_running=lambda d: d.proc.send_signal(signal.SIGINT))
    assert code == 130, out[-3000:]
    assert "Traceback" not in out and "KeyError" not in out, out[-3000:]
    assert out.strip().splitlines()[-1] == LAST, out[-3000:]
    assert runs and not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    statuses = {r.data.tags["awnn.status"] for r in runs}
    assert "interrupted" in statuses and statuses <= {"ok", "interrupted"}, statuses  # none closed as failed


def test_interrupted_by_is_the_interrupt_and_what_it_cut_short_raised():
    def raised_while(first: BaseException, then: BaseException) -> BaseException:
        try:
            try:
                raise first
            except BaseException:
                raise then
        except BaseException as e:
            return e

    assert signals.interrupted_by(KeyboardInterrupt())
    assert signals.interrupted_by(raised_while(KeyboardInterrupt(), KeyError("pg")))
    assert signals.interrupted_by(raised_while(raised_while(KeyboardInterrupt(), ValueError()), KeyError("pg")))  # deeper in the chain
    assert not signals.interrupted_by(KeyError("pg"))  # no interrupt, no stop signal: a failure
    assert not signals.interrupted_by(raised_while(ValueError(), KeyError("pg")))
    assert not signals.interrupted_by(SystemExit(1))


# `awnn`, whose Ray Tune loop drops an object with a finalizer each step; once the file `go` exists, that finalizer
# is where the signal lands: the handler's KeyboardInterrupt is raised inside `__del__`, which Python ignores
IN_A_FINALIZER = '''
import os
import signal
import sys
import time

from search.tune import tune_environment

tune_environment()
from ray.tune.execution import tune_controller

step = tune_controller.TuneController.step
sent = []


class Finalized:
    def __del__(self):
        if not sent and os.path.exists("go"):
            sent.append(True)
            os.kill(os.getpid(), int(os.environ["SIGNAL"]))
            time.sleep(0.5)  # the handler runs here, in the finalizer


def step_with_a_finalizer(self):
    Finalized()
    return step(self)


tune_controller.TuneController.step = step_with_a_finalizer
from search.cli import entry

entry()
'''


def test_a_signal_that_lands_in_a_finalizer_still_interrupts_the_command(tmp_path):
    """Python ignores an exception raised in a finalizer or a weakref's callback (a probe: SQLAlchemy's
    `_collection_gced`): the interrupt was lost, and the command ran to its end and exited 0 after Ctrl-C."""
    code, out, runs = _injected_sweep(tmp_path, IN_A_FINALIZER, env={"SIGNAL": str(int(signal.SIGTERM))},  # (SIGINT: the same handler)
                                      once_running=lambda d: (tmp_path / "go").touch())
    assert code == 130, out[-3000:]
    assert "Exception ignored" not in out and "Traceback" not in out, out[-3000:]
    assert out.strip().splitlines()[-1] == LAST, out[-3000:]
    statuses = {r.data.tags["awnn.status"] for r in runs}
    assert "interrupted" in statuses and statuses <= {"ok", "interrupted"}, statuses


# `awnn`, whose signal lands inside the constructor of Ray's core worker (it runs Python code: the GC thread's)
IN_RAY_INIT = '''
import os
import signal
import time

from ray._private import gc_collect_manager

init = gc_collect_manager.PythonGCThread.__init__


def init_interrupted(self, *args, **kwargs):
    init(self, *args, **kwargs)
    os.kill(os.getpid(), int(os.environ["SIGNAL"]))
    time.sleep(0.5)  # the handler runs here, in CoreWorker.__cinit__


gc_collect_manager.PythonGCThread.__init__ = init_interrupted
from search.cli import entry

entry()
'''


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_ray_init_ends_the_command_without_a_crash(tmp_path, sig):
    """An interrupt inside `ray.init`'s core-worker constructor left a half-made C++ worker whose teardown in Ray's
    exit handlers crashed the process after its last line (SIGSEGV, exit -11; a probe at 3.6-3.9 s after the start)."""
    code, out, _ = _injected_sweep(tmp_path, IN_RAY_INIT, env={"SIGNAL": str(int(sig))})
    assert code == 130, out[-3000:]
    assert out.strip().splitlines()[-1] == LAST, out[-3000:]


# `awnn`, whose signal lands inside logging's release of its module lock (`_releaseLock`: the `finally` of every logging
# call, and the hook Python runs in the parent after each fork) while `ray.init` runs: the handler runs as the call that
# sent it returns, in `_releaseLock`'s frame, before the lock is released
IN_AT_FORK = '''
import logging
import os
import signal

release = logging._releaseLock
source = """
def _releaseLock():
    if _lock:
        if not _awnn_sent and getattr(_awnn_signal.getsignal(_awnn_signal.SIGTERM), "__module__", "").startswith("ray"):
            _awnn_sent.append(1)
            _awnn_os.kill(_awnn_os.getpid(), int(_awnn_os.environ["SIGNAL"]))
        _lock.release()
"""
logging._awnn_sent, logging._awnn_os, logging._awnn_signal = [], os, signal
space = {}
exec(compile(source, logging.__file__, "exec"), space)
release.__code__ = space["_releaseLock"].__code__  # the function object Python's at-fork list holds
from search.cli import entry

entry()
'''


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_logging_lock_release_during_ray_init_ends_the_command(tmp_path, sig):
    """`make test-long` (test_signal_any_moment, a SIGTERM 1.2 s after the start): the signal landed in logging's
    release of its module lock while `ray.init` ran (there, in its after-fork hook, where Python ignores the exception:
    "Exception ignored in: <function _releaseLock>", Ray's `sys.exit(15)`).  Raised before the release, it left the lock
    held: the driver hung, its tracking thread waiting for the lock and its main thread for that thread (killed after
    120 s).  Now our handler delivers the interrupt again outside the release (SIGINT), and the driver releases a lock
    Ray's handler left held (SIGTERM, in place during `ray.init`) before it waits for its threads."""
    code, out, _ = _injected_sweep(tmp_path, IN_AT_FORK, env={"SIGNAL": str(int(sig))})
    assert code == 130, out[-3000:]
    assert "Exception ignored" not in out and "Traceback" not in out, out[-3000:]
    assert out.strip().splitlines()[-1] == LAST, out[-3000:]


# `awnn`, whose signal lands in `threading.Condition.__enter__` just after it acquired its lock (a `queue.Queue`'s,
# a `threading.Event`'s: the MLflow writer's queue, filled by the main thread at each report), once a trial runs
IN_A_CONDITION = '''
import os
import signal
import threading

enter = threading.Condition.__enter__
source = """
def __enter__(self):
    held = self._lock.__enter__()
    if not _awnn_sent and get_ident() == _awnn_main and _awnn_os.path.exists("go"):
        _awnn_sent.append(1)
        _awnn_os.kill(_awnn_os.getpid(), int(_awnn_os.environ["SIGNAL"]))
    return held
"""
threading._awnn_sent, threading._awnn_os, threading._awnn_main = [], os, threading.main_thread().ident
space = {}
exec(compile(source, threading.__file__, "exec"), space)
enter.__code__ = space["__enter__"].__code__
from search.cli import entry

entry()
'''


def test_a_signal_just_after_a_condition_took_its_lock_ends_the_command(tmp_path):
    """`make test-long`'s fault matrix: a driver signalled (SIGINT) between two arms never ended.  An interrupt raised
    just after a Condition's `__enter__` acquired its lock (before the `with` body) or at its `__exit__`'s first bytecode
    leaves the lock held: the main thread's next write to the MLflow writer's queue, as it closed its runs, waited for
    ever on the queue's lock it held itself.  Now the interrupt is delivered again outside such a frame."""
    code, out, runs = _injected_sweep(tmp_path, IN_A_CONDITION, env={"SIGNAL": str(int(signal.SIGINT))},
                                      once_running=lambda d: (tmp_path / "go").touch())
    assert code == 130, out[-3000:]
    assert out.strip().splitlines()[-1] == LAST, out[-3000:]
    assert runs and not [r.info.run_name for r in runs if r.info.status == "RUNNING"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_finished_comparison_flushes_mlflow_leaves_it_finished_not_running(tmp_path, sig):
    """CI (the fault matrix's "fixed assessment" row): a SIGINT that came after the comparison's last trial, while its
    driver flushed its last MLflow writes, stopped the flush: the writes were lost with the writer's thread, and the
    comparison and its last sweep stayed RUNNING (exit 130, "interrupted").  Made certain here: the store is locked
    (another process holds SQLite's write lock) from the first sweep on, so the driver's writes wait in its queue, and
    the signal comes after the last sweep's line.  Now the flush runs to its end (signals.deferred) and the driver says
    it was interrupted after the comparison had finished; --resume only writes the report."""
    db = tmp_path / "mlflow.db"
    tracking = f"sqlite:///{db}"
    args = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed", "--num-cpus", "2",
            "--storage", str(tmp_path / "results"), "--tracking-uri", tracking]
    d = Driver(args, cwd=tmp_path)
    lock = None
    try:
        wait_for(lambda: "fixed selection: 0/" in d.output(), 300, "the first sweep", d.proc, interval=0.02, output=d.output)
        lock = sqlite3.connect(db, timeout=60, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        wait_for(lambda: re.search(r"(?m)^fixed assessment: (\d+)/\1 trials in", d.output()), 300, "the last sweep's end", d.proc,
                 interval=0.02, output=d.output)
        time.sleep(3.0)  # the driver ends its run and waits for its writes (the store is locked)
        assert d.proc.poll() is None, d.output()[-3000:]
        d.proc.send_signal(sig)
        time.sleep(2.0)
        lock.execute("COMMIT")
        code = d.wait(timeout=180)
        out = d.output()
    finally:
        if lock is not None:
            lock.close()
        d.cleanup()
    assert code == 130, out[-3000:]
    assert "\nComparison " not in out, out[-3000:]  # (the signal came inside the run, before the summary)
    assert re.search(r"(?m)^awnn compare: interrupted after comparison \S+ had finished: its results are complete in MLflow", out), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    runs = MlflowClient(tracking).search_runs([e.experiment_id for e in MlflowClient(tracking).search_experiments()])
    assert runs and not [(r.data.tags.get("awnn.key"), r.info.status) for r in runs if r.info.status == "RUNNING"]
    cmp = next(r for r in runs if r.data.tags.get("awnn.kind") == "comparison")
    assert cmp.info.status == "FINISHED" and cmp.data.tags["awnn.state"] == "finished", (cmp.info.status, cmp.data.tags)
    assert {r.data.tags["awnn.state"] for r in runs if r.data.tags.get("awnn.kind") == "sweep"} == {"finished"}
    again = run_awnn(args + ["--resume"], cwd=tmp_path, timeout=300, check=True)
    assert "is complete in MLflow; nothing to run" in again.stderr and "Report:" in again.stdout, again.stderr[-2000:]


# `awnn`, whose MLflow read (the summary's) or report writer raises an error of its own as a SIGTERM's interrupt unwinds it
# (as MLflow's SQL, matplotlib or another library may turn an interrupt inside it into its own error)
AFTER_FINISH = '''
import os
import signal
import sys
import time

from search.tune import tune_environment

tune_environment()
import tracking.report as report

real = getattr(report, sys.argv.pop(1))


def cut_short(*args, **kwargs):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler's interrupt lands here
    except KeyboardInterrupt:
        raise RuntimeError("an error of the library the interrupt landed in")
    return real(*args, **kwargs)


setattr(report, real.__name__, cut_short)
from search.cli import entry

entry()
'''


@pytest.mark.parametrize("where", ["read_comparison", "write_report"])
def test_an_error_an_interrupt_causes_after_the_comparison_finished_is_the_interrupted_ending_not_a_warning(tmp_path, where):
    """A SIGTERM while the finished comparison's summary is read from MLflow, or its report written, raised there as
    another error (`make test-long`, 2026-11-29: the report's `except Exception` printed "warning: could not write
    the cost report" and the command exited 0, its stop lost).  The stop asked for is still the ending: exit 130, the
    one line that says the results are complete in MLflow and how to get the report, no warning."""
    script = tmp_path / "awnn_injected.py"
    script.write_text(AFTER_FINISH)
    args = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed", "--num-cpus", "2",
            "--storage", str(tmp_path / "results"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    d = Driver(args, cwd=tmp_path, command=[sys.executable, str(script), where])
    try:
        code = d.wait(timeout=300)
        out = d.output()
    finally:
        d.cleanup()
    assert code == 130, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert re.match(r"awnn compare: interrupted after comparison \S+ had finished: its results are complete in MLflow; "
                    r"the report was not written: awnn report --comparison ", last), out[-3000:]
    assert "warning: could not write" not in out and "Traceback" not in out and "RuntimeError" not in out, out[-3000:]
    assert not (tmp_path / "results" / "reports").exists() or not any((tmp_path / "results" / "reports").rglob("report.md"))


HUNG = """
import sys, time
sys.path.insert(0, {root!r})
from search import signals

signals.enable()


def waits_here_for_ever():
    print("up", flush=True)
    while True:
        time.sleep(0.05)


waits_here_for_ever()
"""


def test_a_driver_past_its_wait_is_reported_with_every_threads_stack(tmp_path):
    """`kill -USR1 <pid>` prints an `awnn` command's Python stacks and lets it go on; a fault test whose driver outlives
    its wait gets them in its failure (DriverHung), so a hang says where it waits."""
    from fault_helpers import DriverHung
    from conftest import ROOT

    d = Driver([], cwd=tmp_path, command=[sys.executable, "-c", HUNG.format(root=str(ROOT))])
    try:
        wait_for(lambda: "up" in d.output(), 60, "the command to start", d.proc, interval=0.05)
        with pytest.raises(DriverHung) as hung:
            d.wait(0.5)
        assert d.proc.poll() is None  # it goes on
    finally:
        d.cleanup()
    text = str(hung.value)
    assert "Current thread" in text or "Thread 0x" in text, text[-2000:]
    assert "waits_here_for_ever" in text, text[-2000:]
