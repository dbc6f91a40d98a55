"""Helpers of the fault-injection tests (tests/system/test_fault_*.py): a tiny grid
and budget whose trials last a few seconds, a sweep driver started in its own
process group, and MLflow queries."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from conftest import AWNN, ROOT
from machine import limit
from servers import _processes_with_marker, stop_process_group

# three AWNN configs on DoubleMoon; with the budget below a trial runs
# EPOCHS epochs (~60 ms each on one core at batch 128: 29 steps of a
# 232-wide AWNN; batch 32 cost 400 ms), one re-training run
GRID = """\
task: doublemoon
strategy: awnn
epochs: 100
retrain_runs: 1
fixed: {model: awnn, batch_size: 128, hidden_layers: 1, lr: 0.01, quantile_k: 0.9, rate: 0.01, rate_prior: uninformative}
grid:
  activation: [relu, leaky_relu, relu6]
"""


_EPOCH_SECONDS: dict[str, float] = {}


def epoch_seconds(grid: str = GRID) -> float:
    """The seconds one epoch of `grid`'s first config takes as a trial trains it (the trial's trainer, one thread,
    denormals flushed): the faster of two 40-epoch runs in this process, measured once per grid and test process (~1 s).
    A machine busy with the other test worker makes it longer, never shorter."""
    if grid not in _EPOCH_SECONDS:
        import torch
        import yaml

        from awnn.arith import set_denormals
        from awnn.config import TrainConfig
        from awnn.lean import make_trainer

        spec = yaml.safe_load(grid)
        values = {"task": spec["task"], **spec.get("fixed", {}), **{k: v[0] for k, v in spec.get("grid", {}).items()},
                  "epochs": 40, "patience": 0}
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        set_denormals(True)
        try:
            per_epoch = []
            for _ in range(2):
                trainer = make_trainer(TrainConfig.from_dict(values))
                trainer.run()
                per_epoch.append(trainer.train_seconds / max(1, trainer.epoch))
        finally:
            torch.set_num_threads(threads)
            set_denormals(False)
        _EPOCH_SECONDS[grid] = min(per_epoch)
    return _EPOCH_SECONDS[grid]


def epochs_lasting(seconds: float, at_least: int, grid: str = GRID) -> int:
    """Epochs of GRID's configs for a trial of about `seconds` on this machine (at least `at_least`).  A fault test
    that must land its fault while a trial runs sizes the trial in seconds: a size in epochs shrinks each time the
    trainer gets faster (test_fault_worker's 250 epochs were ~15 s a trial at 60 ms an epoch, 3.5 s at 14 ms, and its
    wait for a running trial with a checkpoint in its first half missed the one it needed, 2026-11-28), and on a
    faster machine."""
    import math

    return max(at_least, math.ceil(seconds / epoch_seconds(grid)))


def write_inputs(tmp_path: Path, epochs: int, grid: str = GRID, strategy: str = "awnn") -> tuple[Path, Path]:
    grids = tmp_path / "grids"
    grids.mkdir(exist_ok=True)
    (grids / f"doublemoon-{strategy}.yaml").write_text(grid)
    budget = tmp_path / "budget.yaml"
    budget.write_text(f"epoch_scale: 0\nmin_epochs: {epochs}\nmax_epochs: {epochs}\nretrain_runs: 1\n")
    return grids, budget


def sweep_args(tmp_path: Path, grids: Path, budget: Path, tracking: str, strategy: str = "awnn", extra: list[str] = ()) -> list[str]:
    return ["sweep", "--task", "doublemoon", "--strategy", strategy, "--budget", str(budget), "--grid-dir", str(grids),
            "--storage", str(tmp_path / "results"), "--tracking-uri", tracking, "--checkpoint-interval", "0.5",
            "--report-interval", "0.2", *extra]


class DriverHung(subprocess.TimeoutExpired):
    """A driver still running past a test's wait; its message ends with the driver's output (its threads' stacks)."""

    def __str__(self) -> str:
        return f"{super().__str__()}; its output, with every thread's stack at the timeout:\n{self.output}"


class Driver:
    """`awnn ARGS` in its own session; every process it spawns (local Ray
    included) carries a marker in its environment, so teardown ends exactly
    those."""

    def __init__(self, args: list[str], cwd: Path, env: dict | None = None, command: list[str] | None = None):
        """`command`: what runs in place of `awnn` (a script that starts it with a fault injected), given `args`."""
        self.marker = secrets.token_hex(8)
        e = os.environ.copy()
        e.pop("RAY_ADDRESS", None)
        e.pop("MLFLOW_TRACKING_URI", None)
        e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
        e.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        e["AWNN_TEST_RAY_CLUSTER"] = self.marker
        e.update(env or {})
        self.log = open(cwd / f"driver-{self.marker}.log", "w+")
        self.proc = subprocess.Popen((command or AWNN) + args, cwd=cwd, env=e, stdout=self.log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     preexec_fn=_signals_as_from_a_terminal)

    def output(self) -> str:
        # a separate read handle: seeking the one the driver writes through would move its write offset too
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def kill(self) -> None:
        """SIGKILL the driver (what an OOM killer or a lost login does), then what it left behind."""
        try:
            self.proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self.cleanup()

    def wait(self, timeout: float) -> int:
        """The driver's exit code; past `timeout`, DriverHung (a TimeoutExpired) whose message ends with the driver's
        output, every thread's Python stack included (`awnn` prints them on SIGUSR1: search/signals.py).  `timeout`:
        seconds on the machine the suite's limits were set on, scaled to this one (tests/machine.py)."""
        timeout = limit(timeout)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                self.proc.send_signal(signal.SIGUSR1)
            except ProcessLookupError:
                pass
            time.sleep(2.0)
            raise DriverHung(self.proc.args, timeout, self.output()[-12000:]) from None

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        stop_process_group(self.proc.pid, timeout=5)
        for pid in _processes_with_marker(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


def store_client(tracking: str) -> MlflowClient:
    """A client of the store a driver writes, for a test that reads it while the driver runs.  A new SQLite file's
    schema is made under the lock the drivers take (tracking.checks.init_tracking): a test's poll that opened the file
    while the driver ran MLflow's migrations ran them too, and the driver crashed inside alembic ("Online migration
    expected to match one row ... 0 found", a CI run)."""
    from tracking.checks import init_tracking

    init_tracking(tracking)
    return MlflowClient(tracking)


def trial_runs(tracking: str) -> list:
    c = store_client(tracking)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    if exp is None:
        return []
    return [r for r in c.search_runs([exp.experiment_id], max_results=1000) if r.data.tags.get("awnn.kind") == "trial"]


def a_finished_trial_and_a_running_ones_checkpoint(tracking: str, storage: Path, prefix: str, before_epoch: int) -> bool:
    """The moment the driver-kill tests stop a sweep at: one trial ended ok, and a running trial (whose Ray trial
    folder is `<prefix>-<trial key>`) has a complete checkpoint on disk from before `before_epoch` (what `--resume`
    reads: search/phases.py; Tune's registration of it does not matter there)."""
    runs = trial_runs(tracking)
    done = [r for r in runs if r.data.tags.get("awnn.status") == "ok"]
    running = {f"{prefix}-{r.data.tags['awnn.trial_key']}" for r in runs if r.data.tags.get("awnn.status") == "running"}
    return bool(done) and bool({p.parent.name for p in checkpoints(storage, before_epoch=before_epoch)} & running)


def running_selection_trial(driver: Driver, tracking: str, before_epoch: int, timeout: float = 240):
    """The run of a selection trial of `driver`'s sweep that is running, has reported its process (tag awnn.pid)
    and has logged no epoch from `before_epoch` on.  The fault a test then injects must find the trial still running:
    one caught near its last epoch can finish between the query and the kill (a loaded run saw its victim's
    process already idle, the sweep then finishing every trial ok)."""
    def found():
        c = store_client(tracking)
        for r in trial_runs(tracking):
            if r.data.tags.get("awnn.status") == "running" and r.data.tags.get("awnn.pid") and r.data.tags.get("awnn.phase") == "selection":
                steps = [m.step for m in c.get_metric_history(r.info.run_id, "train_loss")]
                if max(steps, default=0) < before_epoch:
                    return r
        return None
    return wait_for(found, timeout, f"a running selection trial that reported its pid, before epoch {before_epoch}", driver.proc,
                    interval=0.2, output=driver.output)


def _signals_as_from_a_terminal() -> None:
    """In the driver's process before it starts: SIGINT and SIGHUP at their defaults, as for a
    command typed at a terminal.  A test run started in the background by a non-interactive shell
    (`make test &`, some CI runners) inherits SIGINT ignored, which Python keeps (POSIX: Ctrl-C is
    not for background jobs), and `nohup` leaves SIGHUP ignored: a signal test would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, interval: float = 0.5, output=None):
    """`predicate()`'s first true value, polled every `interval` s for `timeout` s on the reference machine, scaled
    to this one (tests/machine.py); an AssertionError past it, or once `proc` exits."""
    timeout = limit(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # noqa: BLE001 - a store being written may refuse a read now and then
            value = None
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            tail = output()[-3000:] if output is not None else ""
            raise AssertionError(f"the driver exited ({proc.returncode}) while waiting for {what}\n{tail}")
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def checkpoints(storage: Path, before_epoch: int | None = None) -> list[Path]:
    """The complete checkpoints in storage.  Ray creates a checkpoint's dir before it
    copies the files in: a dir alone (or a half-copied file) is not yet a checkpoint, and
    a driver killed at that moment leaves nothing to resume from (seen on a slow machine).

    `before_epoch`: only checkpoints taken before that epoch.  A fault test that waits for
    "a running trial with a checkpoint" and then injects its fault must leave that trial
    time to still be running when the fault lands: one caught near its last epoch can
    finish between the check and the kill on a loaded machine (a CI run saw it), and then
    no trial is left to resume or retry from a checkpoint."""
    return [d for _, d in _checkpoint_epochs(storage, before_epoch)]


def _checkpoint_epochs(storage: Path, before_epoch: int | None = None) -> list[tuple[int, Path]]:
    """(epoch, dir) of `checkpoints`."""
    import torch

    done = []
    for d in sorted(storage.glob("*/*/checkpoint_*")):
        try:
            state = torch.load(d / "trainer.pt", map_location="cpu", weights_only=False)
        except Exception:
            continue
        epoch = int(state.get("epoch", -1))
        if before_epoch is not None and not -1 < epoch < before_epoch:
            continue
        done.append((epoch, d))
    return done


def registered_checkpoint(storage: Path, trial_dir: str, tracking: str, run_id: str, before_epoch: int | None = None) -> Path | None:
    """A checkpoint of the trial in `storage`'s `trial_dir` that Ray Tune has registered (the one a retry continues
    from), taken before `before_epoch`: a complete one in storage and, in the trial's MLflow run `run_id`, an epoch
    logged after it.  The files alone are not enough: the worker writes them before it sends the report that
    registers them, and a fault landing in between leaves Tune the checkpoint before (or none), so the retry trains
    those epochs again (loaded CI runs killed a worker there, the fused group's and a worker node's).  The driver handles a trial's reports
    in order and logs their epochs after, so a later epoch in MLflow says the report with the checkpoint was handled."""
    epochs = [(e, d) for e, d in _checkpoint_epochs(storage, before_epoch) if d.parent.name == trial_dir]
    logged = [m.step for m in MlflowClient(tracking).get_metric_history(run_id, "train_loss")]
    done = [(e, d) for e, d in epochs if logged and max(logged) > e]
    return max(done)[1] if done else None


def resume_finishes(args: list[str], cwd: Path, tracking: str, epochs: int, timeout: float = 300,
                    keys: tuple[str, ...] = ("ass-01", "sel-0000", "sel-0001", "sel-0002")) -> str:
    """Run `awnn ARGS --resume` (GRID's sweep) to its end and check it finished
    every config once, ok, with all its epochs.  Returns its output."""
    again = Driver(args + ["--resume"], cwd=cwd)
    try:
        rc = again.wait(timeout=timeout)
        out = again.output()
    finally:
        again.cleanup()
    assert rc == 0, out[-4000:]
    finished = [r for r in trial_runs(tracking) if r.info.status == "FINISHED"]
    assert sorted(r.data.tags["awnn.trial_key"] for r in finished) == sorted(keys), out[-4000:]
    assert all(r.data.tags["awnn.status"] == "ok" and r.data.metrics["epochs_run"] == epochs for r in finished)
    return out
