"""The discretised exponential distribution over neuron indices (paper Eq. 12).

Neuron j = 0, 1, 2, ... of an adaptive layer has importance

    f(j) = exp(-rate * j) - exp(-rate * (j + 1)) = exp(-rate * j) * (1 - exp(-rate))

and the layer's width is the smallest D with sum_{j<D} f(j) >= k, i.e. the
quantile function at k:  D = ceil(-ln(1 - k) / rate), at least 1 (the
paper's text; `width_rule="floor+2"` is what its authors ran:
D = floor(-ln(1 - k) / rate) + 2, 232 rather than 231 at rate 0.01, k 0.9).

The authors also renormalise the importances over the D kept neurons,
p(j) = (f(j) + 1e-6) / sum_{i<D} (f(i) + 1e-6), so they always sum to 1
(`renormalise`): the rate then only moves mass between neurons.

`rate` (lambda in the paper, nu for its variational parameter) is kept
positive as rate = softplus(rho) with rho an unconstrained parameter.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = [
    "WIDTH_RULES",
    "RENORM_EPS",
    "renormalise",
    "importance",
    "importance_from_rho",
    "width_from_rate",
    "rho_from_rate",
    "rate_from_rho",
]


WIDTH_RULES = ("ceil", "floor+2")
RENORM_EPS = 1e-6  # added to every f(j) before renormalising (the authors' choice)


def renormalise(f: torch.Tensor) -> torch.Tensor:
    """(f + 1e-6) / sum(f + 1e-6): importances summing to 1 over the kept neurons."""
    q = f + RENORM_EPS
    return q / q.sum()


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

    The same function as `importance(softplus(rho), ...)`, computed in log
    space with four kernels and its gradient written out (it runs at every
    training step, where a chain of tiny autograd nodes costs more than the
    arithmetic).  With s = sigmoid(rho): 1 - e^{-rate} = s exactly, so
        log f_j = log s - rate * j = logsigmoid(rho) - softplus(rho) * j
        d log f_j / d rho = (1 - s) - s * j
    """

    @staticmethod
    def forward(ctx, rho, j):
        f = torch.exp(torch.addcmul(F.logsigmoid(rho), j, F.softplus(rho), value=-1.0))
        ctx.save_for_backward(rho, j, f)
        return f

    @staticmethod
    def backward(ctx, grad_f):
        rho, j, f = ctx.saved_tensors
        s = torch.sigmoid(rho)
        gf = grad_f * f
        # sum_j gf_j ((1 - s) - s j) = (1 - s) sum(gf) - s (gf . j)
        grad_rho = gf.sum() * (1.0 - s) - torch.dot(gf, j) * s
        return grad_rho, None


def importance_from_rho(rho: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """f(j) with rate = softplus(rho); `j` holds the neuron indices (float)."""
    return _ImportanceFromRho.apply(rho, j)


def width_from_rate(rate: float, quantile_k: float, rule: str = "ceil") -> int:
    """D = ceil(-ln(1-k)/rate), at least 1 (the quantile function of f at k);
    with rule="floor+2", D = floor(-ln(1-k)/rate) + 2."""
    if rule not in WIDTH_RULES:
        raise ValueError(f"Could not resolve width rule {rule!r} among choices {list(WIDTH_RULES)}.")
    if not 0.0 < quantile_k < 1.0:
        raise ValueError(f"quantile_k must lie in (0, 1), but got {quantile_k=}.")
    if not rate > 0.0 or math.isnan(rate):
        raise ValueError(f"rate must be positive, but got {rate=}.")
    d = -math.log1p(-quantile_k) / rate
    if rule == "floor+2":
        return math.floor(d) + 2
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
