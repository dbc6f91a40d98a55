"""Fused trials (issue #20): N same-shape fixed-width MLPs trained as one stacked model.

One tiny MLP per process leaves a core paying PyTorch's per-operation
overhead.  After the idea of HFTA (Wang et al., "Horizontally Fused Training
Array", MLSys 2021; our own code), configs sharing a shape train together:
slice i of every stacked weight is config i's layer, a layer is one
`torch.baddbmm` for all slices, one Adam step updates them all.  Slices may
differ in activation (one elementwise op per activation in the group), and
small widths (up to PAD_WIDTH) share a stack padded to its widest slice
(StackedMLP: the extra units stay exactly zero).

    results = train_grouped(configs, max_group=32)  # a RunResult per config, in order

What a slice keeps of `awnn.train.Trainer` (tests/awnn/test_stacked.py checks it):

* Weights: built as the Trainer builds them (`torch.manual_seed(seed)`, then
  `build_model`), stacked bit for bit.  Batch order: the slice's own
  `torch.Generator(seed)` draws a `randperm` per epoch, as the Trainer's.
* Adam: `StackedAdam` (awnn/stacked_adam.py) updates one flat (N, P)
  buffer, a slice per row, with per-slice lr, weight decay and eps (default
  betas, coupled L2 weight decay, no schedule): on CPUs by torch's fused
  Adam kernel, elsewhere (the reference) with the float32 roundings of
  torch's foreach Adam.
  The step's gradient is written out (awnn/stacked_grad.py; autograd, the
  reference, with `StackedTrainer.manual_gradients = False`): it rounds a
  few operations of the cross-entropy's gradient in another order, so
  float32 runs agree with the Trainer's to rounding, not bit for bit (with
  autograd, final weights had come out bit-identical in our runs; bmm need
  not round as mm does on every build); float64 runs agree to 1e-9.
* Selection, patience, divergence: per slice, by the Trainer's rules.  A
  slice that stops (diverged: a non-finite epoch loss; out of patience;
  done) leaves the stack at the epoch's end (its rows of the weights and of
  Adam's state are dropped) and costs nothing more; one slice's NaNs never
  reach another's rows.
* Cost: a slice's `train_seconds` sums, over the epochs it took part in, the
  group's wall time for the epoch (steps, validation, test scoring,
  bookkeeping) divided equally among the slices alive in that epoch; the
  slices' seconds add up to the group's.
* Continuing: `save()` / `load()` hold the whole group (a fused Ray trial's
  checkpoint, search/fused_trial.py); `drop(indices)` takes configs out
  without training them further.

Only model=fixed with Adam and no lr schedule on a tabular task is fused
(what the tabular fixed grids use); anything else is a ValueError naming
the key.  AWNN slices are not supported.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from .activations import resolve_activation
from .config import TrainConfig
from .correct import CorrectCounter
from .data import Task, load_task
from .fixed import FixedMLP
from .fusable import GROUP_KEYS, PAD_WIDTH, PADDED, SLICE_KEYS, check_fusable, group_key, padded  # noqa: F401 (re-exported)
from .models import build_model
from .products import stacked_affine
from .stacked_adam import BETAS, StackedAdam, sqrt_floor  # noqa: F401 (re-exported)
from .stacked_grad import forward_backward, supported
from .train import DIVERGED, OK, BatchCallback, RunResult, resolve_device

__all__ = ["GROUP_KEYS", "SLICE_KEYS", "check_fusable", "group_key", "group_configs", "StackedMLP", "StackedAdam",
           "StackedTrainer", "train_stacked", "train_grouped"]

EVAL_BATCH = 4096  # awnn.train.evaluate's chunk
_LAYOUT_WARNING = "grad and param do not obey the gradient layout contract"  # grads are rows of one flat buffer, on purpose

# in place (values and backward as awnn.layers.ACTIVATIONS'; baddbmm saves no output): one (N, B, width) tensor fewer
_IN_PLACE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu_, "leaky_relu": lambda h: F.leaky_relu(h, inplace=True), "relu6": lambda h: F.relu6(h, inplace=True), "tanh": torch.tanh_}

EpochCallback = Callable[[int, dict[str, Any]], Any]  # (index of the config in the group, its epoch record)
EndCallback = Callable[[int, RunResult], Any]  # (index of the config in the group, its result) when it leaves the stack
STACK_FORMAT = "awnn-stacked-v1"
_SLICE_STATE = ("best", "history", "status", "epoch", "train_seconds", "best_model", "final_model")


def group_configs(configs: Sequence[TrainConfig], max_group: int = 32) -> list[list[int]]:
    """Indices into `configs`, split into fusable groups of at most `max_group`
    (equal group_key; in order of first appearance, inside a group by activation and width, then in order)."""
    if isinstance(max_group, bool) or not isinstance(max_group, int) or max_group < 1:
        raise ValueError(f"max_group: expected an integer >= 1, found {max_group!r}")
    buckets: dict[tuple, list[int]] = {}
    for i, c in enumerate(configs):
        buckets.setdefault(group_key(c), []).append(i)
    ordered = [sorted(idx, key=lambda i: (configs[i].activation, configs[i].width)) for idx in buckets.values()]  # one run per activation
    return [idx[s : s + max_group] for idx in ordered for s in range(0, len(idx), max_group)]


class StackedMLP:
    """N FixedMLPs of one depth, input and output; slice i is `models[i]`.  Slice
    i's parameters are row i of one flat (N, P) buffer (`flat`; gradients:
    `grad`): layer l's weight an (N, in, out) view (nn.Linear's transposed), its
    bias an (N, 1, out) view.

    Hidden widths may differ: the stack is as wide as its widest slice, and a
    narrower slice's weights fill the top-left block of each layer, the rest
    zero.  Its extra units stay exactly zero: their input weights and bias are
    zero, so their pre-activation is 0 and act(0) = 0 for every activation
    here; their output weights are zero, so they add nothing downstream; and
    every gradient reaching them is a product with one of those zeros, so
    Adam (zero moments, zero update) and weight decay (of a zero) leave them
    at zero.  Sums over the extra units add exact zeros, which changes no
    value, though the kernels may order the real terms' additions otherwise
    (tests/awnn/test_stacked.py: within float32 rounding of the Trainer)."""

    def __init__(self, models: Sequence[FixedMLP], device: torch.device | str = "cpu"):
        if not models:
            raise ValueError("models: expected at least one FixedMLP, found none")
        shapes = []
        for m in models:
            if not isinstance(m, FixedMLP):
                raise ValueError(f"models: every slice must be a FixedMLP, found {type(m).__name__}")
            shapes.append([(l.in_features, l.out_features) for l in m.layers])
        if len({len(d) for d in shapes}) != 1 or len({(d[0][0], d[-1][1]) for d in shapes}) != 1:
            raise ValueError("models: every slice must have one depth, input and output size")
        self.dims = [tuple(max(d[l][k] for d in shapes) for k in (0, 1)) for l in range(len(shapes[0]))]
        self.slice_dims = shapes
        self._set_activations([m.activation for m in models])
        rows = [self._padded_row(m) for m in models]
        self._bind(torch.stack(rows).to(device))

    def _padded_row(self, m: FixedMLP) -> torch.Tensor:
        parts = []
        for layer, (fan_in, fan_out) in zip(m.layers, self.dims):
            w = torch.zeros(fan_in, fan_out, dtype=layer.weight.dtype)
            w[: layer.in_features, : layer.out_features] = layer.weight.detach().t()
            b = torch.zeros(fan_out, dtype=layer.bias.dtype)
            b[: layer.out_features] = layer.bias.detach()
            parts += [w.reshape(-1), b]
        return torch.cat(parts)

    def slice_widths(self, row: int) -> list[int]:
        """Slice `row`'s own hidden widths."""
        return [out for _, out in self.slice_dims[row][:-1]]

    def _set_activations(self, names: list[str]) -> None:
        """Slice i's activation is names[i]: applied per run of equal
        activations (one op per run; a group sorted by activation has one
        run per activation), in place when the whole stack has one."""
        self.activations = list(names)
        runs: list[list] = []  # [first row, end row, name]
        for row, name in enumerate(names):
            if runs and runs[-1][2] == name:
                runs[-1][1] = row + 1
            else:
                runs.append([row, row + 1, name])
        if len(runs) == 1:
            self._acts = [(0, len(names), _IN_PLACE.get(names[0]) or resolve_activation(names[0]))]
        else:
            self._acts = [(a, b, resolve_activation(name)) for a, b, name in runs]

    def _bind(self, flat: torch.Tensor) -> None:
        self.flat, self.grad, self.n = flat, torch.zeros_like(flat), flat.shape[0]
        self.weights: list[torch.nn.Parameter] = []
        self.biases: list[torch.nn.Parameter] = []
        off = 0
        for fan_in, fan_out in self.dims:
            self.weights.append(self._leaf(off, fan_in, fan_out))
            self.biases.append(self._leaf(off + fan_in * fan_out, 1, fan_out))
            off += (fan_in + 1) * fan_out

    def _leaf(self, off: int, rows: int, cols: int) -> torch.nn.Parameter:
        """A leaf whose data and grad are views of the flat buffers: autograd
        accumulates into `grad` in place, the optimiser updates `flat`."""
        p = torch.nn.Parameter(torch.empty(0, device=self.flat.device))
        p.data = self.flat[:, off : off + rows * cols].view(-1, rows, cols)
        p.grad = self.grad[:, off : off + rows * cols].view(-1, rows, cols)
        return p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(n, B, in) -> (n, B, classes) logits, slice by slice."""
        h, last = x, len(self.weights) - 1
        for l, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = stacked_affine(b, h, w)  # (a read-out of a few classes taken transposed on a CPU: awnn/products.py)
            if l < last:
                h = self._acts[0][2](h) if len(self._acts) == 1 else torch.cat([act(h[a:b]) for a, b, act in self._acts])
        return h

    __call__ = forward

    def like(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """Views of `buffer`, a tensor laid out as `flat` (Adam's moments), one
        per parameter as they lie in `flat`: [weight 0 (N, in, out), bias 0 (N, 1, out), weight 1, ...]."""
        assert buffer.shape == self.flat.shape and buffer.is_contiguous() and self.flat.is_contiguous()
        base = self.flat.storage_offset()
        return [buffer.as_strided(p.shape, p.stride(), buffer.storage_offset() + p.storage_offset() - base)
                for w, b in zip(self.weights, self.biases) for p in (w, b)]

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only these slices (stack rows), in this order."""
        self._bind(self.flat[list(rows)].contiguous())
        self._set_activations([self.activations[r] for r in rows])
        self.slice_dims = [self.slice_dims[r] for r in rows]

    def state_dict(self, row: int) -> dict[str, torch.Tensor]:
        """Slice `row` as a FixedMLP state dict (CPU copies; a padded slice: its own units)."""
        out = {}
        for l, (w, b) in enumerate(zip(self.weights, self.biases)):
            fan_in, fan_out = self.slice_dims[row][l]
            out[f"layers.{l}.weight"] = w.detach()[row, :fan_in, :fan_out].t().clone(memory_format=torch.contiguous_format).cpu()
            out[f"layers.{l}.bias"] = b.detach()[row, 0, :fan_out].clone().cpu()
        return out


@dataclass
class _Slice:  # one config's progress (the fields of the Trainer it mirrors)
    config: TrainConfig
    best: dict[str, Any]
    widths: list[int] = field(default_factory=list)  # its own hidden widths (a padded slice's: not the stack's)
    history: list[dict[str, Any]] = field(default_factory=list)
    status: str = OK
    epoch: int = 0
    train_seconds: float = 0.0
    best_model: dict | None = None  # outer split: the selected epoch's weights
    final_model: dict | None = None  # the weights when the slice left the stack


class StackedTrainer:
    """Train a fusable group of configs (see `group_configs`) as one stacked model."""

    manual_gradients = True  # the step's gradient written out (awnn/stacked_grad.py); False: autograd, the reference

    def __init__(self, configs: Sequence[TrainConfig], task: Task | None = None):
        configs = list(configs)
        if not configs:
            raise ValueError("configs: expected at least one TrainConfig, found none")
        first = group_key(configs[0])
        for other in map(group_key, configs[1:]):
            for key, a, b in zip(GROUP_KEYS, first, other):
                if a != b:
                    raise ValueError(f"key {key!r}: a fused group needs one value, found {a!r} and {b!r} (split the configs with group_configs)")
        self.config = c0 = configs[0]
        self.device = resolve_device(c0.device)
        if c0.threads:
            torch.set_num_threads(c0.threads)
        task = task or load_task(c0.task, c0.data_root, c0.data_seed, config=c0)
        if c0.max_train_examples:
            task = task.cap_train(c0.max_train_examples, c0.data_seed)
        if getattr(task, "kind", None) != "tabular" or not hasattr(task, "tensors"):
            raise ValueError(f"task: fused training needs an in-memory tabular task, found {type(task).__name__} of kind {getattr(task, 'kind', None)!r}")
        self.task = task
        models = []
        for c in configs:  # exactly as Trainer.__init__: the global seed, then the model
            torch.manual_seed(c.seed)
            models.append(build_model(c, task))
        self.model = StackedMLP(models, self.device)
        self.optimizer = StackedAdam(self.model, [c.lr for c in configs], [c.weight_decay for c in configs], [c.adam_eps for c in configs])
        self.generators = [torch.Generator().manual_seed(c.seed) for c in configs]
        self.slices = [_Slice(c, {"val_acc": -1.0, "val_loss": math.inf, "epoch": 0, "test_acc": math.nan, "widths": self.model.slice_widths(i)},
                              widths=self.model.slice_widths(i)) for i, c in enumerate(configs)]
        self.alive = list(range(len(configs)))  # stack row -> index into configs
        self.n_train = task.n_train(c0.split)
        self.epoch = 0

    def run(self, on_epoch: EpochCallback | None = None, on_end: EndCallback | None = None,
            after_epoch: Callable[[], Any] | None = None, on_batch: BatchCallback | None = None) -> list[RunResult]:
        """Train every slice to its end; `on_epoch(index, record)` after each
        epoch of each slice, `on_end(index, result)` when a slice leaves the
        stack, `after_epoch()` once the epoch's slices have left (the moment
        to `save()`: the state holds no slice that is due to leave),
        `on_batch(epoch, done, total, seconds)` after each step, as the Trainer's."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_LAYOUT_WARNING)
            while self.alive:
                before = list(self.alive)
                self._epoch(on_epoch, on_batch)
                for i in before:
                    if i not in self.alive and on_end is not None:
                        on_end(i, self.result(i))
                if after_epoch is not None:
                    after_epoch()
        return [self.result(i) for i in range(len(self.slices))]

    def drop(self, indices: Sequence[int]) -> None:
        """Take these configs (indices into the group) out of the stack
        without training them further (e.g. finished by an earlier attempt)."""
        rows = [self.alive.index(i) for i in indices if i in self.alive]
        if rows:
            self._drop(rows)

    # --- continuing elsewhere (a fused Ray trial's checkpoint: search/fused_trial.py)
    def save(self) -> dict[str, Any]:
        """Everything needed to continue the group elsewhere (CPU tensors):
        the stack's weights and Adam state, each slice's batch-order
        generator, progress, selection and kept weights."""
        return {"format": STACK_FORMAT, "configs": [s.config.to_dict() for s in self.slices], "epoch": self.epoch,
                "alive": list(self.alive), "flat": self.model.flat.detach().cpu().clone(),
                "exp_avg": self.optimizer.exp_avg.cpu().clone(), "exp_avg_sq": self.optimizer.exp_avg_sq.cpu().clone(),
                "steps": self.optimizer.steps, "generators": [g.get_state() for g in self.generators],
                "slices": [{k: getattr(s, k) for k in _SLICE_STATE} for s in self.slices]}

    def load(self, state: dict[str, Any]) -> None:
        """Continue from `save()`'s output, written by a group of the same configs
        (the data folder, device and threads may differ); a ValueError otherwise."""
        if not isinstance(state, dict) or state.get("format") != STACK_FORMAT:
            raise ValueError(f"not a fused-group checkpoint (missing format {STACK_FORMAT!r})")
        mine = [_portable(s.config.to_dict()) for s in self.slices]
        if [_portable(c) for c in state["configs"]] != mine:
            raise ValueError("the checkpoint was written by a group of other configs")
        alive = list(state["alive"])
        if alive:
            self.model.keep(alive)  # stack rows: the group's configs in order until a first slice left
            self.optimizer.keep(alive)
            self.model.flat.copy_(state["flat"])
            self.optimizer.exp_avg.copy_(state["exp_avg"])
            self.optimizer.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.optimizer.steps = int(state["steps"])
        self.alive, self.epoch = alive, int(state["epoch"])
        for g, saved in zip(self.generators, state["generators"]):
            g.set_state(saved)
        for s, saved in zip(self.slices, state["slices"]):
            for k in _SLICE_STATE:
                setattr(s, k, saved[k])

    def _epoch(self, on_epoch: EpochCallback | None, on_batch: BatchCallback | None = None) -> None:
        t0 = time.perf_counter()
        self.epoch += 1
        loss_sum, correct, batches, seen = self._train_epoch(on_batch, t0)
        train_loss = [float(v) / batches for v in loss_sum.tolist()]
        train_acc = [float(v) / seen for v in correct.tolist()]
        val_loss, val_acc = self._evaluate("val")
        improved = []
        for row, i in enumerate(self.alive):
            s = self.slices[i]
            s.epoch, s.status = self.epoch, s.status if math.isfinite(train_loss[row]) else DIVERGED
            if s.status == OK and _better(s.config, s.best, val_loss[row], val_acc[row]):
                improved.append(row)
        self._select(improved, val_loss, val_acc)
        share = (time.perf_counter() - t0) / len(self.alive)  # the group's epoch, shared equally by its slices
        stopped = []
        for row, i in enumerate(self.alive):
            s = self.slices[i]
            s.train_seconds += share
            record = self._record(s, train_loss[row], train_acc[row], val_loss[row], val_acc[row])
            if on_epoch is not None:
                on_epoch(i, record)
            patience = s.config.patience and self.epoch - s.best["epoch"] >= s.config.patience
            if s.status != OK or patience or self.epoch >= s.config.epochs:
                stopped.append(row)
        if stopped:
            self._drop(stopped)

    def _train_epoch(self, on_batch: BatchCallback | None = None, t0: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """One pass over the training part, each slice in its own order.
        Returns per-slice (sum of batch losses, correct predictions), batches, samples."""
        c, model = self.config, self.model
        x, y = self.task.tensors(c.split, "train", self.device)
        n = len(y)
        perms = torch.stack([torch.randperm(n, generator=self.generators[i]) for i in self.alive]).to(self.device)
        xs, ys = x[perms], y[perms]  # (slices, n, in), (slices, n): every slice's epoch in its order
        loss_sum, counter = torch.zeros(model.n, device=self.device), CorrectCounter((model.n,), self.device)
        # (CPUs only: measured and tested there; a GPU keeps autograd's step, issue #33's measured path)
        manual = self.manual_gradients and self.device.type == "cpu" and supported(model.activations)
        for s in range(0, n, c.batch_size):
            yb = ys[:, s : s + c.batch_size]
            if manual:  # the gradient written out (awnn/stacked_grad.py)
                loss, out = forward_backward(model, xs[:, s : s + c.batch_size], yb)
            else:  # the reference: autograd
                out = model(xs[:, s : s + c.batch_size])
                loss = _cross_entropy(out, yb).mean(1)
                model.grad.zero_()
                loss.sum().backward()  # slice i's gradient is that of its own mean loss
            self.optimizer.step()
            loss_sum += loss.detach()
            counter.add(out.detach(), yb)  # (counted a chunk of batches at a time: awnn/correct.py)
            if on_batch is not None:
                on_batch(self.epoch, s // c.batch_size + 1, math.ceil(n / c.batch_size), time.perf_counter() - t0)
        return loss_sum, counter.total(), math.ceil(n / c.batch_size), n

    @torch.no_grad()
    def _evaluate(self, part: str) -> tuple[list[float], list[float]]:
        """Per-slice (mean cross-entropy, accuracy) on a part, as `awnn.train.evaluate`."""
        x, y = self.task.tensors(self.config.split, part, self.device)
        k, n = self.model.n, len(y)
        loss_sum, correct = torch.zeros(k, device=self.device), torch.zeros(k, device=self.device, dtype=torch.long)
        for s in range(0, n, EVAL_BATCH):
            xb, yb = x[s : s + EVAL_BATCH], y[s : s + EVAL_BATCH]
            out = self.model(xb.expand(k, -1, -1))
            loss_sum += _cross_entropy(out, yb.expand(k, -1)).sum(1)
            correct += (out.argmax(-1) == yb).sum(1)
        if n == 0:
            return [math.nan] * k, [math.nan] * k
        return [v / n for v in loss_sum.tolist()], [v / n for v in correct.tolist()]

    def _select(self, rows: list[int], val_loss: list[float], val_acc: list[float]) -> None:
        """New best epochs of these stack rows (test scored on the outer split, the weights kept)."""
        outer = self.config.split == "outer" and bool(rows)
        test_loss, test_acc = self._evaluate("test") if outer else ([math.nan] * self.model.n,) * 2
        for row in rows:
            s = self.slices[self.alive[row]]
            s.best = {"val_acc": val_acc[row], "val_loss": val_loss[row], "epoch": self.epoch, "test_acc": test_acc[row],
                      "test_loss": test_loss[row], "widths": list(s.widths)}
            s.best_model = self.model.state_dict(row) if outer else None

    def _record(self, s: _Slice, train_loss: float, train_acc: float, val_loss: float, val_acc: float) -> dict[str, Any]:
        """The Trainer's epoch record for a fixed MLP (no prior terms, no width changes)."""
        widths = s.widths
        record = {
            "epoch": self.epoch, "train_loss": train_loss, "train_nll": train_loss,  # a fixed MLP's loss is the data term alone
            "train_acc": train_acc, "val_loss": val_loss, "val_acc": val_acc,
            "best_val_acc": s.best["val_acc"] if s.best["epoch"] else math.nan,  # (as the Trainer's: NaN before a scored epoch)
            "width_total": sum(widths), **{f"width_l{i}": w for i, w in enumerate(widths)},
            "train_seconds": s.train_seconds, "status": s.status, "width_capped": False,
        }
        if self.device.type == "cuda":  # (#19) as the Trainer's record: the trial process's peak GPU memory so far
            record["gpu_mem_mib"] = torch.cuda.max_memory_allocated(self.device) / 2**20  # (a fused group's: shared by its members)
        s.history.append(record)
        return record

    def _drop(self, rows: list[int]) -> None:
        """Take these stack rows out: keep their final weights, shrink the stack."""
        for row in rows:
            self.slices[self.alive[row]].final_model = self.model.state_dict(row)
        keep = [r for r in range(len(self.alive)) if r not in set(rows)]
        self.alive = [self.alive[r] for r in keep]
        if keep:
            self.model.keep(keep)
            self.optimizer.keep(keep)

    def state_dict(self, index: int) -> dict[str, torch.Tensor]:
        """Config `index`'s current weights as a FixedMLP state dict."""
        return self.model.state_dict(self.alive.index(index)) if index in self.alive else dict(self.slices[index].final_model or {})

    def result(self, index: int) -> RunResult:
        s = self.slices[index]
        widths = list(s.widths)
        best = s.best
        return RunResult(status=s.status, test_acc=best["test_acc"], best_val_acc=max(best["val_acc"], 0.0) if best["epoch"] else math.nan,
                         best_val_loss=best["val_loss"], best_epoch=best["epoch"], epochs_run=s.epoch, widths=widths,
                         widths_at_best=list(best["widths"]), train_seconds=s.train_seconds, hit_max_width=False, history=s.history,
                         test_loss=best.get("test_loss", math.nan), n_train=self.n_train)


def _portable(config: dict[str, Any]) -> dict[str, Any]:
    """A config without what may differ where a checkpoint is continued."""
    return {k: v for k, v in config.items() if k not in ("data_root", "device", "threads")}


def _cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(slices, B, classes) logits and (slices, B) targets -> (slices, B) cross-entropies."""
    k, b, classes = out.shape
    return F.cross_entropy(out.reshape(k * b, classes), y.reshape(k * b), reduction="none").view(k, b)


def _better(c: TrainConfig, best: dict[str, Any], val_loss: float, val_acc: float) -> bool:
    """The Trainer's rule for a new best epoch."""
    later = c.best_epoch_ties == "later"
    if c.select_metric == "loss":
        return val_loss < best["val_loss"] or (val_loss == best["val_loss"] and (later or val_acc > best["val_acc"]))
    return val_acc > best["val_acc"] or (val_acc == best["val_acc"] and (later or val_loss < best["val_loss"]))


def train_stacked(configs: Sequence[TrainConfig], task: Task | None = None, on_epoch: EpochCallback | None = None) -> list[RunResult]:
    """Train one fusable group; a RunResult per config, in order."""
    return StackedTrainer(configs, task).run(on_epoch)


def train_grouped(configs: Sequence[TrainConfig], task: Task | None = None, max_group: int = 32,
                  on_epoch: EpochCallback | None = None) -> list[RunResult]:
    """Group `configs` (group_configs) and train each group fused; RunResults
    in the configs' order.  `on_epoch(index into configs, record)`."""
    configs = list(configs)
    results: list[RunResult | None] = [None] * len(configs)
    for group in group_configs(configs, max_group):
        callback = None if on_epoch is None else (lambda i, rec, g=group: on_epoch(g[i], rec))
        for i, r in zip(group, train_stacked([configs[i] for i in group], task, callback)):
            results[i] = r
    return results  # type: ignore[return-value]
