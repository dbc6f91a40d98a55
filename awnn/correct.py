"""An epoch's count of correct training predictions, taken a chunk of
batches at a time instead of after every step.

The training loops (awnn/train.py's Trainer, awnn/stacked.py's stack) report
each epoch's training accuracy.  Counted after every step,
`correct += (out.argmax(-1) == y).sum()` is four tensor ops, which cost ~7 us
together in a tight loop, but ~30 us right after a training step on a CPU:
the step's work leaves the dispatcher's code and data cold.  At SpiralHard's
sizes (1 hidden layer of ~270, batch 128, one core) that was ~8% of an AWNN
trial's step and ~13% of a lean fixed trial's (2026-12-06).
`CorrectCounter` keeps each batch's logits and targets (references, no copy:
every training path returns new logits each step) and counts a chunk of
them in one pass when they reach `limit` logits (or at the epoch's end), so
the four ops run about once an epoch at tabular sizes and memory stays
bounded for large outputs.  The count is the same integer: argmax, the
comparison and the sum see the same values, in chunks.  `limit=0` counts
after every batch, as before: the reference the tests compare it with
(tests/awnn/test_correct.py).
"""
from __future__ import annotations

import torch

__all__ = ["CorrectCounter", "LIMIT"]

# logits held before a chunk is counted (4 MiB of float32): a SpiralHard epoch
# is 14,336; a CIFAR-100 epoch 5 M, counted in 5 chunks
LIMIT = 1 << 20


class CorrectCounter:
    """Correct predictions of (..., B, classes) logits against (..., B) class
    targets, summed over the batch dimension (the second to last of the
    logits): a 0-d count for (B, classes) logits, one per slice for a stack's
    (N, B, classes)."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, limit: int | None = None):
        self.count = torch.zeros(shape, device=device, dtype=torch.long)
        self.limit = LIMIT if limit is None else limit  # (LIMIT read now: tests set it)
        self._outs: list[torch.Tensor] = []
        self._ys: list[torch.Tensor] = []
        self._held = 0

    def add(self, out: torch.Tensor, y: torch.Tensor) -> None:
        """One batch's logits (detached) and targets; the logits must not be written
        to afterwards (each training step returns new ones)."""
        self._outs.append(out)
        self._ys.append(y)
        self._held += out.numel()
        if self._held >= self.limit:
            self.flush()

    def flush(self) -> None:
        """Count the batches held."""
        outs, ys = self._outs, self._ys
        if not outs:
            return
        dim = outs[0].dim() - 2  # the batch dimension, of the logits and of the targets alike
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim)
        y = ys[0] if len(ys) == 1 else torch.cat(ys, dim)
        self.count += (out.argmax(-1) == y).sum(dim)
        outs.clear()
        ys.clear()
        self._held = 0

    def total(self) -> torch.Tensor:
        """The epoch's count so far (every batch added, counted)."""
        self.flush()
        return self.count
