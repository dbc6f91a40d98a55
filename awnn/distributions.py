"""The discretised exponential distribution over neuron indices (paper Eq. 12).

Neuron j = 0, 1, 2, ... of an adaptive layer has importance

    f(j) = exp(-rate * j) - exp(-rate * (j + 1)) = exp(-rate * j) * (1 - exp(-rate))

and the layer's width is the smallest D with sum_{j<D} f(j) >= k, i.e. the
quantile function at k:  D = ceil(-ln(1 - k) / rate), at least 1.

`rate` (lambda in the paper, nu for its variational parameter) is kept
positive as rate = softplus(rho) with rho an unconstrained parameter.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = [
    "importance",
    "importance_from_rho",
    "width_from_rate",
    "rho_from_rate",
    "rate_from_rho",
]


def importance(rate: torch.Tensor, width: int, arange: torch.Tensor | None = None) -> torch.Tensor:
    """f(j) for j = 0..width-1, differentiable in `rate` (a 0-d tensor).

    `arange` may be a pre-allocated `torch.arange(capacity)` with capacity >=
    width; passing it avoids an allocation per training step.
    """
    j = arange[:width] if arange is not None else torch.arange(width, dtype=rate.dtype, device=rate.device)
    # exp(-rate*j) * (1 - exp(-rate)); -expm1(-rate) is exact for small rates.
    return torch.exp(-rate * j) * (-torch.expm1(-rate))


class _ImportanceFromRho(torch.autograd.Function):
    """f(j; softplus(rho)) for j in `j`, as one autograd node.

    The same function as `importance(softplus(rho), ...)`, with the gradient
    written out (it runs at every training step, where a chain of six tiny
    autograd nodes costs more than the arithmetic):
        f_j = e^{-rate j} (1 - e^{-rate})
        df_j/drate = f_j (e^{-rate} / (1 - e^{-rate}) - j)
        drate/drho = sigmoid(rho)
    """

    @staticmethod
    def forward(ctx, rho, j):
        rate = F.softplus(rho)
        one_minus_q = -torch.expm1(-rate)  # 1 - e^{-rate}
        f = torch.exp(j * -rate) * one_minus_q
        ctx.save_for_backward(rho, rate, one_minus_q, j, f)
        return f

    @staticmethod
    def backward(ctx, grad_f):
        rho, rate, one_minus_q, j, f = ctx.saved_tensors
        c = torch.exp(-rate) / one_minus_q  # e^{-rate} / (1 - e^{-rate})
        gf = grad_f * f
        grad_rate = c * gf.sum() - (gf * j).sum()
        return grad_rate * torch.sigmoid(rho), None


def importance_from_rho(rho: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """f(j) with rate = softplus(rho); `j` holds the neuron indices (float)."""
    return _ImportanceFromRho.apply(rho, j)


def width_from_rate(rate: float, quantile_k: float) -> int:
    """D = ceil(-ln(1-k)/rate), at least 1 (the quantile function of f at k)."""
    if not 0.0 < quantile_k < 1.0:
        raise ValueError(f"quantile_k must lie in (0, 1), but got {quantile_k=}.")
    if not rate > 0.0 or math.isnan(rate):
        raise ValueError(f"rate must be positive, but got {rate=}.")
    d = -math.log1p(-quantile_k) / rate
    # Guard against float noise: ceil(2.0000000000000004) must be 2, not 3.
    width = math.ceil(d - 1e-9 * max(1.0, d))
    return max(1, width)


def rho_from_rate(rate: float) -> float:
    """Inverse softplus: the rho with softplus(rho) == rate."""
    if not rate > 0.0:
        raise ValueError(f"rate must be positive, but got {rate=}.")
    # log(exp(rate) - 1), computed stably for small and large rates.
    return rate + math.log(-math.expm1(-rate))


def rate_from_rho(rho: torch.Tensor) -> torch.Tensor:
    return F.softplus(rho)
