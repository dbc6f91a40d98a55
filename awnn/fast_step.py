"""The adaptive MLP's training step in the `authors` profile on a CPU, in one
straight-line function (issue #30).

awnn/train_step.py's written-out step is general: any depth, activation,
profile, priors on or off, importances from host scalars or from the rho
tensor; it calls the fused node's forward and backward (awnn/fused.py)
through a stand-in ctx, builds the node's input tuple, copies gradients to
the parameters' layout and hands them to the lean Adam, which validates
them.  At SpiralHard's sizes (1 hidden layer of ~600, batch 128, one core)
that Python was a quarter of an AWNN step: `benchmarks/step_floor.py`
measured the same arithmetic written inline at ~0.8x the product's step.

`FastStep` is that inline step made a product path, for the case trials
run by default:

* one AdaptiveMLP, importances renormalised (`authors`), the weight prior on
  every layer (read-out included), its weights used as they are (not
  scale_free), an activation with a written-out backward;
* the rate prior in closed form (or none); the Trainer's LeanAdam, one
  param group without a decay of its own, no step hooks, no scheduler;
* rho's host value finite (`importance_constants`).

It computes what `step_grads` + `LeanAdam.step_with` compute, with the
same ops on the same tensors but one difference of rounding: the weight
prior's decay w / (sigma^2 N) is added by Adam's kernel (its coupled
`weight_decay`) instead of as the beta of each weight gradient's matrix
product and three `add_`s; rho has no decay, so its gradient gets
-decay rho added first (the rate prior's scalar carries it: no extra op).
In float32 that rounding can tip a width update, after which two runs part
as two seeds would.

Where awnn/native.py's C library builds (a C compiler; AWNN_NATIVE not 0),
each layer's own element-wise work (the importances, their product with the
activations or the next weight, rho's gradient, G * p; not the activation,
which a fixed layer has too) is one C call each way instead of ~11 torch ops:
the torch ops stay beside it as its reference (`native` None; a layer whose
layout the C pass was not written for takes them every step), and
tests/awnn/test_native.py compares the two.

tests/awnn/test_fast_step.py compares it with the general step (whole
float64 runs over width moves, one float32 step, resumed checkpoints);
`benchmarks/step_floor.py` checks its inline floor against it bit for bit.

Where the case does not hold the Trainer keeps its general step; a step the
fast path cannot take (the first, before Adam has state; a rate out of float
range) returns None having changed nothing.  Switch: `Trainer.fast_step`
(class attribute) and the environment, AWNN_FAST_STEP=0 turns it off.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

import torch

from . import native
from .arith import saturated
from .fused import _FUSED_ACTIVATIONS, _scratch_like, importance_constants, one_like
from .layers import AdaptiveMLP
from .lean_adam import _ONE, LeanAdam, enabled as lean_adam_enabled, fused_adam
from .loss import mean_cross_entropy_grad
from .products import affine, weight_grad

if TYPE_CHECKING:
    from .train import Trainer

__all__ = ["FastStep", "SWITCH", "enabled"]

_NATIVE_DTYPES = (torch.float32, torch.float64)  # the C kernels' (awnn/csrc/importance_step.c)
_KEEP_WIDTHS = 8  # widths whose C-pass buffers a layer keeps (a few KB each at SpiralHard's sizes)

SWITCH = "AWNN_FAST_STEP"


def enabled() -> bool:
    """The environment's switch: on unless AWNN_FAST_STEP=0."""
    return os.environ.get(SWITCH, "1") != "0"


class Done(NamedTuple):
    """A fast step's results: the mean cross-entropy (0-d), the ELBO's per-batch
    objective (the cross-entropy plus the rate prior's term, 0-d) and the logits."""

    nll: torch.Tensor
    loss: torch.Tensor
    out: torch.Tensor


class FastStep:
    """The step (see the module docstring) of one Trainer; `FastStep.build(trainer)`
    is None where its case does not hold."""

    @staticmethod
    def build(trainer: "Trainer") -> "FastStep | None":
        model, opt = trainer.model, trainer.optimizer
        if not (enabled() and lean_adam_enabled() and isinstance(model, AdaptiveMLP) and isinstance(opt, LeanAdam)):
            return None
        if trainer._step_with is None or trainer.device.type != "cpu":  # (the written-out step and the quick lean Adam)
            return None
        groups = opt.param_groups
        if (not model.renormalise_importances or not model.prior_on_readout or model.scale_free or not model.fused_forward()
                or not trainer._rate_prior_closed_form or len(groups) != 1 or groups[0]["weight_decay"] != 0.0):
            return None
        return FastStep(trainer)

    def __init__(self, trainer: "Trainer"):
        self.trainer = trainer
        self.model: AdaptiveMLP = trainer.model
        self.opt: LeanAdam = trainer.optimizer
        self.decay = float(trainer._prior_decay)
        act, self.act_backward, self.keep_z = _FUSED_ACTIVATIONS[self.model.activation]
        self.act = act
        modules = self.model._modules
        self.layers = [layer._parameters for layer in modules["layers"]._modules.values()]
        self.ctrls = list(modules["widths_ctrl"]._modules.values())
        self.params = [self.model._parameters["rho"]]
        for p in self.layers:
            self.params += (p["weight"], p["bias"])
        rho = self.params[0]
        self.one, self.scratch = one_like(rho), _scratch_like(rho)
        self._prior_key: tuple | None = None
        self.steps = 0  # steps taken (tests and benchmarks read it)
        # the element-wise work in C where it can be had (awnn/native.py; None: torch ops, the reference)
        self.native = native.kernels() if rho.device.type == "cpu" else None
        n = len(self.ctrls)
        self._bufs: list = [None] * n  # per layer: (key, buffers) of the last width (`_buffers`)
        self._kept: list = [{} for _ in range(n)]  # per layer: the C passes' buffers of the last few widths

    def _buffers(self, l: int, rows: int, d: int, dtype: torch.dtype, scale_h: bool) -> tuple:
        """Layer l's outputs of the C passes at this width: E, p, scaled (rows, D), d rho (1,) and,
        where the next weight is rescaled (not `scale_h`), its gradient G * p (rows, D), else None."""
        key = (rows, d, dtype, scale_h)
        held = self._bufs[l]
        if held is None or held[0] != key:
            # a width moves back and forth by a neuron or two: the last few widths' buffers are kept
            kept = self._kept[l]
            bufs = kept.pop(key, None)
            if bufs is None:
                bufs = (*(torch.empty(shape, dtype=dtype) for shape in (d, d, (rows, d), 1)),
                        None if scale_h else torch.empty((rows, d), dtype=dtype))
            kept[key] = bufs
            if len(kept) > _KEEP_WIDTHS:
                del kept[next(iter(kept))]
            held = self._bufs[l] = (key, bufs)
        return held[1]

    def _rate_terms(self, prior, closed_form: bool) -> tuple[float, float]:
        """(mean, 1 / (std^2 N)) of the rate prior's gradient; scale 0: none."""
        key = self._prior_key
        if key is None or key[0] is not prior or key[1] != closed_form:
            scale = 1.0 / (prior.std * prior.std * self.trainer.n_obs) if closed_form else 0.0
            key = self._prior_key = (prior, closed_form, prior.mean if closed_form else 0.0, scale)
        return key[2], key[3]

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, y: torch.Tensor, prior, closed_form: bool) -> Done | None:
        """One step on a (B, in) batch with (B,) class targets under the rate
        prior `prior` (its gradient in closed form when `closed_form`), or None
        (nothing changed) where this step cannot be taken here."""
        if x.dim() != 2:
            return None
        rho = self.params[0]
        rhos = rho.tolist()
        ctrls = self.ctrls
        consts = [importance_constants(r, c.width, True) for r, c in zip(rhos, ctrls)]
        if None in consts:
            return None
        direct = self.opt.direct(self.params)  # (None before Adam has state: the first step is the general one)
        if direct is None:
            return None
        held = direct[1]
        dtype = held[0].dtype
        if x.dtype != dtype:
            return None
        rate_mean, rate_scale = self._rate_terms(prior, closed_form)
        decay = self.decay
        one, c0_t = self.one, self.scratch
        act, act_backward, keep_z = self.act, self.act_backward, self.keep_z
        layers = self.layers
        n = len(ctrls)
        # forward (Eq. 14): z_0 = x W_0^T + b_0, a_l = act(z_l), z_{l+1} = (a_l * p_l) W_{l+1}^T + b_{l+1}
        first = layers[0]
        z = affine(x, first["weight"], first["bias"])
        saved = []
        native = self.native if dtype in _NATIVE_DTYPES else None
        for l in range(n):
            neg_rate, c0, e = consts[l][:3]
            j1 = ctrls[l].index_views()[1]
            nxt = layers[l + 1]
            weight = nxt["weight"]
            scale_h = z.shape[0] * z.shape[1] <= weight.numel()
            a = act(z)  # (may reuse z's memory)
            m = a if scale_h else weight
            # the C pass (awnn/native.py) where the layout is its: M (a or W) in dense rows
            bufs = None
            if native is not None and j1.dtype is dtype and (a.is_contiguous() if scale_h else weight.stride(1) == 1):
                bufs = self._buffers(l, m.shape[0], a.shape[1], dtype, scale_h)
                big_e, p, scaled = bufs[0], bufs[1], bufs[2]
                native.forward(j1, c0, neg_rate, e, big_e, p, m, scaled)
            else:
                big_e = torch.add(c0_t.fill_(c0), j1, alpha=neg_rate).exp_()  # f / S
                p = torch.add(big_e, one, alpha=e)  # renormalised importances
                scaled = m * p
            z_next = affine(scaled, weight, nxt["bias"]) if scale_h else affine(a, scaled, nxt["bias"])
            saved.append((big_e, p, scaled, a, z if keep_z else None, scale_h, j1, bufs))
            z = z_next
        out = z
        nll, g = mean_cross_entropy_grad(out, y)
        # backward; the weight prior's decay is Adam's (coupled L2, every weight and bias)
        grads: list = [None] * (2 * n + 3)  # rho, then W_0, b_0, ..., W_n, b_n
        grad_rhos: list = [None] * n
        rates: list = [0.0] * n
        for l in range(n - 1, -1, -1):
            big_e, p, scaled, a, z_l, scale_h, j1, bufs = saved[l]
            weight = layers[l + 1]["weight"]
            grads[2 * l + 4] = g.sum(0)
            neg_rate, _, _, s, sigma = consts[l]
            rates[l] = -neg_rate
            # the rate prior's gradient (a host scalar), less the decay the kernel adds to rho
            rate_grad = saturated((-neg_rate - rate_mean) * s * rate_scale - decay * rhos[l], dtype)
            if bufs is not None:  # d rho and (d a or dW) = G * p in one C pass
                grad_rho = bufs[3]
                if scale_h:
                    grad_a = torch.mm(g, weight)  # G (B, D), then d a in place
                    grads[2 * l + 3] = _dense(weight_grad(g, scaled, weight, 0.0))
                    native.backward(grad_a, a, j1, big_e, p, s, sigma, rate_grad, grad_rho, grad_a)
                else:
                    grad_scaled = torch.mm(g.t(), a)  # G (out, D)
                    grad_a = torch.mm(g, scaled)
                    grad_w = bufs[4]
                    native.backward(grad_scaled, weight, j1, big_e, p, s, sigma, rate_grad, grad_rho, grad_w)
                    grads[2 * l + 3] = grad_w
            else:
                if scale_h:  # scaled = a * p
                    grad_scaled = torch.mm(g, weight)  # (B, D)
                    grads[2 * l + 3] = _dense(weight_grad(g, scaled, weight, 0.0))
                    grad_a = grad_scaled * p
                else:  # scaled = W * p
                    grad_scaled = torch.mm(g.t(), a)  # (out, D)
                    grad_a = torch.mm(g, scaled)
                    grads[2 * l + 3] = grad_scaled * p
                dp = torch.add(one, j1, alpha=-s).mul_(big_e).add_(p, alpha=-sigma)  # dp/drho
                grad_rho = torch.mv(grad_scaled * (a if scale_h else weight), dp).sum(0, keepdim=True)
                grad_rho.add_(one, alpha=rate_grad)
            grad_rhos[l] = grad_rho
            g = act_backward(grad_a, z_l, a)
        grads[2] = g.sum(0)
        grads[1] = _dense(weight_grad(g, x, first["weight"], 0.0))
        grads[0] = torch.cat(grad_rhos) if n > 1 else grad_rhos[0]
        _, held, exp_avgs, exp_avg_sqs, steps, counter = direct
        group = direct[0]
        counter.add_(_ONE)
        fused_adam(held, grads, exp_avgs, exp_avg_sqs, steps, group["lr"], group["betas"], decay, group["eps"])
        self.opt.lean_steps += 1
        self.steps += 1
        loss = torch.add(nll, one, alpha=saturated(self.trainer.rate_prior_value(prior, rates), dtype)) if closed_form else nll
        return Done(nll, loss, out)


def _dense(t: torch.Tensor) -> torch.Tensor:
    """t in its parameter's layout (the kernel reads its tensors as dense)."""
    return t if t.is_contiguous() else t.contiguous()
