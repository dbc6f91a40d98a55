"""Weight initialisation: kaiming and kaiming+ (paper Theorem 3.1, appendix A).

A ReLU layer whose inputs are rescaled by the importances f(j) of the
adaptive layer feeding it keeps the activation variance constant across
layers when its weights have

    Var[w] = 2 / sum_{j<D} f(j)^2           (kaiming+, Eq. 15 / 41)

instead of plain kaiming's Var[w] = 2 / fan_in.  A layer fed by the raw
input (no rescaling) uses plain kaiming in both schemes.  The uniform
variant draws from U(-b, b) with b = sqrt(3) * std, which has the same
variance.
"""
from __future__ import annotations

import math

import torch

__all__ = ["INITS", "DISTRIBUTIONS", "GROW_INITS", "init_std", "fill_"]

INITS = ("kaiming", "kaiming+")
DISTRIBUTIONS = ("gaussian", "uniform")
GROW_INITS = ("normal", "kaiming+")


def init_std(init: str, fan_in: int, importance_sq_sum: float | None) -> float:
    """Standard deviation for a layer with `fan_in` inputs.

    `importance_sq_sum` is sum_j f(j)^2 of the adaptive layer feeding this
    one, or None when the inputs are not rescaled (the first layer, or a
    fixed-width network).
    """
    if init == "kaiming" or importance_sq_sum is None:
        return math.sqrt(2.0 / max(1, fan_in))
    if init == "kaiming+":
        return math.sqrt(2.0 / importance_sq_sum)
    raise ValueError(f"Could not resolve init {init!r} among choices {list(INITS)}.")


def fill_(t: torch.Tensor, std: float, distribution: str = "gaussian", generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill `t` in place with zero-mean noise of standard deviation `std`."""
    with torch.no_grad():
        if distribution == "gaussian":
            t.normal_(0.0, std, generator=generator)
        elif distribution == "uniform":
            bound = math.sqrt(3.0) * std
            t.uniform_(-bound, bound, generator=generator)
        else:
            raise ValueError(f"Could not resolve distribution {distribution!r} among choices {list(DISTRIBUTIONS)}.")
    return t
