"""An adaptive MLP's training step with no autograd graph (issue #30).

When the model is one AdaptiveMLP taking its fused path (awnn/fused.py's
`_AdaptiveMLPFunction`, the priors' gradients added by its backward) and
the loss is the mean cross-entropy, autograd has little left to do but
cost time: the step's graph is that one node under four of the loss's,
and `loss.backward()`'s Python wrapper, the engine and the gradient
accumulation took ~15% of a 1-layer step on a CPU.  Here the node's own
forward and backward are called directly, the cross-entropy's gradient
is written out as autograd's formulas form it,

    dL/dz = softmax(z) / B - onehot(y) / B,

and the gradients are set on the parameters as autograd's accumulation
would set them (contiguous, in the parameter's layout).  The Trainer takes
this step on a CPU where it applies (`applies`) unless
`Trainer.written_out_step` is False or it was built with `lean=False`;
autograd is the reference (tests/awnn/test_train_step.py compares the two
in float64), and stays the step on GPUs, where this one has not been
measured.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .fused import _AdaptiveMLPFunction
from .layers import AdaptiveMLP, PriorGrads
from .loss import mean_cross_entropy_grad

__all__ = ["Step", "applies", "step_gradients", "step_grads"]


class Step(NamedTuple):
    """What `step_grads` computed: the mean cross-entropy (0-d), the logits,
    the parameters the gradients belong to (rho, then every weight and bias,
    the model's parameter order) and those gradients (each dense, in its
    parameter's layout), and each adaptive layer's rate softplus(rho) as the
    host computed it for the step (None where it did not: a rate out of
    float range)."""

    nll: torch.Tensor
    out: torch.Tensor
    params: list
    grads: list
    rates: "list[float] | None"


class _Ctx:
    """What `_AdaptiveMLPFunction`'s forward and backward use of autograd's ctx."""

    needs_input_grad = (False,) * 8  # (index 4, the input x: no gradient wanted)

    def save_for_backward(self, *tensors: torch.Tensor) -> None:
        self.saved_tensors = tensors


def applies(model: torch.nn.Module) -> bool:
    """Whether `step_gradients` computes `model`'s step: one AdaptiveMLP on its
    fused path, its parameters used as they are (not scale_free)."""
    return isinstance(model, AdaptiveMLP) and model.fused_forward() and not model.scale_free


@torch.no_grad()
def step_grads(model: AdaptiveMLP, x: torch.Tensor, y: torch.Tensor, prior_grads: PriorGrads | None) -> Step:
    """Forward and backward of `model` (see `applies`) under the mean
    cross-entropy of (B, in) inputs and (B,) class targets, the priors'
    gradients `prior_grads` added by the node; no `.grad` is set (the
    Trainer hands the gradients to its Adam directly: LeanAdam.step_with)."""
    inputs = model.fused_inputs(x, prior_grads)
    ctx = _Ctx()
    out = _AdaptiveMLPFunction.forward(ctx, *inputs)
    nll, grad_out = mean_cross_entropy_grad(out, y)
    grads = _AdaptiveMLPFunction.backward(ctx, grad_out)
    n = 2 * ((len(inputs) - 8) // 3) + 3  # rho, then every weight and bias (inputs: 6 + 2 (L + 1) + L; the index vectors have no gradient)
    params = list(inputs[5 : 5 + n])
    dense = [g if g.is_contiguous() else g.contiguous() for g in grads[5 : 5 + n]]  # (autograd's accumulation: the parameter's layout)
    consts = inputs[2]
    return Step(nll, out, params, dense, None if consts is None else [-c[0] for c in consts])


def step_gradients(model: AdaptiveMLP, x: torch.Tensor, y: torch.Tensor, prior_grads: PriorGrads | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`step_grads`, setting every parameter's `.grad` (replacing it); returns
    (the mean cross-entropy, 0-d; the logits)."""
    step = step_grads(model, x, y, prior_grads)
    for p, g in zip(step.params, step.grads):
        p.grad = g
    return step.nll, step.out
