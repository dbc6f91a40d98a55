"""The ELBO's prior terms as the trainer applies them: in closed form, not
through autograd (awnn/loss.py keeps the full differentiable ELBO, which the
tests compare against).

* p(theta), Gaussian: its gradient theta / (sigma_theta^2 N) is a weight
  decay (coupled L2) on the blocks' `prior_parameters()`;
* p(rate), Gaussian N(mean, std^2) (the authors' SpiralHard prior): its
  gradient in rho is (rate - mean) sigmoid(rho) / (std^2 N), from the host
  values of rho.

When the model is one AdaptiveMLP taking its fused path, both gradients are
added by the model's own backward (`PriorGrads`, awnn/fused.py); otherwise
after the backward (`add_weight_prior_grad`, `add_rate_prior_grad`).
`ClosedFormPriors` is the Trainer's part that does this (awnn/train.py).
"""
from __future__ import annotations

import math

import torch

from .arith import saturated
from .fused import one_like
from .layers import AdaptiveMLP, PriorGrads
from .loss import RatePrior, gaussian_log_prob_sum

__all__ = ["ClosedFormPriors"]


class ClosedFormPriors:
    """The prior terms of the Trainer (uses its config, model, blocks, n_obs)."""

    def _init_priors(self) -> None:
        self._prior_params = [p for b in self.blocks for p in b.prior_parameters()]
        self._prior_decay = self.weight_prior_decay()
        self._scale_free = any(getattr(b, "scale_free", False) for b in self.blocks)  # (a constructor argument)
        self._model_is_block = isinstance(self.model, AdaptiveMLP)  # (see _prior_grads)
        self._prior_grads_cache: tuple | None = None

    def weight_prior_decay(self) -> float:
        """The ELBO's Gaussian weight prior as an L2 coefficient.

        -log p(theta) / N = sum w^2 / (2 sigma^2 N) + const has gradient
        w / (sigma^2 N): exactly what `weight_decay = 1 / (sigma^2 N)` adds to
        the gradient in Adam and SGD (coupled L2, not AdamW).  The trainer
        applies the prior there instead of building an autograd graph over
        every weight at every step; `awnn.loss.elbo_loss` keeps the full
        differentiable form, and a test checks both give the same update."""
        c = self.config
        if not self.blocks or c.weight_prior != "gaussian":
            return 0.0
        return 1.0 / (c.sigma_theta * c.sigma_theta * self.n_obs)

    def _prior_grads(self, prior: RatePrior, closed_form: bool) -> PriorGrads | None:
        """The priors' closed-form gradients for the model's fused backward
        (AdaptiveMLP.forward's prior_grads), when the model is one AdaptiveMLP
        taking its fused path (called once a step: each call adds them once);
        else None (train_step adds them after the backward).  Adding them where
        the gradients are made saves a pass over the gradients (~20-30 us a
        step on a busy 2-core CPU, the weight decay then being the beta of a
        matrix product)."""
        if not self._model_is_block or not self.model.fused_forward():
            return None
        cached = self._prior_grads_cache
        if cached is not None and cached[0] is prior and cached[1] == closed_form:
            return cached[2]
        rate_scale = 1.0 / (prior.std * prior.std * self.n_obs) if closed_form else 0.0
        grads = PriorGrads(weight_decay=self._prior_decay, rate_mean=prior.mean if closed_form else 0.0, rate_scale=rate_scale)
        if not grads.weight_decay and not grads.rate_scale:
            grads = None
        self._prior_grads_cache = (prior, closed_form, grads)
        return grads

    def rate_prior_value(self, prior: RatePrior, rates: "list[float] | None" = None) -> float:
        """-sum_l log p(rate_l) / N for a Gaussian p(rate) = N(mean, std^2);
        `rates`: every adaptive layer's softplus(rho) where the caller has
        them already (the written-out step's), else read from the blocks."""
        mean, var, n = prior.mean, prior.std * prior.std, self.n_obs
        const = math.log(prior.std) + 0.5 * math.log(2.0 * math.pi)
        value = 0.0
        if rates is not None:
            for rate in rates:
                value += ((rate - mean) ** 2 / (2.0 * var) + const) / n
            return value
        for b in self.blocks:
            for v in b.rho_values():
                rate = math.log1p(math.exp(v)) if v < 20.0 else v  # softplus
                value += ((rate - mean) ** 2 / (2.0 * var) + const) / n
        return value

    def add_rate_prior_grad(self, prior: RatePrior) -> float:
        """rho.grad += d/drho of -log p(rate) / N for a Gaussian p(rate) =
        N(mean, std^2), rate = softplus(rho):  (rate - mean) sigmoid(rho) / (std^2 N).
        Returns the term's value, -sum_l log p(rate_l) / N.  Computed on the
        host from the values of rho the step has read already (a handful of
        scalars: tensor ops would cost more than the arithmetic)."""
        mean, var, n = prior.mean, prior.std * prior.std, self.n_obs
        const = math.log(prior.std) + 0.5 * math.log(2.0 * math.pi)
        value = 0.0
        for b in self.blocks:
            grads = []
            for v in b.rho_values():
                rate = math.log1p(math.exp(v)) if v < 20.0 else v  # softplus
                sig = 1.0 / (1.0 + math.exp(-v)) if v > -700.0 else 0.0
                grads.append((rate - mean) * sig / (var * n))
                value += ((rate - mean) ** 2 / (2.0 * var) + const) / n
            rho = b._parameters["rho"]
            grad = rho.grad
            if grad is not None and len(grads) == 1:
                grad.add_(one_like(grad), alpha=saturated(grads[0], grad.dtype))  # (a scalar: no tensor to build)
                continue
            g = torch.tensor(grads, dtype=rho.dtype)
            if rho.is_cuda:
                g = g.to(rho.device, non_blocking=True)
            if grad is None:
                rho.grad = g
            else:
                grad.add_(g)
        return value

    @torch.no_grad()
    def add_weight_prior_grad(self) -> None:
        """grad += w / (sigma_theta^2 N) for the weights under p(theta): the
        gradient of -log p(theta) / N (coupled L2, as Adam's weight_decay)."""
        if not self._prior_decay:
            return
        if self._scale_free:  # the prior is on W = c V, its gradient in V is c^2 V / (sigma^2 N)
            pairs = [(p, s) for p, s in zip(self._prior_params, self._prior_sq_scales()) if p.grad is not None]
            for p, s in pairs:
                p.grad.add_(p, alpha=self._prior_decay * s)
            return
        params = [p for p in self._prior_params if p.grad is not None]
        if params:
            torch._foreach_add_([p.grad for p in params], params, alpha=self._prior_decay)

    def _prior_sq_scales(self) -> list[float] | None:
        """c^2 per entry of `_prior_params` (AdaptiveMLP.prior_sq_scales), or
        None when every block keeps its weights in plain units."""
        if not self._scale_free:
            return None
        out: list[float] = []
        for b in self.blocks:
            s = b.prior_sq_scales() if getattr(b, "scale_free", False) else None
            out += s if s is not None else [1.0] * len(b.prior_parameters())
        return out

    @torch.no_grad()
    def neg_log_weight_prior(self) -> float:
        """-log p(theta) / N, the value of the term the optimiser's decay applies."""
        c = self.config
        if not self.blocks or c.weight_prior != "gaussian":
            return 0.0
        params = [p for b in self.blocks for p in b.prior_parameters()]
        scales = self._prior_sq_scales() or [1.0] * len(params)
        sq = float(sum(s * p.detach().pow(2).sum() for p, s in zip(params, scales)))
        count = sum(p.numel() for p in params)
        return -float(gaussian_log_prob_sum(torch.tensor(sq), count, c.sigma_theta)) / self.n_obs
