"""The driver-side Ray Tune callback that turns trial reports into MLflow runs.

Tracking contract (README, "What MLflow holds"):

* one child run per trial under its sweep run (`mlflow.parentRunId`), with
  the TrainConfig keys that apply to its model and domain as params
  (TrainConfig.applicable) plus `trial_key`, `phase`, `grid_index`;
* per-epoch metrics (step = epoch; contract.EPOCH_METRICS and the per-layer
  names): train_nll (the data loss), train_prior (AWNN), train_loss,
  train_acc, val_loss, val_acc, width_total, width_<layer>, rate_<layer>,
  train_seconds (training only, measured inside the trial, summed over
  resumed attempts: its last value is the trial's), gpu_mem_mib (GPU);
* final metrics, once, at step = the run's last epoch (contract.FINAL_METRICS,
  never logged per epoch): test_acc (assessment runs), best_val_acc,
  best_val_loss, best_epoch, epochs_run, final_width_total, compute_seconds
  (every attempt's training time, including work lost to a failure),
  cpu_seconds (the CPU time the trial's process spent on that training,
  every attempt: search/trial_common.CpuClock), device_hours (see "Cost"
  below), wall_device_hours (compute_seconds x allocated CPUs, or x the GPU
  fraction on GPU trials), gpu_hours (0 on CPU), attempts, retries;
* tags: awnn.kind=trial, awnn.strategy (fixed | awnn | tpe | asha | random),
  awnn.arm (the strategy, or `<strategy>.r<k>` for its k-th repeat),
  awnn.repeat (k; 0 for fixed and awnn), awnn.phase, awnn.comparison,
  awnn.trial_key, awnn.status (ok | diverged | width_capped | failed |
  stopped (by ASHA, before its last epoch) | interrupted), awnn.node_ip / awnn.node_id (node of the last attempt),
  awnn.nodes (every node it ran on), awnn.pid (worker process of the last
  attempt), awnn.config (the config as the search gave it, JSON; with every
  default filled in: TrainConfig.from_dict of it), awnn.group (fused trials),
  awnn.trainer (the loop that trained it: lean, trainer, reference or fused),
  mlflow.note.content (the run's description: what its metrics are,
  tracking/trial_note.py).

A fused Ray trial (`--fuse`, search/fused_trial.py) trains several configs:
each member gets its own run, as above, tagged awnn.group with the Ray
trial's key; its part of each report (`members`) is logged as a single
trial's report would be, and its run ends when its own final arrives.  Its
train_seconds (hence compute_seconds and wall_device_hours) and its
cpu_seconds are its equal share of the group's wall and CPU time in each
epoch it trained; its device_hours follow the rule below.

Cost.  Wall time x CPUs measures the machine's load as much as the trial:
a trial whose cores were shared with another job runs longer and looks
more expensive (issue #31).  So device_hours is, per attempt:

* on a CPU trial (no GPU share): its CPU seconds, capped at its wall
  seconds x allocated CPUs, / 3600 - what the training itself consumed,
  whatever else ran on the machine;
* on a GPU trial: its wall seconds x the GPU share / 3600 (CPU time does
  not measure the GPU's work); gpu_hours is the same figure;
* an attempt that reported no CPU time (a store written before it was
  measured, or an attempt that died before its first report): wall
  seconds x allocated CPUs.

wall_device_hours keeps the wall-based figure beside it; a CPU trial whose
CPU time is far below it was slowed by other work on its machine or waited
on I/O (tracking/caveats.py warns).
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Callable

from ray.tune import Callback

from .contract import EPOCH_METRICS, FAULT_KINDS, FINAL_SCORES, MODEL_ARTIFACT, MODEL_FILE, TRIAL_PARAMS, TRUNCATION, Metric, MlflowTag, Tag, environment_failure, is_epoch_metric, lost_worker, memory_monitor_kill, storage_fault_text
from .hooks import past_tune
from .store import TrackingWriter
from .trial_note import trial_note

__all__ = ["TrialTracker"]


SKIP_EPOCH_KEYS = {"epoch", "status", "width_capped"}
_ORDER = {name: i for i, name in enumerate(EPOCH_METRICS)}  # a record's metrics are logged in the contract's order
_ATTEMPT_KEYS = ("attempt", "node_id", "node_ip", "hostname", "pid", "resumed_from", "trainer", "cpu")  # a fused group's report: common to its members


class TrialTracker(Callback):
    """Logs each trial as an MLflow run and announces what happened to it.

    One job, as Ray's own MLflow logger callback has: it writes through the
    driver's single writer and keeps only what it needs to write (attempts,
    nodes, retries, the last final summary); nobody reads its state.  Three
    hooks announce to the search side: `on_result(key, result)` after each
    report, `on_finished(key, outcome)` once per trial when it ends, with the
    outcome the protocol needs (search/record.py), and `on_fault(key, outcome)`
    once per trial its environment ended (FAULT_KINDS: a trial's final with
    that `error_kind`, a Ray error that says a write found no room, or the loss
    of its worker process after its last retry: tracking.contract.lost_worker): its
    run stays open, for `interrupt_open` to close as interrupted when the
    driver stops the comparison, and `--resume` runs it again."""

    def __init__(
        self,
        writer: TrackingWriter,
        tags: dict[str, str],
        cpus_per_trial: float,
        gpus_per_trial: float,
        on_result: Callable[[str, dict], None] | None = None,
        on_finished: Callable[[str, dict], None] | None = None,
        params: dict | None = None,
        on_fault: Callable[[str, dict], None] | None = None,
    ):
        """`tags` are set on every trial run (comparison id, task); each trial's
        sweep run is `<strategy>/<phase>` of its spec, and its writer key
        `<strategy>/<phase>/<trial key>`."""
        self.writer = writer
        self.tags = dict(tags)
        self.params = dict(params or {})  # config values the command sets for every trial (e.g. data_root)
        self.cpus = cpus_per_trial
        self.gpus = gpus_per_trial
        self.on_result = on_result
        self.on_finished = on_finished
        self.on_fault = on_fault
        self.faults: dict[str, str] = {}  # trials their environment ended (FAULT_KINDS) -> the error
        self.started: set[str] = set()
        self.ended: set[str] = set()
        self.attempts: dict[str, dict[str, tuple[float, float, float | None]]] = {}  # attempt -> (start, last train_seconds, CPU seconds)
        self.nodes: dict[str, list[tuple[str, str]]] = {}  # (node id, node ip) per attempt, in order
        self.retries: dict[str, int] = {}
        self.last_errors: dict[str, str] = {}
        self.ended_why: dict[str, str] = {}  # Ray trial id -> why the driver ended its worker (--stall-timeout), for its error
        self.resumed: dict[str, str] = {}  # the checkpoint each trial reported it continued from
        self.pids: dict[str, str] = {}
        self.trainers: dict[str, str] = {}
        self.cpu_models: dict[str, list[str]] = {}  # key -> the CPUs (awnn/machine.py) its attempts ran on, in order
        self.finals: dict[str, dict] = {}
        self.last: dict[str, dict] = {}  # each config's latest report
        self.epochs: dict[str, int] = {}  # the last epoch each run logged (its final metrics go there)
        self.timed: set[str] = set()  # runs that logged train_seconds per epoch

    def __getstate__(self):
        # Ray pickles the Tuner (callbacks included) into the experiment folder
        # for Tuner.restore; the live writer and the hooks stay behind.
        state = self.__dict__.copy()
        state["writer"] = None
        state["on_result"] = None
        state["on_finished"] = None
        state["on_fault"] = None
        return state

    # ------------------------------------------------------------ helpers
    @staticmethod
    def sweep_of(spec: dict) -> str:
        return f"{spec['strategy']}/{spec['phase']}"

    @classmethod
    def _key(cls, trial) -> str:
        spec = trial.config["spec"]
        return f"{cls.sweep_of(spec)}/{spec['key']}"

    @classmethod
    def members(cls, trial) -> list[tuple[str, dict]]:
        """(writer key, spec) of each config a Ray trial trains: a fused group's
        members (--fuse, search/fusion.py) but those an earlier driver
        finished, else the trial's own spec."""
        spec = trial.config["spec"]
        if not spec.get("members"):
            return [(cls._key(trial), spec)]
        done = set(spec.get("done") or ())
        return [(f"{cls.sweep_of(m)}/{m['key']}", m) for m in spec["members"] if m["key"] not in done]

    def cost(self, key: str) -> dict[str, float]:
        """A trial's cost metrics from its attempts (the rule: module docstring, "Cost")."""
        per = self.gpus if self.gpus > 0 else self.cpus
        wall = counted = cpu = 0.0
        measured = False
        for start, last, cpu_s in self.attempts.get(key, {}).values():
            seconds = max(0.0, last - start)
            wall += seconds
            if cpu_s is None:
                counted += seconds * per
            else:
                measured = True
                cpu += cpu_s
                counted += min(cpu_s, seconds * per)
        out = {Metric.COMPUTE_SECONDS: wall, Metric.WALL_DEVICE_HOURS: wall * per / 3600.0,
               Metric.DEVICE_HOURS: (wall * per if self.gpus > 0 else counted) / 3600.0, Metric.GPU_HOURS: wall * self.gpus / 3600.0}
        if measured:
            out[Metric.CPU_SECONDS] = cpu
        return out

    # ------------------------------------------------------------ hooks
    def on_trial_start(self, iteration, trials, trial, **info):
        self._start_members(trial)

    def _start_members(self, trial) -> None:
        """Start the run of each config the trial trains (once).  Also called
        when Ray reports a retry, an error or an end of a trial it never
        started (its actor failed while being placed, e.g. its node died):
        every config has a run, and no write goes to a run that does not exist."""
        group = trial.config["spec"]["key"] if trial.config["spec"].get("members") else None
        for key, spec in self.members(trial):
            self._start(key, spec, group)

    def _start(self, key: str, spec: dict, group: str | None) -> None:
        from awnn.config import TrainConfig
        from awnn.data import task_kind

        if key in self.started:
            return
        self.started.add(key)
        config = TrainConfig.from_dict({**spec["config"], **self.params})
        # the keys that apply to this model and domain (an AWNN run shows no fixed width, a tabular one no GIN key);
        # every key with its default: TrainConfig.from_dict(tag awnn.config), and the trial's checkpoint
        params = config.applicable(task_kind(config.task))
        params.update(zip(TRIAL_PARAMS, (spec["key"], spec["phase"], spec["index"])))
        tags = {**self.tags, Tag.KIND: "trial", Tag.STRATEGY: spec.get("family") or spec["strategy"], Tag.ARM: spec["strategy"],
                Tag.REPEAT: str(spec.get("repeat", 0)), Tag.PHASE: spec["phase"], Tag.TRIAL_KEY: spec["key"], Tag.STATUS: "running",
                # the config as the search gave it (params: the keys that apply, defaults filled in): --resume reads it back
                Tag.CONFIG: json.dumps(spec["config"], sort_keys=True), MlflowTag.NOTE: trial_note(params, spec)}
        if params.get("model") == "awnn":
            tags[Tag.PROFILE] = params["awnn_profile"]
        if spec.get("resume_from"):  # the checkpoint it was handed; its first report says which it used
            tags[Tag.RESUMED_FROM] = spec["resume_from"]
        if group:
            tags[Tag.GROUP] = group
        if key in self.retries:  # Ray retried the trial before it first started (on_trial_recover)
            tags[Tag.RETRIES], tags[Tag.LAST_ERROR] = self.retries[key], self.last_errors.get(key, "")
        self.writer.start_run(key, name=f"{spec['strategy']}-{spec['key']}", parent=self.sweep_of(spec), tags=tags, params=params)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if not isinstance(result.get("members"), dict):
            return self._result(self._key(trial), result)
        # a fused group's report: each member's part, with the attempt's common fields, as if from its own trial
        common = {k: v for k, v in result.items() if k in _ATTEMPT_KEYS}
        specs = dict(self.members(trial))
        for member, part in result["members"].items():
            key = f"{self.sweep_of(trial.config['spec'])}/{member}"
            if key not in specs or key in self.ended:  # (a retried group may repeat a member's last epochs)
                continue
            merged = {**common, **part}
            self._result(key, merged)
            final = part.get("final")
            if final:  # a member left the stack: its run ends now
                self._finish(key, final, error=final.get("error"), spec=specs[key], last=merged)

    def _result(self, key: str, result: dict) -> None:
        attempt = result.get("attempt")
        if attempt:
            cpu = result.get("attempt_cpu_seconds")
            cpu = float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and math.isfinite(cpu) else None
            self.attempts.setdefault(key, {})[attempt] = (float(result.get("attempt_start_seconds", 0.0)), float(result.get(Metric.TRAIN_SECONDS, 0.0)), cpu)
            # a node is its id: several nodes can share an IP (e.g. on one host)
            node, node_id = str(result.get("node_ip", "")), str(result.get("node_id", ""))
            nodes = self.nodes.setdefault(key, [])
            if (node or node_id) and (not nodes or nodes[-1] != (node_id, node)):
                nodes.append((node_id, node))
                self.writer.set_tags(key, {Tag.NODE_IP: node, Tag.NODE_ID: node_id, Tag.NODES: ",".join(ip for _, ip in nodes)})
            resumed = result.get("resumed_from")
            if isinstance(resumed, str) and self.resumed.get(key) != resumed:
                # the checkpoint the trial really continued from: the one it was handed, an older one beside it
                # when that file was torn, or none readable (search/trial_common.py load_earlier_state)
                self.resumed[key] = resumed
                self.writer.set_tags(key, {Tag.RESUMED_FROM: resumed or "none: no readable checkpoint, started at epoch 0"})
            trainer = result.get("trainer")
            if isinstance(trainer, str) and self.trainers.get(key) != trainer:  # lean, trainer or reference (search/trial.py)
                self.trainers[key] = trainer
                self.writer.set_tags(key, {Tag.TRAINER: trainer})
            cpu = result.get("cpu")
            cpus = self.cpu_models.setdefault(key, [])
            if isinstance(cpu, str) and cpu and cpu not in cpus:  # (a retry on another node may run on another CPU model)
                cpus.append(cpu)
                self.writer.set_tags(key, {Tag.CPU: "; ".join(cpus)})
            pid = str(result.get("pid", ""))
            if pid and self.pids.get(key) != pid:  # the worker process: shows which actor ran it (and whether actors were reused)
                self.pids[key] = pid
                self.writer.set_tags(key, {Tag.PID: pid})
        rows = []
        for rec in result.get("epochs") or []:
            step = int(rec["epoch"])
            # only the contract's per-epoch series: a record's running best and final-only keys are not series
            names = sorted((n for n in rec if n not in SKIP_EPOCH_KEYS and is_epoch_metric(n)), key=lambda n: _ORDER.get(n, len(_ORDER)))
            rows += [(n, rec[n], step) for n in names if isinstance(rec[n], (int, float)) and not isinstance(rec[n], bool)]
            self.epochs[key] = max(step, self.epochs.get(key, 0))
            if Metric.TRAIN_SECONDS in names:
                self.timed.add(key)
        if rows:
            self.writer.log_metrics(key, rows)
        if result.get("final"):
            self.finals[key] = result["final"]
        self.last[key] = result
        if self.on_result:
            self.on_result(key, result)

    def worker_ended(self, trial_id: str, why: str) -> None:
        """The driver ended the worker of Ray trial `trial_id` (search/stall.py,
        --stall-timeout): the error its retry or its end records starts with `why`."""
        self.ended_why[trial_id] = why

    def _why_ended(self, trial) -> str:
        why = self.ended_why.pop(getattr(trial, "trial_id", None), None)
        return f"{why}: " if why else ""

    def on_trial_recover(self, iteration, trials, trial, **info):
        error = self._why_ended(trial) + _error_text(trial)
        if storage_fault_text(error):  # a write found no room: a retry on the same storage fails again
            return self._storage_error(trial, error)
        if self._import_failed(trial, error):  # its code cannot be imported there: a retry fails again
            return
        for key, _spec in self.members(trial):
            if key in self.ended:
                continue
            self.retries[key] = self.retries.get(key, 0) + 1
            self.last_errors[key] = error
            if key in self.started:  # else its run starts with these tags when the retry starts
                self.writer.set_tags(key, {Tag.RETRIES: self.retries[key], Tag.LAST_ERROR: error})

    @past_tune  # (Tune would swallow its error: tracking/hooks.py)
    def on_trial_complete(self, iteration, trials, trial, **info):
        self._start_members(trial)
        for key, spec in self.members(trial):
            final = self.finals.get(key)
            if final is None:  # stopped by a scheduler before its end (or a group ended without this member's final)
                self._finish(key, {"status": "stopped"}, error=None, spec=spec, last=self.last.get(key, {}), trial=trial)
            else:  # a trial that ended on its own, or on an error it reported (e.g. its data cannot be read)
                self._finish(key, final, error=final.get("error"), spec=spec, last=self.last.get(key, {}), trial=trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        why = self._why_ended(trial)
        error = why + _error_text(trial)
        if storage_fault_text(error):
            return self._storage_error(trial, error)
        if self._import_failed(trial, error):
            return
        exc = _pickled_error(trial)
        if lost_worker(exc):  # its process or node was lost more often than --max-failures allows: not its config's doing
            return self._lost_worker(trial, exc, why)
        killed = memory_monitor_kill(_last_failure_text(trial))
        if killed:  # Ray's memory monitor killed its worker (no pickled error: before, the trial ended `failed`)
            return self._lost_worker(trial, None, why, detail=f"OutOfMemoryError: {killed}")
        self._start_members(trial)
        for key, spec in self.members(trial):
            self._finish(key, {"status": "failed"}, error=error, spec=spec, last=self.last.get(key, {}), trial=trial)

    def _storage_error(self, trial, error: str) -> None:
        """A Ray error of `trial` that says a write found no room or permission
        (one the trial did not report itself: search/trial.py ends on its own
        checkpoints' StorageFault): a fault of each of its configs."""
        self._start_members(trial)
        for key, spec in self.members(trial):
            self._fault(key, {"status": "failed", "error": error, "error_kind": "storage"}, spec)

    def _import_failed(self, trial, error: str) -> bool:
        """Whether `trial`'s process could not import its code (tracking.contract.environment_failure: a module missing on its
        node, a library it could not map under `ulimit -v`): then a fault of each of its configs, at its first failure."""
        exc = _pickled_error(trial)
        found = environment_failure(exc, error)
        if found is None:
            return False
        self._start_members(trial)
        # (a Ray task error's text names its worker's node as "ip=...", a dead actor's as a line "ip: ...")
        node = re.search(r"\bip(?:=|:[ \t]*)([0-9A-Za-z.:\-]+)", str(exc or ""))
        node = node.group(1) if node else None
        for key, spec in self.members(trial):
            self._fault(key, {"status": "failed", "error": f"{found}{f' (on {node})' if node else ''}", "error_kind": "environment"}, spec)
        return True

    def _lost_worker(self, trial, exc: BaseException | None, why: str = "", detail: str | None = None) -> None:
        """`trial`'s worker process was lost once more after its last retry
        (killed, out of memory, its node died): a fault of each of its configs.
        `detail`: what was lost, where no exception says it."""
        self._start_members(trial)
        if detail is None:
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            cause = getattr(exc, "cause", None) or exc  # a RayTaskError carrying the loss: name the loss
            detail = f"{type(cause).__name__}: {lines[0] if lines else 'no detail'}"
        for key, spec in self.members(trial):
            lost = self.retries.get(key, 0) + 1
            error = f"{why}its worker process was lost {lost} time{'s' if lost > 1 else ''} ({detail})"
            self._fault(key, {"status": "failed", "error": error, "error_kind": "lost"}, spec)

    def _fault(self, key: str, final: dict, spec: dict) -> None:
        """A trial its environment ended (FAULT_KINDS): its run stays open with
        the error, and the search side hears of it once (on_fault)."""
        if key in self.ended or key in self.faults:
            return
        error = str(final.get("error") or final["error_kind"])
        self.faults[key] = error
        self.writer.set_tags(key, {Tag.LAST_ERROR: error[:500]})
        if self.on_fault:
            self.on_fault(key, {"key": spec["key"], "error": error, "error_kind": final["error_kind"]})

    def interrupt_open(self) -> None:
        """The driver is stopping (Ctrl-C, SIGTERM, an error): close the runs
        of the trials still in flight as `interrupted` (MLflow KILLED) with
        the compute they did so far; `--resume` runs those trials again."""
        for key in sorted(self.started - self.ended):
            step = self._last_epoch(key, self.last.get(key, {}))
            self.writer.log_metrics(key, [*((name, v, step) for name, v in self.cost(key).items()), (Metric.ATTEMPTS, len(self.attempts.get(key, {})), step)])
            self.writer.set_tags(key, {Tag.STATUS: "interrupted"})
            self.writer.end_run(key, "KILLED")
            self.ended.add(key)  # Tune may still report it as complete while stopping it: it stays interrupted

    # ------------------------------------------------------------ finishing
    def _finish(self, key: str, final: dict, error: str | None, spec: dict, last: dict, trial=None) -> None:
        """End a config's run: `last` is its latest report, `trial` the Ray trial
        when it ended with it (a re-training run's model is in its checkpoint)."""
        if key in self.ended or key in self.faults:
            return
        if final.get("error_kind") in FAULT_KINDS:  # ended by its environment: closed as interrupted when the driver stops
            return self._fault(key, final, spec)
        self.ended.add(key)
        status = final.get("status", "failed")
        metrics = {
            **self.cost(key),
            Metric.ATTEMPTS: len(self.attempts.get(key, {})),
            Metric.RETRIES: self.retries.get(key, 0),
        }
        # the last report stands in for a final summary's best score; train_seconds is a per-epoch series (its last
        # value is the trial's), logged here only for a run that logged no epoch (e.g. failed before its first)
        names = (*FINAL_SCORES, *(() if key in self.timed else (Metric.TRAIN_SECONDS,)))
        for name in names:
            v = final.get(name, last.get(name) if name in (Metric.TRAIN_SECONDS, Metric.BEST_VAL_ACC) else None)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and not math.isinf(v):
                metrics[name] = float(v)
        if "widths" in final:
            metrics[Metric.FINAL_WIDTH_TOTAL] = float(sum(final["widths"]))
        step = int(final.get(Metric.EPOCHS_RUN) or self._last_epoch(key, last))
        self.writer.log_metrics(key, [(k, v, step) for k, v in metrics.items()])
        if final.get("truncation"):  # step = the % of each layer's neurons kept
            self.writer.log_metrics(key, [(name, float(row[name]), int(round(100 * row["fraction"])))
                                          for row in final["truncation"] for name in TRUNCATION
                                          if isinstance(row.get(name), (int, float)) and math.isfinite(row[name])])
        tags = {Tag.STATUS: status, Tag.ATTEMPTS: metrics[Metric.ATTEMPTS]}
        if "widths" in final:
            tags[Tag.WIDTHS] = json.dumps(final["widths"])
            tags[Tag.WIDTHS_AT_BEST] = json.dumps(final.get("widths_at_best", final["widths"]))
        if final.get("hit_max_width"):
            tags[Tag.HIT_MAX_WIDTH] = "true"
        if error:
            tags[Tag.ERROR] = error
        self.writer.set_tags(key, tags)
        if spec.get("phase") == "assessment" and trial is not None and not trial.config["spec"].get("members"):
            self._log_model(key, trial)
        self.writer.end_run(key, "FAILED" if status == "failed" else "FINISHED")
        outcome = dict(key=spec["key"], status=status, error=error, config=spec["config"], index=spec["index"], **metrics)
        if final.get("truncation"):
            outcome["truncation"] = final["truncation"]  # the terminal summary's truncation line
        outcome["widths"] = final.get("widths")
        outcome["widths_at_best"] = final.get("widths_at_best")
        if self.on_finished:
            self.on_finished(key, outcome)


    def _last_epoch(self, key: str, last: dict) -> int:
        """The last epoch a run reached: the step of its final metrics (a stopped trial's last report may
        be a progress report inside the next epoch, which names none)."""
        epoch = last.get("epoch")
        return max(self.epochs.get(key, 0), int(epoch) if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) else 0)

    def _log_model(self, key: str, trial) -> None:
        """A re-training run's kept model (its final checkpoint holds `model.pt`,
        search/trial.py) as the run's artifact `model/`; nothing when there is none."""
        ckpt = getattr(trial, "checkpoint", None)
        if ckpt is None:
            return
        try:
            from pyarrow.fs import LocalFileSystem

            folder = ckpt.path if isinstance(ckpt.filesystem, LocalFileSystem) else ckpt.to_directory()  # remote storage: a local copy
            if os.path.isfile(os.path.join(folder, MODEL_FILE)):
                self.writer.log_artifacts(key, folder, MODEL_ARTIFACT)
        except Exception as e:  # noqa: BLE001 - the run's numbers matter more than its model file
            self.writer.set_tags(key, {Tag.LAST_ERROR: f"model not kept: {type(e).__name__}: {e}"[:500]})


def _pickled_error(trial) -> BaseException | None:
    """The exception Ray Tune kept of `trial`'s latest error: its pickle in the
    trial's local folder (the storage gets a copy later), or None if it kept
    none or it cannot be read back."""
    try:
        path = trial.pickled_error_file
        if path and os.path.isfile(path):
            import cloudpickle

            with open(path, "rb") as f:
                return cloudpickle.load(f)
        return trial.get_pickled_error()
    except Exception:  # noqa: BLE001 - an unreadable error file: the error's text still ends the trial as failed
        return None


def _last_failure_text(trial) -> str:
    """The whole text of `trial`'s latest failure in its error file (Ray Tune
    appends one `Failure # N (occurred at ...)` section per failure), or ''."""
    path = getattr(trial, "error_file", None)
    try:
        text = open(path).read() if path else ""
    except OSError:
        return ""
    import re

    return re.split(r"^Failure # \d+ .*$", text, flags=re.M)[-1]


def _error_text(trial) -> str:
    path = getattr(trial, "error_file", None) or getattr(getattr(trial, "run_metadata", None), "error_filename", None)
    text = ""
    try:
        if path:
            with open(path) as f:
                text = f.read()
    except OSError:
        pass
    if not text:
        text = str(getattr(trial, "error_msg", "") or "")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "unknown error")[:500]
