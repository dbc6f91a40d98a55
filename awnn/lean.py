"""The lean loop (issue #30): one fixed-width config trained by the stacked
trainer with N = 1, behind the Trainer's interface.

`awnn.train.Trainer` is the reference path and stays so; for a config that
awnn/stacked.py can train (`check_fusable`: a fixed MLP, Adam without a
schedule, a tabular task) the stacked trainer with one slice does the same
run with less per-step overhead: its Adam is a few ops on one flat
parameter buffer where `torch.optim.Adam` walks a list of tensors
(docs/design.md, "Fused trials": 1.9x the configs per core-hour at N = 1).

    trainer = make_trainer(config)         # a LeanTrainer where it applies, else a Trainer
    result = trainer.run(on_epoch, on_batch)

What a LeanTrainer keeps of the Trainer (tests/awnn/test_lean.py checks it):

* The run: the same weights, batch order, Adam, selection, patience and
  divergence rules (awnn/stacked.py); per-epoch records, the RunResult and
  the kept model equal the Trainer's up to float rounding (float64: 1e-9).
* Checkpoints: `state_dict()` writes, and `load_state_dict()` reads, the
  Trainer's own format (`awnn-train-v1`, torch.optim.Adam's state layout),
  so either path continues the other's checkpoint; a lean run continued
  from its own checkpoint is bit-identical to the uninterrupted one.
  One difference: a checkpoint whose run was due to stop (out of patience,
  diverged, at its last epoch) continues with no further epoch, where the
  Trainer would train one more epoch after a patience stop.
* `export_model()` (a re-training run's kept model) and `truncation()`
  (None: a fixed MLP is not truncated), as the Trainer's.

AWNN configs, SGD, lr schedules and non-tabular tasks keep the Trainer; with
`lean`, its Adam is awnn.lean_adam.LeanAdam on a CPU (one fused kernel call
a step instead of torch.optim.Adam's per-tensor loop).
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from .config import TrainConfig
from .data import Task
from .models import MODEL_FORMAT, MODEL_TASK_ATTRS
from .stacked import BETAS, StackedTrainer, check_fusable
from .train import _CHECKPOINT_KEYS, OK, BatchCallback, CheckpointError, EpochCallback, RunResult, Trainer

__all__ = ["LeanTrainer", "lean_applies", "make_trainer", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "awnn-train-v1"  # the Trainer's (awnn/train.py): the two paths continue each other's checkpoints
# keys a checkpoint may change when it is continued (as Trainer.load_state_dict)
_CONTINUE_KEYS = ("epochs", "device", "threads", "data_root", "patience")


def lean_applies(config: TrainConfig) -> bool:
    """Can the lean loop train `config` (awnn.stacked.check_fusable)?"""
    try:
        check_fusable(config)
    except ValueError:
        return False
    return True


def make_trainer(config: TrainConfig, task: Task | None = None, lean: bool = True) -> "LeanTrainer | Trainer":
    """A LeanTrainer for `config` when `lean` and it applies; else a Trainer,
    whose Adam is the lean one (awnn/lean_adam.py) when `lean` (AWNN configs,
    and every config the stacked trainer cannot take).  `lean=False`: the
    reference Trainer with torch.optim.Adam."""
    if lean and lean_applies(config):
        return LeanTrainer(config, task)
    return Trainer(config, task, lean=lean)


class LeanTrainer:
    """One fusable config trained by StackedTrainer (N = 1), with the Trainer's
    attributes and methods that a trial uses (search/trial.py)."""

    hit_max_width = False  # a fixed MLP never changes width

    def __init__(self, config: TrainConfig, task: Task | None = None):
        check_fusable(config)  # a ValueError naming the key, as StackedTrainer's
        self.config = config
        self.stack = StackedTrainer([config], task)
        self.task, self.device, self.n_train = self.stack.task, self.stack.device, self.stack.n_train
        self._left_moments: tuple[list, list] = ([], [])  # Adam's moments when the run ended (the stack drops them)

    # ------------------------------------------------- the Trainer's progress
    @property
    def _slice(self):
        return self.stack.slices[0]

    @property
    def epoch(self) -> int:
        return self._slice.epoch

    @property
    def step(self) -> int:
        return self.stack.optimizer.steps

    @property
    def train_seconds(self) -> float:
        return self._slice.train_seconds

    @property
    def history(self) -> list[dict[str, Any]]:
        return self._slice.history

    @property
    def status(self) -> str:
        return self._slice.status

    @property
    def best(self) -> dict[str, Any]:
        return self._slice.best

    @property
    def best_model(self) -> dict | None:
        return self._slice.best_model

    def weights(self) -> dict[str, torch.Tensor]:
        """The current weights as a FixedMLP state dict (CPU copies)."""
        return self.stack.state_dict(0)

    # -------------------------------------------------------------- running
    def run(self, on_epoch: EpochCallback | None = None, on_batch: BatchCallback | None = None) -> RunResult:
        """Train to the end, as Trainer.run (the same callbacks)."""
        def epoch_done(index: int, record: dict[str, Any]) -> None:
            # (a CUDA record carries gpu_mem_mib: the stacked trainer's, as the Trainer's)
            if self._ends():  # the slice leaves the stack after this epoch, with its Adam state: kept for state_dict
                opt = self.stack.optimizer
                self._left_moments = (self._per_parameter(opt.exp_avg), self._per_parameter(opt.exp_avg_sq))
            if on_epoch is not None:
                on_epoch(record)

        self.stack.run(epoch_done, on_batch=on_batch)
        return self.result()

    def _ends(self) -> bool:
        """Is the run over after its current epoch (StackedTrainer's rule, the Trainer's)?"""
        s, c = self._slice, self.config
        return s.status != OK or s.epoch >= c.epochs or bool(c.patience and s.epoch - s.best["epoch"] >= c.patience)

    def result(self) -> RunResult:
        return self.stack.result(0)

    def export_model(self) -> dict[str, Any]:
        """The trained model as a file's content, as Trainer.export_model."""
        task = {k: getattr(self.task, k) for k in MODEL_TASK_ATTRS if hasattr(self.task, k)}
        best = self.best_model is not None
        return {"format": MODEL_FORMAT, "config": self.config.to_dict(), "task": task,
                "model": self.best_model if best else self.weights(), "epoch": self.best["epoch"] if best else self.epoch,
                "widths": self.best.get("widths") if best else list(self._slice.widths),
                "val_acc": self.best.get("val_acc"), "test_acc": self.best.get("test_acc")}

    def truncation(self) -> None:
        """None: only the adaptive MLP is truncated (Trainer.truncation)."""
        return None

    # ---------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The Trainer's checkpoint of this run (CPU tensors): its weights,
        torch.optim.Adam's state for them, the batch order's generator, progress."""
        s = self.stack.slices[0]
        weights = self.weights()
        return {
            "best_model": s.best_model, "format": CHECKPOINT_FORMAT, "config": self.config.to_dict(), "model": weights,
            "widths": list(s.widths), "optimizer": self._adam_state(weights), "scheduler": None,
            "generator": self.stack.generators[0].get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "epoch": s.epoch, "step": self.step, "train_seconds": s.train_seconds, "best": copy.deepcopy(s.best),
            "history": copy.deepcopy(s.history), "status": s.status, "hit_max_width": False,
        }

    def _adam_state(self, weights: dict[str, torch.Tensor]) -> dict[str, Any]:
        """torch.optim.Adam's state_dict as the Trainer's optimiser would hold it
        (one param group over the model's parameters, in order)."""
        c = self.config
        params = [torch.nn.Parameter(w) for w in weights.values()]
        saved = torch.optim.Adam([{"params": params, "weight_decay": c.weight_decay}], lr=c.lr, betas=BETAS, eps=c.adam_eps,
                                 foreach=True).state_dict()
        steps, opt = self.step, self.stack.optimizer
        if steps:
            step_dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32  # torch's step counter
            alive = 0 in self.stack.alive
            moments = zip(*((self._per_parameter(opt.exp_avg), self._per_parameter(opt.exp_avg_sq)) if alive else self._left_moments))
            saved["state"] = {i: {"step": torch.tensor(float(steps), dtype=step_dtype), "exp_avg": m, "exp_avg_sq": v}
                              for i, (m, v) in enumerate(moments)}
        return saved

    def _per_parameter(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """A stack buffer (weights or Adam's moments, one row) as the FixedMLP's
        parameters in order: weights (out, in), biases (out,); CPU copies."""
        out = []
        for i, view in enumerate(self.stack.model.like(buffer)):
            t = view[0].t() if i % 2 == 0 else view[0, 0]
            out.append(t.detach().cpu().clone(memory_format=torch.contiguous_format))
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a Trainer's checkpoint (either path's): CheckpointError
        when it is not one, or was written by another configuration."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"not an awnn training checkpoint (missing format {CHECKPOINT_FORMAT!r})")
        missing = [k for k in _CHECKPOINT_KEYS if k not in state]
        if missing:
            raise CheckpointError(f"checkpoint is incomplete (missing: {', '.join(missing)})")
        saved = {k: v for k, v in state["config"].items() if k not in _CONTINUE_KEYS}
        mine = {k: v for k, v in self.config.to_dict().items() if k in saved}
        if saved != mine:
            diff = sorted(k for k in saved if saved[k] != mine.get(k))
            raise CheckpointError(f"checkpoint was written by another configuration (differs in: {', '.join(diff)})")
        if 0 not in self.stack.alive:
            raise CheckpointError("a finished run cannot load a checkpoint")
        model, opt = self.stack.model, self.stack.optimizer
        try:
            tensors = [state["model"][k] for k in self.weights()]  # (the FixedMLP's state-dict keys, in order)
            steps, moments = _adam_moments(state["optimizer"], len(tensors))
            with torch.no_grad():
                for buffer, values in [(model.flat, tensors)] + [(b, m) for b, m in zip((opt.exp_avg, opt.exp_avg_sq), moments)]:
                    self._set_per_parameter(buffer, values)
                if not moments:
                    opt.exp_avg.zero_()
                    opt.exp_avg_sq.zero_()
            self.stack.generators[0].set_state(state["generator"])
            torch.set_rng_state(state["torch_rng"])
            if self.device.type == "cuda" and state.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        except (RuntimeError, KeyError, ValueError, TypeError, AttributeError) as e:
            raise CheckpointError(f"checkpoint does not fit the model: {' '.join(str(e).split())}") from e
        opt.steps = steps
        s = self.stack.slices[0]
        s.epoch, s.train_seconds, s.status = int(state["epoch"]), float(state["train_seconds"]), state["status"]
        s.best, s.best_model, s.history = dict(state["best"]), state.get("best_model"), list(state["history"])
        self.stack.epoch = s.epoch
        if self._ends():
            self._left_moments = (self._per_parameter(opt.exp_avg), self._per_parameter(opt.exp_avg_sq))
            self.stack.drop([0])  # the run had ended (or was due to): nothing is left to train

    def _set_per_parameter(self, buffer: torch.Tensor, values: list[torch.Tensor]) -> None:
        views = self.stack.model.like(buffer)
        if len(values) != len(views):
            raise ValueError(f"expected {len(views)} tensors, found {len(values)}")
        for i, (view, t) in enumerate(zip(views, values)):
            target = view[0].t() if i % 2 == 0 else view[0, 0]
            if tuple(t.shape) != tuple(target.shape):
                raise ValueError(f"parameter {i} has shape {tuple(t.shape)}, the model needs {tuple(target.shape)}")
            target.copy_(t)


def _adam_moments(saved: dict[str, Any], count: int) -> tuple[int, list[list[torch.Tensor]]]:
    """(steps, [exp_avgs, exp_avg_sqs]) of a torch.optim.Adam state_dict over
    `count` parameters in one group; (0, []) before its first step."""
    groups = saved["param_groups"]
    if len(groups) != 1 or len(groups[0]["params"]) != count or "betas" not in groups[0]:
        raise ValueError(f"expected Adam's state for one group of {count} parameters")
    state = saved["state"]
    if not state:
        return 0, []
    per = [state[i] for i in groups[0]["params"]]
    steps = {int(p["step"]) for p in per}
    if len(steps) != 1:
        raise ValueError(f"Adam's parameters have taken different numbers of steps: {sorted(steps)}")
    return steps.pop(), [[p["exp_avg"] for p in per], [p["exp_avg_sq"] for p in per]]
