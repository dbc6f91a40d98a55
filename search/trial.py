"""What runs inside a Ray worker: one trial of a comparison.

`trainable(config)` is the Ray Tune function trainable: `config` holds the
trial's spec (search/protocol.TrialSpec as a dict) and the run settings.  It
trains the spec's config, from the trial's last Tune checkpoint or from an
earlier driver's checkpoint (`resume_from`), and reports to the driver
(tracking/callback.py logs the reports).  A config awnn/stacked.py can train
(a fixed MLP, Adam, no schedule, a tabular task) trains in the lean loop
(awnn.lean.LeanTrainer, issue #30: the stacked trainer with N = 1, the same
run up to float rounding, the Trainer's checkpoint format); any other in
awnn.train.Trainer with its lean parts (on CPUs the lean Adam; an adaptive
MLP's step without autograd), and every config when the switch is off
(trial_common.lean_trials: AWNN_LEAN_TRIALS=0) in the reference Trainer
(torch.optim.Adam, autograd).  Every report names the trainer (`trainer`:
lean, trainer or reference).  The reports:

* the epochs' records in batches, at most every `report_interval` seconds,
  and at once at a scheduler's rung epochs (`report_at`), with a checkpoint
  every `checkpoint_interval` seconds;
* inside an epoch longer than PROGRESS_SECONDS, where it is (`progress`),
  at most that often: the driver's progress line shows it;
* the final summary (`final`) once the training ends - or, when its
  environment ends it, a failed one with `error_kind: data` (its data cannot
  be read, awnn.data.DataError) or `error_kind: storage` (a checkpoint cannot
  be written: no space left, a quota, a read-only disk; trial_common.
  StorageFault): no retry can fix that, so the trial ends instead of raising,
  the driver closes its run as interrupted and stops the comparison, and
  `--resume` runs it again once the data or the disk is fixed (search/sweep.py).

Every report carries `attempt_cpu_seconds`: the CPU time this attempt's
training has taken so far (trial_common.CpuClock; its reports, checkpoints
and the post-hoc truncation left out), which the driver turns into the
trial's device-hours on the CPU (tracking/callback.py).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tracking.contract import MODEL_FILE, SELECTABLE, TRUNCATION

from .trial_common import (CHECKPOINT_FILE, CpuClock, StorageFault, attempt_info, check_data_copy, fault_final, lean_trials, load_earlier_state, report_with_checkpoint,
                           trial_config, worker_setup)

__all__ = ["trainable", "PROGRESS_SECONDS"]

PROGRESS_SECONDS = 5.0  # a trial reports its progress inside an epoch at most this often (and only in epochs this long)


def trainable(config: dict[str, Any]) -> None:
    """The Ray Tune function trainable (runs in a Ray worker)."""
    from ray import tune

    from awnn.data import DataError
    from awnn.lean import make_trainer

    from .code_identity import check_same_code
    from .shared_storage import check as check_shared_storage

    spec, settings = config["spec"], config["settings"]
    worker_setup(settings)
    check_same_code(settings.get("code_files"))  # the training code loaded so far is the driver's (else: CodeMismatch)
    check_shared_storage(settings.get("storage_marker"))  # and this node sees its --storage (else: StorageNotShared)
    if spec.get("members"):  # a fused group of configs (--fuse): search/fused_trial.py
        from .fused_trial import run_group

        return run_group(spec, settings)
    cfg = trial_config(spec, settings)
    try:
        try:
            trainer = make_trainer(cfg, lean=lean_trials(settings))
        finally:  # and the task's and model's code it loaded (also where it failed: another version may reject a config)
            check_same_code(settings.get("code_files"))
        check_data_copy(trainer.task, settings)
    except DataError as e:  # no retry can fix missing or malformed data: the trial ends, and the driver stops the comparison
        # (Tune requires the searcher's metric in every result)
        tune.report({"epoch": 0, "epochs": [], "status": "failed", "best_val_acc": math.nan, "final": fault_final(e, "data")})
        return
    resumed = _restore(trainer, spec)
    reporter = _Reporter(trainer, spec, settings, resumed)
    try:
        result = trainer.run(reporter.on_epoch, reporter.on_batch)
    except DataError as e:
        reporter.cpu.pause()
        reporter.report(fault_final(e, "data"))
        return
    except StorageFault as e:  # a checkpoint could not be written: the epochs since the last report go with the fault
        reporter.cpu.pause()
        reporter.report(fault_final(e, "storage"))
        return
    reporter.cpu.pause()  # the training is over: what follows (truncation, the final report) is not its cost
    final = result.summary()
    final["test_acc"] = None if final["test_acc"] != final["test_acc"] else final["test_acc"]
    if spec.get("phase") == "assessment" and final.get("status") in SELECTABLE:
        # post-hoc truncation of the kept model (paper 5.4): logged as trunc_* metrics, step = % of neurons kept
        curve = trainer.truncation()
        if curve:
            final["truncation"] = [{"fraction": row["fraction"], **dict(zip(TRUNCATION, (row["acc"], row["width_total"], row["params"], row["infer_us"])))}
                                   for row in curve]  # keyed by the metric names (tracking.contract.TRUNCATION)
    try:
        reporter.report(final)
    except StorageFault as e:  # its kept model could not be written: the run is not complete without it
        reporter.report(fault_final(e, "storage"))


def _restore(trainer, spec: dict[str, Any]) -> str | None:
    """Continue from the trial's last Tune checkpoint (a retry), else from the
    checkpoint an earlier driver's attempt left (`resume_from`, --resume).
    Returns, for the latter, the checkpoint it really continued from ("" for
    none readable: epoch 0), which the driver records (tag awnn.resumed_from);
    None when it was not handed one."""
    import torch
    from ray import tune

    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            if (Path(d) / CHECKPOINT_FILE).exists():  # (a kept model's final checkpoint holds no training state)
                trainer.load_state_dict(torch.load(Path(d) / CHECKPOINT_FILE, map_location="cpu", weights_only=False))
        return None
    if not spec.get("resume_from"):
        return None
    state, used = load_earlier_state(spec["resume_from"])
    if state is not None:
        trainer.load_state_dict(state)
    return used or ""


class _Reporter:
    """The trial's reports to the driver (see the module docstring)."""

    def __init__(self, trainer, spec: dict[str, Any], settings: dict[str, Any], resumed: str | None = None):
        self.trainer = trainer
        self.common = {**attempt_info(), "attempt_start_seconds": trainer.train_seconds, "resumed_epoch": trainer.epoch,
                       "trainer": trainer_name(trainer)}
        if resumed is not None:
            self.common["resumed_from"] = resumed
        self.interval = float(settings["report_interval"])
        self.ckpt_interval = float(settings["checkpoint_interval"])
        self.progress_every = max(self.interval, PROGRESS_SECONDS)
        self.rungs = set(spec.get("report_at") or ())
        self.keep_model = spec.get("phase") == "assessment"
        self.last_epoch = trainer.config.epochs
        self.pending: list[dict] = []
        self.last_report = self.last_ckpt = time.monotonic()
        self.cpu = CpuClock()  # made just before the training starts (trainable)

    def report(self, final: dict | None = None) -> None:
        with self.cpu.paused():  # a report's own work (and the driver's round trip) is not training
            self._report(final)

    def _report(self, final: dict | None) -> None:
        trainer, pending = self.trainer, self.pending
        latest = pending[-1] if pending else (trainer.history[-1] if trainer.history else {})
        metrics = {k: v for k, v in latest.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        metrics.update(self.common)
        metrics["epoch"] = trainer.epoch
        metrics["train_seconds"] = trainer.train_seconds
        metrics["attempt_cpu_seconds"] = self.cpu.seconds
        metrics["epochs"] = list(pending)
        metrics["final"] = final
        metrics["status"] = final["status"] if final else trainer.status
        state, filename, prefix = None, CHECKPOINT_FILE, "awnn-ckpt-"
        if final is None and time.monotonic() - self.last_ckpt >= self.ckpt_interval:
            state = trainer.state_dict()
            self.last_ckpt = time.monotonic()
        elif final is not None and self.keep_model and final.get("status") in SELECTABLE:  # (selectable runs: their test_acc counts)
            # a re-training run's model, kept: its final checkpoint, which the driver logs as the run's MLflow artifact `model/`
            state, filename, prefix = trainer.export_model(), MODEL_FILE, "awnn-model-"
        report_with_checkpoint(metrics, state, filename, prefix)
        pending.clear()
        self.last_report = time.monotonic()

    def on_epoch(self, record: dict) -> None:
        self.pending.append(record)
        if record["epoch"] >= self.last_epoch:
            return  # the final report follows at once: a scheduler that stops trials at max_t must see the final one
        # a scheduler's rung epochs are reported when reached, so ASHA compares
        # every trial at the same epoch however the reports are batched
        if time.monotonic() - self.last_report >= self.interval or record["epoch"] in self.rungs:
            self.report()

    def on_batch(self, epoch: int, done: int, total: int, seconds: float) -> None:
        # inside a long epoch: where the trial is, to the driver's progress line (ASHA sees no epoch in it)
        if seconds < self.progress_every or time.monotonic() - self.last_report < self.progress_every:
            return
        from ray import tune

        latest = self.trainer.history[-1] if self.trainer.history else {}
        with self.cpu.paused():
            tune.report({**self.common, "best_val_acc": latest.get("best_val_acc", math.nan),
                         "train_seconds": self.trainer.train_seconds + seconds, "attempt_cpu_seconds": self.cpu.seconds,
                         "epochs": [], "final": None, "progress": {"epoch": epoch, "batch": done, "batches": total}})
        self.last_report = time.monotonic()


def trainer_name(trainer) -> str:
    """The loop that trains a trial (MLflow tag awnn.trainer): lean (awnn.lean's
    stacked trainer at N = 1), trainer (awnn.train.Trainer with its lean parts:
    the lean Adam on CPUs, an adaptive MLP's written-out step), reference
    (the Trainer with lean=False: AWNN_LEAN_TRIALS=0)."""
    from awnn.lean import LeanTrainer

    if isinstance(trainer, LeanTrainer):
        return "lean"
    return "trainer" if trainer.lean else "reference"
