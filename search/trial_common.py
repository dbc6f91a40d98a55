"""What a trial in a Ray worker needs, whether it trains one config
(search/trial.py) or a fused group of configs (search/fused_trial.py)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any


__all__ = ["CHECKPOINT_FILE", "LEAN_SWITCH", "CpuClock", "StorageFault", "check_data_copy", "fault_final", "report_with_checkpoint",
           "trial_config", "attempt_info", "worker_setup", "lean_trials", "load_earlier_state"]

CHECKPOINT_FILE = "trainer.pt"  # a trial's training state in its Tune checkpoint (a fused group's: the whole group)
LEAN_SWITCH = "AWNN_LEAN_TRIALS"  # 0: every unfused trial trains in the reference Trainer (lean_trials)


class CpuClock:
    """The CPU time this process spends training, in seconds: a stopwatch on
    `time.process_time()` (every thread of the process: torch's intra-op
    threads included) that the trial pauses while it reports to the driver.

    Wall time measures the machine's load as much as the training; CPU
    time mostly does not, so the driver bases a CPU trial's device-hours on
    it (tracking/callback.py).  Measured on a 2-core VM (a 1-CPU MLP trial,
    busy loops at its niceness on its core): one neighbour doubled its wall
    time and added 2-11% CPU time; two or three (wall x3-7) added 20-40%
    (each time slice starts on cold caches).  A multi-threaded trial on
    shared cores also counts its OpenMP threads' spin-waiting: a 2-thread
    one beside 3 busy loops took 3.3x its quiet CPU time.  `thread_time()`
    (or RUSAGE_THREAD) would leave torch's worker threads out (half the
    work of a 2-CPU trial); on a 1-CPU trial it reads 1-3% less than this
    (the Ray worker's own threads)."""

    def __init__(self, running: bool = True):
        self.total = 0.0
        self.since: float | None = time.process_time() if running else None

    @property
    def seconds(self) -> float:
        return self.total + (time.process_time() - self.since if self.since is not None else 0.0)

    def pause(self) -> None:
        if self.since is not None:
            self.total += time.process_time() - self.since
            self.since = None

    def resume(self) -> None:
        if self.since is None:
            self.since = time.process_time()

    @contextmanager
    def paused(self):
        """Leave out what the block does (a report, a checkpoint); runs again after it if it ran before."""
        running = self.since is not None
        self.pause()
        try:
            yield self
        finally:
            if running:
                self.resume()


class StorageFault(Exception):
    """A trial could not write its checkpoint (tracking.contract.STORAGE_ERRNOS): the trial ends
    with `error_kind: storage` (fault_final) and the driver stops the
    comparison, resumable once there is room (search/sweep.py)."""


def fault_final(error: Exception, kind: str) -> dict[str, Any]:
    """The final summary of a trial its environment ended, not its config:
    `kind` "data" (its data cannot be read, awnn.data.DataError) or
    "storage" (StorageFault), naming the machine (on a cluster, the node whose
    data copy or disk is at fault).  The driver closes its run as interrupted
    and stops the comparison; `--resume` runs it again (tracking.contract.FAULT_KINDS)."""
    return {"status": "failed", "error": f"{type(error).__name__}: {error} (on {os.uname().nodename})", "error_kind": kind}


def report_with_checkpoint(metrics: dict[str, Any], state: Any = None, filename: str = CHECKPOINT_FILE, prefix: str = "awnn-ckpt-") -> None:
    """`tune.report(metrics)`, with `state` (when not None) saved as `filename`
    in a fresh temporary folder that Tune copies into the trial's storage as
    its checkpoint; the folder is removed after, also on an error.  A write
    that fails for want of room or permission (tracking.contract.STORAGE_ERRNOS), in the
    temporary folder or in the storage, raises StorageFault naming where.
    (torch.save writes through a Python file, so a full disk is an OSError
    with its errno in the chain of torch's "unexpected pos" RuntimeError.)"""
    import torch
    from ray import tune

    if state is None:
        tune.report(metrics)
        return
    from . import scratch
    from .errors import storage_error

    tmp = None
    try:
        try:
            tmp = scratch.make(prefix)
            with open(Path(tmp) / filename, "wb") as f:
                torch.save(state, f)
        except Exception as e:  # (torch may raise its own error with the OSError as its context)
            found = storage_error(e)
            if found is None:
                raise
            raise StorageFault(f"cannot write a checkpoint in this node's temporary folder {tmp or tempfile.gettempdir()}: "
                               f"{os.strerror(found.errno)}") from e
        try:
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))
        except Exception as e:
            found = storage_error(e)
            if found is None:
                raise
            raise StorageFault(f"cannot copy a checkpoint into the storage (--storage): {os.strerror(found.errno)}{_named_path(found)}") from e
    finally:  # Tune copied it (or the trial is being stopped): never leave it in /tmp (killed: search/scratch.py)
        if tmp:
            scratch.remove(tmp)


def _named_path(error: OSError) -> str:
    """' (at PATH)' for the file or folder an OSError names (its filename, or
    the first quoted path of its text: pyarrow's errors carry no filename), or ''."""
    import re

    path = error.filename
    if not path:
        m = re.search(r"'(/[^']+|[a-z][a-z0-9+.-]*://[^']+)'", str(error))
        path = m.group(1) if m else None
    return f" (at {path})" if path else ""


def trial_config(spec: dict[str, Any], settings: dict[str, Any]):
    """A trial's TrainConfig: its spec's config, where the command says the
    data is (--data-root, absolute: search/sweep.py; --label, --drop-columns), on the CPU without a GPU share."""
    from awnn.config import TABLE_KEYS, TrainConfig

    values = dict(spec["config"])
    if settings.get("data_root"):
        values["data_root"] = settings["data_root"]
    for key in TABLE_KEYS:  # task table: which column is the class, which are left out (--label, --drop-columns)
        if settings.get(key):
            values[key] = settings[key]
    if settings["gpus_per_trial"] <= 0:
        values["device"] = "cpu"
    return TrainConfig.from_dict(values, source=f"trial {spec['key']}")


def attempt_info() -> dict[str, Any]:
    """Who runs this attempt (every report carries it): an attempt id, the node, the worker process and its CPU
    (model and torch's kernels: float results differ between CPU models, awnn/machine.py)."""
    import ray

    from awnn.machine import cpu_identity

    return {"attempt": uuid.uuid4().hex[:12], "node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
            "hostname": os.uname().nodename, "pid": os.getpid(), "cpu": cpu_identity()}


def worker_setup(settings: dict[str, Any]) -> bool:
    """The trial process's torch settings: threads = its CPUs, and on the CPU
    denormals flushed unless the command kept them (awnn/arith.py).  Returns
    whether denormals are flushed.  The benchmarks that time steps or epochs
    "as a trial" call it too, so they measure what trials run."""
    import torch

    from awnn.arith import set_denormals

    torch.set_num_threads(max(1, int(settings["cpus_per_trial"])))
    return set_denormals(bool(settings.get("flush_denormal", True)))


def lean_trials(settings: dict[str, Any]) -> bool:
    """Does a fusable config train in the lean loop (awnn/lean.py)?  The trial
    settings' `lean_trials` when they hold one, else the trial process's
    environment: AWNN_LEAN_TRIALS=0 forces the reference Trainer (a local
    Ray's workers inherit the driver's environment); on by default."""
    value = settings.get("lean_trials")
    if value is None:
        return os.environ.get(LEAN_SWITCH, "1") != "0"
    return bool(value)


def load_earlier_state(resume_from: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The training state an earlier driver's attempt left (`resume_from`, a
    checkpoint dir), and the dir it came from.  A driver killed while Ray was
    copying a checkpoint into storage leaves a torn file: an unreadable one is
    skipped (a line on stderr) for the trial's next newest checkpoint beside it,
    and with none readable the trial starts from epoch 0 rather than fail."""
    import torch

    if not resume_from:
        return None, None
    first = Path(resume_from)
    siblings = sorted((d for d in first.parent.glob("checkpoint_*") if d != first), key=lambda d: d.stat().st_mtime, reverse=True)
    for d in [first, *siblings]:
        path = d / CHECKPOINT_FILE
        if not path.exists():
            continue
        try:
            return torch.load(path, map_location="cpu", weights_only=False), str(d)
        except Exception as e:  # a torn or foreign file: the next one
            print(f"awnn: checkpoint {path} is unreadable ({type(e).__name__}: {e}); trying an older one", file=sys.stderr)
    print(f"awnn: no readable checkpoint in {first.parent}; the trial starts from epoch 0", file=sys.stderr)
    return None, None


def check_data_copy(task, settings: dict[str, Any]) -> None:
    """The trial's data is the driver's: a cross-validated comparison's trial draws the folds its driver saved
    (a node whose copy of the data differs would train on other folds), and data on disk has the digest the driver read
    (awnn/data/digest.py: a node with another copy, or the data edited since the comparison started)."""
    from awnn.data import DataError

    expected = settings.get("folds_digest")
    found = getattr(task, "folds_digest", None)
    if expected and found != expected:
        raise DataError(f"{settings.get('data_root')}: the {task.name} data here draws other outer folds than the comparison's "
                        f"(folds digest {found}, expected {expected}): this node's copy of the data differs from the driver's")
    expected = settings.get("data_digest")
    found = getattr(task, "data_digest", None)
    if expected and found != expected:
        raise DataError(f"{settings.get('data_root')}: the {task.name} data here is not the comparison's (SHA-256 {found}, "
                        f"expected {expected}): it changed since the comparison started, or this node has another copy; make this "
                        "node's copy the driver's, or run without --resume to start anew on the new data")
