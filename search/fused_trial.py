"""What runs inside a Ray worker for a fused group of configs (`--fuse N`, search/fusion.py).

`run_group(spec, settings)` trains the group's member configs as one stacked
model (awnn.stacked.StackedTrainer) and reports each member to the driver as
search/trial.py reports a single config, inside one Tune result:

    {..., "members": {<member key>: {"epochs": [...], "best_val_acc": ..., "train_seconds": ...,
                                     "attempt_start_seconds": ..., "final": None | {...}}}}

The tracking callback (tracking/callback.py) logs each member to its own
MLflow run and finishes it when its `final` arrives (a member leaves the
stack when it diverges, runs out of patience or reaches its last epoch).
A member's `train_seconds` is its share of the group's time: each epoch's
wall time divided equally among the members still training in it
(awnn/stacked.py), so the members' seconds add up to the group's.  Its
`attempt_cpu_seconds` (the CPU time behind the driver's device-hours on the
CPU, tracking/callback.py) is shared the same way: each epoch's CPU time
(trial_common.CpuClock, reports and checkpoints left out) divided equally
among the members that trained in it.

Checkpoints: the whole group (StackedTrainer.save) every
`checkpoint_interval` seconds, in the trial's `trainer.pt`; a retried group
continues from it, and so does a group of a resumed comparison
(`resume_from`), whose members an earlier driver finished (`done`) are taken
out of the stack unreported.  A checkpoint written by a group of other
configs (the comparison was resumed with another --fuse) is not used: the
group starts from epoch 0.  A data error ends every member with
`error_kind: data`, and a checkpoint that cannot be written (no space left,
a quota, a read-only disk) every member still in the stack with
`error_kind: storage`, as in search/trial.py.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from .trial_common import CHECKPOINT_FILE, CpuClock, StorageFault, attempt_info, check_data_copy, fault_final, load_earlier_state, report_with_checkpoint, trial_config

__all__ = ["run_group"]


def run_group(spec: dict[str, Any], settings: dict[str, Any]) -> None:
    from ray import tune

    from awnn.data import DataError
    from awnn.stacked import StackedTrainer

    members = spec["members"]
    configs = [trial_config(m, settings) for m in members]
    try:
        trainer = StackedTrainer(configs)
        check_data_copy(trainer.task, settings)
    except DataError as e:  # no retry can fix it: every member ends, and the driver stops the comparison
        final = fault_final(e, "data")
        tune.report({**attempt_info(), "epoch": 0, "epochs": [], "status": "failed", "best_val_acc": math.nan, "final": None,
                     "members": {m["key"]: {"epochs": [], "final": final} for m in members}})
        return
    resumed = _restore(trainer, spec)
    done = set(spec.get("done") or ())
    trainer.drop([i for i, m in enumerate(members) if m["key"] in done])
    reporter = _GroupReporter(trainer, spec, settings, resumed)
    for i, m in enumerate(members):  # restored members that had finished (a retry): their final again (the driver keeps the first)
        if i not in trainer.alive and m["key"] not in done:
            reporter.ended(i, trainer.result(i))
    try:
        trainer.run(reporter.on_epoch, reporter.ended, reporter.after_epoch)
    except StorageFault as e:  # a checkpoint could not be written: every member still training ends with the fault
        reporter.cpu.pause()
        reporter.fault(fault_final(e, "storage"))
        return
    reporter.cpu.pause()
    if reporter.pending or reporter.finals:  # (members restored as finished, with nothing left to train)
        reporter.report()


def _restore(trainer, spec: dict[str, Any]) -> str | None:
    """The group's last Tune checkpoint (a retry), else an earlier driver's
    (`resume_from`): returns what search/trial.py's `_restore` returns."""
    import torch
    from ray import tune

    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            if (Path(d) / CHECKPOINT_FILE).exists():
                _load(trainer, torch.load(Path(d) / CHECKPOINT_FILE, map_location="cpu", weights_only=False))
        return None
    if not spec.get("resume_from"):
        return None
    state, used = load_earlier_state(spec["resume_from"])
    if state is not None and not _load(trainer, state):
        used = None  # another group's checkpoint: epoch 0
    return used or ""


def _load(trainer, state) -> bool:
    try:
        trainer.load(state)
        return True
    except ValueError:  # another group's checkpoint (another --fuse) or a single trial's: start from epoch 0
        return False


class _GroupReporter:
    """The group's reports to the driver: every member's epochs since the
    last report, at most every `report_interval` seconds, and finals."""

    def __init__(self, trainer, spec: dict[str, Any], settings: dict[str, Any], resumed: str | None = None):
        self.trainer = trainer
        self.keys = [m["key"] for m in spec["members"]]
        self.common = {**attempt_info(), "trainer": "fused"}
        if resumed is not None:  # the checkpoint an earlier driver's attempt really continued from ("": none)
            self.common["resumed_from"] = resumed
        self.start = [s.train_seconds for s in trainer.slices]  # each member's seconds before this attempt
        self.interval = float(settings["report_interval"])
        self.ckpt_interval = float(settings["checkpoint_interval"])
        self.pending: dict[int, list[dict]] = {}
        self.finals: dict[int, dict] = {}
        self.last_report = self.last_ckpt = time.monotonic()
        self.cpu_share = [0.0] * len(self.keys)  # each member's share of this attempt's CPU seconds
        self.in_epoch: list[int] = []  # the members that trained in the epoch under way
        self.cpu = CpuClock()  # made just before the group trains (run_group)
        self.cpu_mark = 0.0  # the clock's reading when the epoch under way began

    def on_epoch(self, index: int, record: dict) -> None:
        self.pending.setdefault(index, []).append(record)
        self.in_epoch.append(index)

    def _share_epoch_cpu(self) -> None:
        """The epoch's CPU seconds, shared equally by the members that trained in it (as awnn/stacked.py shares its wall time)."""
        now = self.cpu.seconds
        if self.in_epoch:
            share = (now - self.cpu_mark) / len(self.in_epoch)
            for i in self.in_epoch:
                self.cpu_share[i] += share
        self.cpu_mark = now
        self.in_epoch = []

    def ended(self, index: int, result) -> None:
        final = result.summary()
        final["test_acc"] = None if final["test_acc"] != final["test_acc"] else final["test_acc"]
        self.finals[index] = final

    def after_epoch(self) -> None:
        """Between epochs (the members due to leave have left): report if it is
        time, or if the group is done; a checkpoint taken here continues exactly."""
        self._share_epoch_cpu()
        if not self.trainer.alive or time.monotonic() - self.last_report >= self.interval:
            self.report()

    def report(self) -> None:
        with self.cpu.paused():  # a report's own work (and the driver's round trip) is not training
            self._report()

    def fault(self, final: dict) -> None:
        """End every member still in the stack with `final` (a storage fault),
        with the epochs and finals not yet reported; no checkpoint."""
        for i in self.trainer.alive:
            self.finals.setdefault(i, final)
        self.ckpt_interval = math.inf
        self.report()

    def _report(self) -> None:
        t = self.trainer
        members = {}
        for i in sorted(set(self.pending) | set(self.finals) | set(t.alive)):
            s = t.slices[i]
            best = s.best["val_acc"] if s.best["epoch"] else math.nan
            members[self.keys[i]] = {"epochs": self.pending.get(i, []), "best_val_acc": best, "train_seconds": s.train_seconds,
                                     "attempt_start_seconds": self.start[i], "attempt_cpu_seconds": self.cpu_share[i],
                                     "epoch": s.epoch, "final": self.finals.get(i)}
        scores = [m["best_val_acc"] for m in members.values() if m["best_val_acc"] == m["best_val_acc"]]
        metrics = {**self.common, "epoch": t.epoch, "epochs": [], "final": None, "status": "running" if t.alive else "ended",
                   "best_val_acc": max(scores) if scores else math.nan, "members": members,
                   "train_seconds": sum(s.train_seconds for s in t.slices)}
        state = None
        if t.alive and time.monotonic() - self.last_ckpt >= self.ckpt_interval:
            state = t.save()
            self.last_ckpt = time.monotonic()
        report_with_checkpoint(metrics, state)
        self.pending.clear()
        self.finals.clear()
        self.last_report = time.monotonic()
