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

import torch

from .fused import _AdaptiveMLPFunction
from .layers import AdaptiveMLP, PriorGrads
from .loss import mean_cross_entropy_grad

__all__ = ["applies", "step_gradients"]


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
def step_gradients(model: AdaptiveMLP, x: torch.Tensor, y: torch.Tensor, prior_grads: PriorGrads | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward of `model` (see `applies`) under the mean
    cross-entropy of (B, in) inputs and (B,) class targets, the priors'
    gradients `prior_grads` added by the node.  Sets every parameter's
    `.grad` (replacing it) and returns (the mean cross-entropy, 0-d; the logits)."""
    inputs = model.fused_inputs(x, prior_grads)
    ctx = _Ctx()
    out = _AdaptiveMLPFunction.forward(ctx, *inputs)
    nll, grad_out = mean_cross_entropy_grad(out, y)
    grads = _AdaptiveMLPFunction.backward(ctx, grad_out)
    for p, g in zip(inputs[5:], grads[5:]):  # rho, then every weight and bias (the index vectors have none)
        if g is not None:
            p.grad = g if g.is_contiguous() else g.contiguous()  # (autograd's accumulation: the parameter's dense layout)
    return nll, out
