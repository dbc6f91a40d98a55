"""The stacked MLP's training step with its gradient written out (issue #30):
no autograd graph, the gradients written straight into the stack's flat
gradient buffer.

At the fixed grid's sizes (widths 8-256, batch 32 or 128, one core) a step
of the stacked trainer at N = 1 (the lean loop) was mostly autograd's
bookkeeping: the engine's run and `torch.autograd.backward`'s Python took
~40% of a 1x16@32 step.  The backward of an MLP under the mean
cross-entropy is a handful of products:

    g_L = (softmax(z_L) - onehot(y)) / B               (the mean's 1/B per slice)
    dW_l = h_l^T g_l,   db_l = sum_batch g_l,   g_{l-1} = act'(g_l W_l^T)

computed here with the ops autograd's own formulas call (bmm, sum,
threshold_backward & co., awnn/fused.py's activation table), so the
gradients are autograd's up to the order of a few roundings in the
cross-entropy's gradient; the products a few columns wide are taken
transposed on a CPU (awnn/products.py), as the forward's.  `StackedTrainer` uses it on CPUs unless
`StackedTrainer.manual_gradients` is False (the autograd path, the
reference: tests/awnn/test_stacked_grad.py compares the two in float64 and
float32); on GPUs, where it has not been measured, autograd's step stays.  Measured: `python benchmarks/lean_trials.py` (docs/design.md,
"The lean loop").
"""
from __future__ import annotations

import torch

from .fused import _FUSED_ACTIVATIONS
from .loss import mean_cross_entropy_grad
from .products import stacked_affine, stacked_weight_grad_

__all__ = ["forward_backward", "supported"]

def supported(activations: list[str]) -> bool:
    """Whether every activation of the stack has a written-out backward."""
    return all(a in _FUSED_ACTIVATIONS for a in activations)


@torch.no_grad()
def forward_backward(model, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step's forward and backward of a StackedMLP (awnn/stacked.py)
    on (N, B, in) inputs and (N, B) targets: returns each slice's mean
    cross-entropy (N,) and the logits (N, B, classes), and writes into
    `model.grad` the gradient of the sum of the slices' mean losses (slice
    i's rows: the gradient of its own mean loss), overwriting it."""
    weights, biases, acts = model.weights, model.biases, model._acts
    last = len(weights) - 1
    single = len(acts) == 1
    inputs = [x]  # the input of each layer
    pres: list = []  # each hidden layer's pre-activation, where its backward needs it (or the activations differ)
    h = x
    for l in range(last + 1):
        z = stacked_affine(biases[l], h, weights[l])  # (a read-out of a few classes taken transposed: awnn/products.py)
        if l < last:
            if single:
                name = model.activations[0]
                keep = _FUSED_ACTIVATIONS[name][2]
                h = acts[0][2](z)  # in place where the stack's forward is (then z is h: its backward reads only h)
                pres.append(z if keep else None)
            else:
                h = torch.cat([act(z[a:b]) for a, b, act in acts])
                pres.append(z)
            inputs.append(h)
    out = z
    loss, g = mean_cross_entropy_grad(out, y)  # each slice's mean loss, and d(their sum)/dz
    for l in range(last, -1, -1):
        stacked_weight_grad_(weights[l].grad, inputs[l], g)
        torch.sum(g, 1, keepdim=True, out=biases[l].grad)
        if l:
            grad_h = torch.bmm(g, weights[l].transpose(1, 2))
            if single:
                g = _FUSED_ACTIVATIONS[model.activations[0]][1](grad_h, pres[l - 1], inputs[l])
            else:
                z, a = pres[l - 1], inputs[l]
                g = torch.cat([_FUSED_ACTIVATIONS[model.activations[r0]][1](grad_h[r0:r1], z[r0:r1], a[r0:r1]) for r0, r1, _ in acts])
    return loss, out
