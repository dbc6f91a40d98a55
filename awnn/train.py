"""One training run: a TrainConfig in, per-epoch records and a result out.

    result = train(TrainConfig(task="spiralhard", model="awnn"), on_epoch=print)

The loop is Algorithm 1 of the paper: every `width_update_interval` steps
the adaptive blocks update their widths (keeping optimiser state), then the
forward pass, the ELBO (Eq. 13), backward and the optimiser step.  After
each epoch the validation split is scored without touching the widths; the
best epoch is the one with the highest validation accuracy (ties: the lower
validation loss, then the earlier epoch; with `best_epoch_ties=later`, the
`authors` profile's rule, the later epoch; `select_metric=loss` selects the
lowest validation loss instead, as for the text task), and the test
accuracy and loss reported are those measured at that epoch (test is scored
only when a new best epoch appears).

The trainer knows nothing of Ray or MLflow: `on_epoch(record)` receives a
flat dict per epoch; `Trainer.state_dict()` is a checkpoint from which
`train(config, resume=state)` continues where it stopped (epoch counter,
weights with their widths, optimiser state, data order, best-so-far).
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn as nn

from .arith import saturated
from .config import TrainConfig
from .correct import CorrectCounter
from .data import Task, load_task
from .fast_step import FastStep
from .fused import one_like
from .lean_adam import LeanAdam, make_adam
from .train_step import applies, step_grads
from .layers import MaxWidthReached, adaptive_modules, model_widths, named_model_widths
from .loss import RatePrior, elbo_loss
from .priors import ClosedFormPriors
from .models import MODEL_FORMAT, MODEL_TASK_ATTRS, build_model

__all__ = ["train", "Trainer", "RunResult", "CheckpointError", "evaluate", "truncation_curve", "resolve_device"]

# statuses a run can end with
OK, DIVERGED, WIDTH_CAPPED = "ok", "diverged", "width_capped"

EpochCallback = Callable[[dict[str, Any]], Any]
# progress inside an epoch: (epoch, training batches done, batches in the epoch, seconds since the epoch began)
BatchCallback = Callable[[int, int, int, float], Any]


class CheckpointError(ValueError):
    """A checkpoint cannot be used (corrupt, or from another config)."""


@dataclass
class RunResult:
    status: str
    test_acc: float
    best_val_acc: float
    best_val_loss: float
    best_epoch: int
    epochs_run: int
    widths: list[int]
    widths_at_best: list[int]
    train_seconds: float
    hit_max_width: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    test_loss: float = float("nan")  # test cross-entropy at the best epoch (the text task's score)
    n_train: int = 0  # training samples per epoch (for per-sample costs)

    def summary(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "history"}
        d["width_total"] = sum(self.widths)
        return d


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but no CUDA device is available")
    return torch.device(name)


IGNORE_INDEX = -100  # targets with this value (e.g. padding tokens) are not scored
_NO_RATE_PRIOR = RatePrior()  # the ELBO's rate term when the trainer applies the prior's gradient itself


def flatten_outputs(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, ..., C) logits and (B, ...) targets -> (N, C) and (N,), for
    classifiers (B, C) and sequence models (B, T, C) alike."""
    if out.dim() > 2:
        return out.reshape(-1, out.shape[-1]), y.reshape(-1)
    return out, y


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, split: str, part: str, device: torch.device, batch_size: int = 4096) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `model` on one part of a split.
    Never changes widths: `forward` does not, and no width update is called."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    n = 0
    for x, y in task.batches(split, part, batch_size, device):
        out, y = flatten_outputs(model(x), y)
        loss_sum += nn.functional.cross_entropy(out, y, reduction="sum", ignore_index=IGNORE_INDEX)
        mask = y != IGNORE_INDEX
        correct += ((out.argmax(-1) == y) & mask).sum()
        n += int(mask.sum())
    model.train(was_training)
    if n == 0:
        return float("nan"), float("nan")
    return float(loss_sum) / n, float(correct) / n


class Trainer(ClosedFormPriors):
    """One training run (see the module docstring).  `lean` (issue #30): on a
    CPU, Adam runs as awnn.lean_adam.LeanAdam (torch's fused kernel, the same
    state and results to float rounding; AWNN_LEAN_ADAM=0 turns it off), and
    an adaptive MLP's step skips autograd (awnn/train_step.py, where it
    applies; `written_out_step`); `lean=False` is the reference throughout:
    torch.optim.Adam and autograd."""

    written_out_step = True  # (a class switch for tests: False keeps autograd's step with the lean Adam)
    fast_step = True  # (a class switch for tests: False keeps the general written-out step; awnn/fast_step.py)

    def __init__(self, config: TrainConfig, task: Task | None = None, lean: bool = True):
        self.config = config
        self.lean = lean
        self.device = resolve_device(config.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.task = task or load_task(config.task, config.data_root, config.data_seed, config=config)
        self.best_model: dict | None = None  # the selected epoch's weights (re-training runs: split outer)
        if config.max_train_examples:  # a CPU budget's cap on the training part (the same subset for every config)
            self.task = self.task.cap_train(config.max_train_examples, config.data_seed)
        self.model = build_model(config, self.task).to(self.device)
        self.blocks = adaptive_modules(self.model)
        self.n_train = self.task.n_train(config.split)
        # N of the prior terms of the ELBO: the training-set size, or the
        # config's n_obs (the authors fix 2000 on the synthetic tasks)
        self.n_obs = config.n_obs or self.n_train
        self.optimizer = self._make_optimizer()
        # (CPUs only: measured and tested there; a GPU keeps autograd's step, issue #33's measured path)
        self._written_out = lean and self.written_out_step and self.device.type == "cpu" and applies(self.model)
        self.scheduler = self._make_scheduler()
        # the lean Adam's step without torch's wrapper (awnn/lean_adam.py), unless a scheduler counts its calls
        quick = isinstance(self.optimizer, LeanAdam) and self.scheduler is None
        self._opt_step = self.optimizer.quick_step if quick else self.optimizer.step
        # the written-out step hands its gradients to the lean Adam directly (no .grad set; LeanAdam.step_with)
        self._step_with = self.optimizer.step_with if quick and self._written_out else None
        self._grads_set = False
        # the `authors` profile's adaptive MLP: its step in one straight-line function (awnn/fast_step.py)
        self._fast = FastStep.build(self) if self.fast_step else None
        self.generator = torch.Generator().manual_seed(config.seed)
        # progress
        self.epoch = 0
        self.step = 0
        self.train_seconds = 0.0
        self.best = {"val_acc": -1.0, "val_loss": math.inf, "epoch": 0, "test_acc": float("nan"), "widths": model_widths(self.model)}
        self.history: list[dict[str, Any]] = []
        self.status = OK
        self.hit_max_width = False

    # ------------------------------------------------------------ building
    def _make_optimizer(self) -> torch.optim.Optimizer:
        c = self.config
        seen: set[int] = set()

        def take(params):
            out = []
            for p in params:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
            return out

        adaptive = take(p for b in self.blocks for p in b.parameters())
        plain = take(self.model.parameters())  # everything outside the adaptive blocks
        # The weight prior's decay is added to the gradients in train_step (by the
        # model's fused backward, or one fused call after it: awnn/priors.py), not
        # through a param group of its own: every extra group is another pass of
        # the optimiser's multi-tensor kernels at every step.
        self._init_priors()
        # The rate prior's gradient in closed form (`add_rate_prior_grad`): its
        # autograd graph (softplus, stack, pow, sum, ... ~20 tiny nodes) cost
        # ~0.5 ms a step on a 2-core CPU, as much as the rest of the step.
        # `paper-text` keeps the autograd form it was recorded with, so that it
        # reproduces earlier runs bit for bit; the two agree to rounding (tested).
        self._rate_prior_closed_form = c.awnn_profile != "paper-text"
        groups = []
        if plain:
            groups.append({"params": plain, "weight_decay": c.weight_decay})
        if adaptive:
            groups.append({"params": adaptive, "weight_decay": 0.0})
        if c.optimizer == "adam":
            return make_adam(groups, lean=self.lean and self.device.type == "cpu", lr=c.lr, eps=c.adam_eps)
        return torch.optim.SGD(groups, lr=c.lr, momentum=c.momentum, foreach=True)

    def _make_scheduler(self):
        c = self.config
        if c.lr_schedule == "multistep":
            return torch.optim.lr_scheduler.MultiStepLR(self.optimizer, c.milestones(), gamma=c.lr_gamma)
        if c.lr_schedule == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(self.optimizer, mode="min", factor=c.lr_gamma)
        return None

    def rate_prior(self, epoch: int) -> RatePrior:
        """The prior on the rates at `epoch` (1-based), with online compression."""
        c = self.config
        if c.compress_start_epoch and epoch >= c.compress_start_epoch:
            span = max(1, c.compress_end_epoch - c.compress_start_epoch)
            t = min(1.0, (epoch - c.compress_start_epoch) / span)
            return RatePrior(c.compress_rate_mean, c.compress_std_start + t * (c.compress_std_end - c.compress_std_start))
        if c.rate_prior == "gaussian":
            return RatePrior(c.rate_prior_mean, c.rate_prior_std)
        return RatePrior()

    # -------------------------------------------------------------- running
    def update_widths(self) -> bool:
        """Algorithm 1's update_width for every adaptive block; True if one is capped."""
        capped = False
        for b in self.blocks:
            capped |= b.update_width(self.optimizer)
        return capped

    def train_step(self, x, y, prior: RatePrior) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """Forward, ELBO (the priors' terms in closed form, awnn/priors.py: their
        gradients added by the model's fused backward or after the backward; the
        weight prior's value at the epoch's end), backward, optimiser step.
        Returns (detached loss, flat outputs, flat targets, whether the outputs
        were sequences)."""
        closed_form = self._rate_prior_closed_form and prior.informative and self.blocks
        fast = self._fast
        if fast is not None:
            done = fast(x, y, prior, bool(closed_form))
            if done is not None:
                if self._grads_set:  # (no stale .grad is left behind)
                    for p in fast.params:
                        p.grad = None
                    self._grads_set = False
                self.last_nll = done.nll
                self.step += 1
                return done.loss, done.out, y, False
        in_node = self._prior_grads(prior, closed_form)  # the priors' gradients added by the model's own backward
        opt = self.optimizer
        if self._written_out and (closed_form or not prior.informative):
            # the loss is the mean cross-entropy alone: the step with no autograd graph (awnn/train_step.py)
            step = step_grads(self.model, x, y, in_node)
            # every prior gradient there is was added by the node: Adam may take the gradients directly
            if self._step_with is not None and (in_node is not None or not (self._prior_decay or closed_form)):
                loss = self.last_nll = step.nll
                if closed_form:
                    loss = torch.add(loss, one_like(loss), alpha=saturated(self.rate_prior_value(prior, step.rates), loss.dtype))
                if self._step_with(step.params, step.grads):
                    if self._grads_set:  # (no stale .grad is left behind)
                        for p in step.params:
                            p.grad = None
                        self._grads_set = False
                else:
                    self._set_grads_and_step(step)
                self.step += 1
                return loss, step.out, y, False
            for p, g in zip(step.params, step.grads):
                p.grad = g
            self._grads_set = True
            loss, out, padded = step.nll, step.out, False
            self.last_nll = loss
        else:  # the reference: autograd
            out = self.model(x) if in_node is None else self.model(x, prior_grads=in_node)
            padded = out.dim() > 2  # sequence outputs: padding targets are not scored
            out, y = flatten_outputs(out, y)
            loss, parts = elbo_loss(out, y, self.blocks, self.n_obs, None, _NO_RATE_PRIOR if closed_form else prior, ignore_index=IGNORE_INDEX)
            self.last_nll = parts["nll"]  # the data term alone (detached; summed per epoch as train_nll, no host sync)
            opt.zero_grad(set_to_none=True)
            loss.backward()
        if in_node is None:
            self.add_weight_prior_grad()
        loss = loss.detach()
        if closed_form:
            value = self.add_rate_prior_grad(prior) if in_node is None else self.rate_prior_value(prior)
            loss = torch.add(loss, one_like(loss), alpha=saturated(value, loss.dtype))
        self._opt_step()
        self.step += 1
        return loss, out, y, padded

    def _set_grads_and_step(self, step) -> None:
        """The optimiser's own step on the written-out step's gradients, set as `.grad`."""
        for p, g in zip(step.params, step.grads):
            p.grad = g
        self._grads_set = True
        self._opt_step()

    def run(self, on_epoch: EpochCallback | None = None, on_batch: BatchCallback | None = None) -> RunResult:
        """Train to the end; `on_epoch(record)` after each epoch, `on_batch(epoch, done, total, seconds)`
        after each training batch (progress inside long epochs; keep it cheap)."""
        c = self.config
        # batches per epoch: training examples (sentence pairs for text, whose n_train counts tokens) / batch size
        per_epoch = math.ceil(len(self.task.indices(c.split, "train")) / c.batch_size) if on_batch is not None else 0
        model, blocks, device = self.model, self.blocks, self.device
        interval = c.width_update_interval
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MaxWidthReached)  # reported through status and records
            while self.epoch < c.epochs and self.status == OK:
                epoch = self.epoch + 1
                prior = self.rate_prior(epoch)
                t0 = time.perf_counter()
                model.train()
                loss_sum = torch.zeros((), device=device)
                nll_sum = torch.zeros((), device=device)
                counter = CorrectCounter((), device)  # (the training accuracy, counted a chunk of batches at a time)
                seen = 0
                batches = 0
                capped = False
                for x, y in self.task.batches(c.split, "train", c.batch_size, device, self.generator):
                    if blocks and self.step % interval == 0:
                        try:
                            capped |= self.update_widths()
                        except FloatingPointError:
                            self.status = DIVERGED
                            break
                        if capped:
                            self.hit_max_width = True
                            if c.on_max_width == "stop":
                                self.status = WIDTH_CAPPED
                                break
                    loss, out, y, padded = self.train_step(x, y, prior)
                    loss_sum += loss
                    nll_sum += self.last_nll
                    if padded:
                        mask = y != IGNORE_INDEX
                        counter.count += ((out.detach().argmax(-1) == y) & mask).sum()
                        seen += int(mask.sum())
                    else:
                        counter.add(out.detach(), y)
                        seen += len(y)
                    batches += 1
                    if on_batch is not None:
                        on_batch(epoch, batches, per_epoch, time.perf_counter() - t0)
                # mean of the per-batch objective, plus the weight prior's term at the epoch's end
                if batches:
                    train_loss = float(loss_sum) / batches + self.neg_log_weight_prior()
                    train_nll = float(nll_sum) / batches
                    if not math.isfinite(train_loss):
                        self.status = DIVERGED
                else:  # stopped before its first step (width cap, NaN rate): nothing was measured
                    train_loss = train_nll = math.nan
                correct = float(counter.total())  # (its last chunk counted inside the epoch's training time)
                self.train_seconds += time.perf_counter() - t0
                self.epoch = epoch
                record = self._end_epoch(epoch, train_loss, correct / seen if seen else math.nan, capped, train_nll)
                if on_epoch is not None:
                    on_epoch(record)
                if c.patience and epoch - self.best["epoch"] >= c.patience:
                    break
        return self.result()

    def _end_epoch(self, epoch: int, train_loss: float, train_acc: float, capped: bool, train_nll: float = math.nan) -> dict[str, Any]:
        c = self.config
        t0 = time.perf_counter()
        val_loss, val_acc = evaluate(self.model, self.task, c.split, "val", self.device)
        if self.scheduler is not None:
            if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                self.scheduler.step(val_loss if math.isfinite(val_loss) else math.inf)
            else:
                self.scheduler.step()
        widths = model_widths(self.model)
        later = c.best_epoch_ties == "later"  # the authors: an equal score moves the best epoch forward
        if c.select_metric == "loss":  # lowest val loss; ties: the higher val accuracy (or the later epoch)
            better = val_loss < self.best["val_loss"] or (val_loss == self.best["val_loss"] and (later or val_acc > self.best["val_acc"]))
        else:
            better = val_acc > self.best["val_acc"] or (val_acc == self.best["val_acc"] and (later or val_loss < self.best["val_loss"]))
        if better and self.status == OK:
            test_loss = test_acc = float("nan")
            if c.split == "outer":
                test_loss, test_acc = evaluate(self.model, self.task, c.split, "test", self.device)
            self.best = {"val_acc": val_acc, "val_loss": val_loss, "epoch": epoch, "test_acc": test_acc, "test_loss": test_loss, "widths": widths}
            if c.split == "outer":  # a re-training run keeps its selected epoch's model (export_model): the one its test_acc scores
                self.best_model = _to_cpu(self.model.state_dict())
        self.train_seconds += time.perf_counter() - t0
        record: dict[str, Any] = {
            "epoch": epoch,
            "train_loss": train_loss,
            # the ELBO's parts: the data term (cross-entropy, comparable across models) and, for AWNN, the priors' terms / N
            "train_nll": train_nll,
            **({"train_prior": train_loss - train_nll} if self.blocks else {}),
            "train_acc": train_acc,
            "val_loss": val_loss,
            "val_acc": val_acc,
            # NaN before any scored epoch (a run that diverged or hit max_width in its first), never the -1 sentinel
            "best_val_acc": self.best["val_acc"] if self.best["epoch"] else math.nan,
            "width_total": sum(widths),
            **{f"width_{name}": w for name, w in named_model_widths(self.model).items()},
            "train_seconds": self.train_seconds,
            "status": self.status,
            "width_capped": capped,
        }
        if self.device.type == "cuda":  # (#19) peak GPU memory so far: shows a trial ran on the GPU, and how much of it it needs
            record["gpu_mem_mib"] = torch.cuda.max_memory_allocated(self.device) / 2**20
        if self.blocks:
            for i, r in enumerate(r for b in self.blocks for r in b.rates()):
                record[f"rate_l{i}"] = float(r.detach())
        self.history.append(record)
        return record

    def result(self) -> RunResult:
        return RunResult(
            status=self.status,
            test_acc=self.best["test_acc"],
            best_val_acc=max(self.best["val_acc"], 0.0) if self.best["epoch"] else float("nan"),
            best_val_loss=self.best["val_loss"],
            best_epoch=self.best["epoch"],
            epochs_run=self.epoch,
            widths=model_widths(self.model),
            widths_at_best=list(self.best["widths"]),
            train_seconds=self.train_seconds,
            hit_max_width=self.hit_max_width,
            history=self.history,
            test_loss=self.best.get("test_loss", float("nan")),
            n_train=self.n_train,
        )

    # ---------------------------------------------------------- checkpoints
    def export_model(self) -> dict[str, Any]:
        """The trained model as a file's content (`awnn.models.load_model`
        builds it back without data): the config, what the model's builder
        reads of the task, and the weights of the selected epoch (a re-training
        run's best validation epoch, the one its test_acc scores; the last
        epoch's when none was kept)."""
        task = {k: getattr(self.task, k) for k in MODEL_TASK_ATTRS if hasattr(self.task, k)}
        best = self.best_model is not None
        return {
            "format": MODEL_FORMAT,
            "config": self.config.to_dict(),
            "task": task,
            "model": self.best_model if best else _to_cpu(self.model.state_dict()),
            "epoch": self.best["epoch"] if best else self.epoch,
            "widths": self.best.get("widths") if best else model_widths(self.model),
            "val_acc": self.best.get("val_acc"),
            "test_acc": self.best.get("test_acc"),
        }

    def truncation(self) -> list[dict[str, Any]] | None:
        """The post-hoc truncation curve (truncation_curve) of the selected
        epoch's model (a re-training run's, the one its test_acc scores) on
        the outer test part; None for a model that cannot be truncated (only
        the adaptive MLP can) or a run without an outer split."""
        from .layers import AdaptiveMLP

        if self.config.split != "outer" or not isinstance(self.model, AdaptiveMLP):
            return None
        model = copy.deepcopy(self.model)
        if self.best_model is not None:
            model.load_state_dict(self.best_model)  # resizes to the selected epoch's widths
        return truncation_curve(model.to(self.device), self.task, "outer", "test", device=self.device)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this run elsewhere (CPU tensors)."""
        return {
            "best_model": self.best_model,
            "format": "awnn-train-v1",
            "config": self.config.to_dict(),
            "model": _to_cpu(self.model.state_dict()),
            "widths": model_widths(self.model),
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            # (#19) on a GPU, new neurons of a growing layer are drawn by the CUDA
            # generator: without its state a resumed run would draw other weights
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "epoch": self.epoch,
            "step": self.step,
            "train_seconds": self.train_seconds,
            "best": copy.deepcopy(self.best),
            "history": copy.deepcopy(self.history),
            "status": self.status,
            "hit_max_width": self.hit_max_width,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != "awnn-train-v1":
            raise CheckpointError("not an awnn training checkpoint (missing format 'awnn-train-v1')")
        missing = [k for k in _CHECKPOINT_KEYS if k not in state]
        if missing:
            raise CheckpointError(f"checkpoint is incomplete (missing: {', '.join(missing)})")
        saved = {k: v for k, v in state["config"].items() if k not in ("epochs", "device", "threads", "data_root", "patience")}
        mine = {k: v for k, v in self.config.to_dict().items() if k in saved}
        if saved != mine:
            diff = sorted(k for k in saved if saved[k] != mine.get(k))
            raise CheckpointError(f"checkpoint was written by another configuration (differs in: {', '.join(diff)})")
        try:
            self.model.load_state_dict(state["model"])  # resizes adaptive layers to the saved widths
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scheduler is not None and state.get("scheduler"):
                self.scheduler.load_state_dict(state["scheduler"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise CheckpointError(f"checkpoint does not fit the model: {' '.join(str(e).split())}") from e  # one line
        try:
            self.generator.set_state(state["generator"])
            torch.set_rng_state(state["torch_rng"])
            if self.device.type == "cuda" and state.get("cuda_rng") is not None:  # (#19) absent in older or CPU checkpoints
                torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        except (RuntimeError, TypeError) as e:
            raise CheckpointError(f"checkpoint has an unusable random-number-generator state: {' '.join(str(e).split())}") from e
        self.epoch = int(state["epoch"])
        self.step = int(state["step"])
        self.train_seconds = float(state["train_seconds"])
        self.best = dict(state["best"])
        self.best_model = state.get("best_model")  # (absent in checkpoints written before models were kept)
        self.history = list(state["history"])
        self.status = state["status"]
        self.hit_max_width = bool(state["hit_max_width"])


_CHECKPOINT_KEYS = ("config", "model", "optimizer", "generator", "torch_rng", "epoch", "step", "train_seconds", "best", "history", "status", "hit_max_width")


def _to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj


def train(
    config: TrainConfig,
    on_epoch: EpochCallback | None = None,
    resume: dict[str, Any] | None = None,
    task: Task | None = None,
    on_batch: BatchCallback | None = None,
) -> RunResult:
    """Run one training to the end (or until it diverges / hits max_width).

    `on_epoch` receives each epoch's record, `on_batch` the progress inside
    an epoch; `resume` is a `Trainer.state_dict()`."""
    trainer = Trainer(config, task)
    if resume is not None:
        trainer.load_state_dict(resume)
    return trainer.run(on_epoch, on_batch)


TRUNCATION_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


@torch.no_grad()
def truncation_curve(model: nn.Module, task: Task, split: str = "outer", part: str = "test", fractions=None, device=None,
                     timing_repeats: int = 5) -> list[dict[str, float]]:
    """Post-hoc truncation (paper section 5.4, Fig. 6 left): for each
    fraction, the accuracy and loss when keeping only the first fraction of
    each adaptive layer's neurons (at least one), the model's parameter
    count and its measured inference time per sample on `part` (one batch
    of the whole part, best of `timing_repeats` timed forwards after one
    warm-up, in microseconds)."""
    from .layers import AdaptiveMLP

    if not isinstance(model, AdaptiveMLP):
        raise TypeError("truncation_curve needs an AdaptiveMLP")
    fractions = fractions or TRUNCATION_FRACTIONS
    device = device or next(model.parameters()).device
    curve = []
    for frac in fractions:
        small = model.truncate(float(frac)).eval()
        loss, acc = evaluate(small, task, split, part, device)
        curve.append({"fraction": float(frac), "widths": small.widths, "width_total": sum(small.widths), "loss": loss, "acc": acc,
                      "params": int(sum(p.numel() for p in small.parameters())),
                      "infer_us": _inference_us(small, task, split, part, device, timing_repeats)})
    return curve


def _inference_us(model: nn.Module, task: Task, split: str, part: str, device: torch.device, repeats: int) -> float:
    """Microseconds per sample of the forwards over the whole of `part`, in
    evaluation batches (best of `repeats`, after one warm-up pass)."""
    inputs = [x for x, _ in task.batches(split, part, 4096, device)]
    n = sum(len(x) for x in inputs)
    if not n:
        return math.nan
    best = math.inf
    with torch.no_grad():
        for i in range(max(1, repeats) + 1):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            for x in inputs:
                model(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i:  # the first pass warms up
                best = min(best, time.perf_counter() - t0)
    return 1e6 * best / n
