"""CPU float arithmetic: flush denormal floats to zero (on by default in trials and `awnn train`).

Once a unit stops receiving gradient (a dead ReLU; an AWNN weight pulled
toward zero by the weight prior), its Adam moments - and for AWNN, where the
prior keeps shrinking such weights, the weights and gradients themselves -
decay into float32 denormals (|x| < 1.2e-38), and x86 CPUs compute on
denormals many times slower.  Measured on NCI1 (GIN, AWNN, 1 conv layer,
batch 32, 1 thread): an epoch takes 0.5 s for 11 epochs, then 0.9, 1.6,
1.7 s, and 5.7 s by epoch 60 in a quick comparison (7.8 s with 2 conv
layers), at an unchanged width; with denormals flushed it stays at 0.5 s
(docs/data.md, "Real datasets").  That is
an artefact of the CPU, not a cost of the method (GPUs do not slow down on
denormals), and it would inflate whichever arm has more of them.

`torch.set_flush_denormal(True)` makes the CPU treat denormals as zero
(FTZ/DAZ; x86 with SSE3): values below 1.2e-38 become 0, which changes no
result that matters but is not bit for bit the arithmetic without it.  It is
per process: each trial sets it (search/trial_common.py), as `awnn train`
does; `--keep-denormals` turns it off.
"""
from __future__ import annotations

import math

__all__ = ["saturated", "set_denormals"]


def set_denormals(flush: bool) -> bool:
    """Flush (True) or keep (False) float denormals on this process's CPU; returns
    whether flushing is on afterwards (False where the CPU cannot flush)."""
    import torch

    return bool(torch.set_flush_denormal(bool(flush))) and bool(flush)


_FLOAT_MAX: dict = {}  # dtype -> its largest finite value


def saturated(x: float, dtype) -> float:
    """The host scalar `x` as a tensor of `dtype` would hold it: +-inf beyond
    the dtype's range (the value its own arithmetic would overflow to), else
    `x` unchanged.  torch refuses a Python float out of a tensor's range as an
    op's `alpha` ("value cannot be converted to type float without overflow"):
    a rate prior whose term overflows float32 (a mean of 1e18, a std of 1e-18)
    crashed the step instead of diverging, which the trainer reports."""
    limit = _FLOAT_MAX.get(dtype)
    if limit is None:
        import torch

        limit = _FLOAT_MAX[dtype] = float(torch.finfo(dtype).max)
    if -limit <= x <= limit or x != x:  # (NaN passes: torch takes it, and it diverges the run)
        return x
    return math.copysign(math.inf, x)
