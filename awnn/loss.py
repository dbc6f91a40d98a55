"""The ELBO objective of the paper (Eq. 13), per mini-batch.

With N training samples and a mini-batch of M, the quantity minimised is

    (N/M) * sum_batch CE  -  log p(theta)  -  sum_l log p(rate_l)

divided by N (so it reads like an ordinary mean cross-entropy plus small
regularisers, and Adam sees gradients of the usual scale):

    loss = mean_batch CE  +  ( -log p(theta) - sum_l log p(rate_l) ) / N

* p(theta) = prod N(w; 0, sigma_theta^2) over the weights and biases of the
  adaptive layers (theta_ln for l = 1..L in Eq. 13: each hidden neuron's
  incoming weights and bias).  `prior_on_readout=True` extends it to the
  read-out fed by the last adaptive layer (section 3.1 mentions regularising
  the next layer against 1/f(j) compensation); on in the `authors` profile
  (what the paper's authors ran), off in `paper-text`.
* N is the training-set size, or the config's `n_obs` (the authors fix
  2000 on the synthetic tasks); the trainer passes it as `n_train`.
* p(rate_l) = N(rate_l; mu, sigma^2), or uninformative (the term is 0).
* The q terms of Eq. 13 are Gaussians with unit variance evaluated at their
  own mean: constants, left out.

Full log-densities (normalising constants included) are used, so the
reported value is the negative ELBO per sample up to those q constants.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .layers import AdaptiveMLP

__all__ = ["RatePrior", "elbo_loss", "gaussian_log_prob_sum", "squared_sum", "mean_cross_entropy_grad"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class RatePrior:
    """p(rate): Gaussian(mean, std), or uninformative when std is None."""

    mean: float = 0.0
    std: float | None = None

    @property
    def informative(self) -> bool:
        return self.std is not None


class _SquaredSum(torch.autograd.Function):
    """sum_i ||p_i||^2 over many tensors as one autograd node.

    The weight prior touches every weight and bias at every step; written
    as p.pow(2).sum() per tensor it adds two forward and three backward
    kernels per tensor, which at tabular sizes costs as much as the
    forward pass itself.  Here: one fused norm forward, one fused
    multiply backward."""

    @staticmethod
    def forward(ctx, *params):
        ctx.save_for_backward(*params)
        norms = torch._foreach_norm(params)
        return torch.stack(norms).square().sum()

    @staticmethod
    def backward(ctx, grad):
        params = ctx.saved_tensors
        return tuple(torch._foreach_mul(params, grad * 2.0))


def squared_sum(params: list[torch.Tensor]) -> torch.Tensor:
    """sum over all tensors of the sum of their squared entries (differentiable)."""
    return _SquaredSum.apply(*params)


def gaussian_log_prob_sum(sq_sum: torch.Tensor, count: int, std: float) -> torch.Tensor:
    """sum_i log N(x_i; 0, std^2) given sum_i x_i^2 and the count."""
    return -0.5 * sq_sum / (std * std) - count * (math.log(std) + _LOG_SQRT_2PI)


def elbo_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    blocks: list[AdaptiveMLP],
    n_train: int,
    sigma_theta: float | None,
    rate_prior: RatePrior = RatePrior(),
    ignore_index: int = -100,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Negative ELBO per training sample for one mini-batch.

    `blocks` are the adaptive blocks whose weights carry the Gaussian prior
    (pass [] for a fixed-width network: the loss is then the plain mean CE).
    `sigma_theta=None` makes p(theta) uninformative.
    Returns (loss, parts) with parts `nll`, `log_prior_theta`, `log_prior_rate`
    (detached, per sample, for logging).
    """
    nll = F.cross_entropy(logits, targets, ignore_index=ignore_index)
    loss = nll
    parts = {"nll": nll.detach()}
    if blocks and sigma_theta is not None:
        params = []
        for block in blocks:
            scales = block.prior_sq_scales() if getattr(block, "scale_free", False) else None
            own = block.prior_parameters()
            # scale_free blocks: the prior is on W = c V (c a constant of this step)
            params += own if scales is None else [p * math.sqrt(s) if s != 1.0 else p for p, s in zip(own, scales)]
        count = sum(p.numel() for p in params)
        # -log p(theta) / N = sq * 0.5/(sigma^2 N) + count (log sigma + log sqrt(2 pi)) / N
        neg_lp_theta = squared_sum(params) * (0.5 / (sigma_theta * sigma_theta * n_train)) + count * (math.log(sigma_theta) + _LOG_SQRT_2PI) / n_train
        loss = loss + neg_lp_theta
        parts["log_prior_theta"] = -neg_lp_theta.detach()
    if blocks and rate_prior.informative:
        rates = torch.stack([r for block in blocks for r in block.rates()])
        lp_rate = gaussian_log_prob_sum((rates - rate_prior.mean).pow(2).sum(), rates.numel(), rate_prior.std)
        loss = loss - lp_rate / n_train
        parts["log_prior_rate"] = lp_rate.detach() / n_train
    return loss, parts


_MINUS: dict = {}


@torch.no_grad()
def mean_cross_entropy_grad(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean cross-entropy over the batch dimension and its gradient, for
    the training steps that write their gradient out (awnn/train_step.py,
    awnn/stacked_grad.py): logits (..., B, C), class targets (..., B) ->
    (the mean losses (...), dL/dlogits of their sum), formed as autograd's
    log_softmax backward forms it: softmax / B - onehot / B."""
    inv = 1.0 / logits.shape[-2]
    logp = torch.log_softmax(logits, -1)
    target = targets.unsqueeze(-1)
    loss = logp.gather(-1, target).squeeze(-1).mean(-1).neg_()
    key = (tuple(target.shape), inv, logp.dtype, logp.device)
    minus = _MINUS.get(key)  # -1/B at each target, cached per shape (the last batch of an epoch is smaller)
    if minus is None:
        if len(_MINUS) > 64:
            _MINUS.clear()
        minus = _MINUS[key] = torch.full(target.shape, -inv, dtype=logp.dtype, device=logp.device)
    return loss, logp.exp_().mul_(inv).scatter_add_(-1, target, minus)
