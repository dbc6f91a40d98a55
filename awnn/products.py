"""Matrix products in the layout a CPU takes fastest: one rule, every path.

On a CPU (MKL, one thread) a product whose result is only a few columns
wide (a classifier's read-out with 2 classes; the weight gradient of that
read-out, D x 2) takes ~2x longer than its transpose, and a batched one
(`bmm`, the stacked trainer's N slices) up to ~5x once a group has a few
slices (`python benchmarks/skinny_products.py`; the batched rule's
thresholds below).  Such a product is taken transposed, (B^T A^T)^T: the
same products and sums, in another order, so values agree to float
rounding.

    affine(x, W, b)              x W^T + b          (B, in) x (out, in)     the adaptive MLP
    weight_grad(g, h, W, decay)  g^T h (+ decay W)  its weight's gradient
    stacked_affine(b, h, W)      h W + b            (N, B, in) x (N, in, out)  the stacked MLP
    stacked_weight_grad_(out, h, g)  out <- h^T g   its weight's gradient, into a buffer view

The AWNN paths (awnn/fused.py, awnn/fast_step.py) and the fixed grid's
stacked paths (awnn/stacked.py, awnn/stacked_grad.py) share the rule, so
that neither arm of a comparison pays for a layout the other avoids (until
2026-12-01 only the AWNN's products were laid out so; docs/results.md).  A GPU
takes every product as written.  Switch: AWNN_SKINNY_PRODUCTS=0 takes every
product as written on a CPU too (the reference layout)."""
from __future__ import annotations

import os

import torch

__all__ = ["SWITCH", "affine", "stacked_affine", "stacked_read_out_transposed", "stacked_weight_grad_", "stacked_weight_grad_transposed",
           "transposed", "weight_grad"]

SWITCH = "AWNN_SKINNY_PRODUCTS"
_ON = os.environ.get(SWITCH, "1") != "0"


def transposed(rows: int, cols: int, t: torch.Tensor) -> bool:
    """Whether a matrix product with a (rows, cols) result (per slice) is taken
    transposed: on a CPU, a result fewer than 8 columns wide and at least
    4x as tall (see the module docstring)."""
    return _ON and cols < 8 and rows >= 4 * cols and not t.is_cuda


def affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x W^T + b, (B, out)."""
    if transposed(x.shape[0], weight.shape[0], x):
        return torch.addmm(bias.unsqueeze(1), weight, x.t()).t()
    return torch.addmm(bias, x, weight.t())


def weight_grad(g: torch.Tensor, h: torch.Tensor, weight: torch.Tensor, decay: float) -> torch.Tensor:
    """g^T h (+ decay W): the gradient of x W^T's W, (out, in), from the
    output's gradient g (B, out) and the input h (B, in)."""
    if transposed(g.shape[1], h.shape[1], g):
        return (torch.addmm(weight.t(), h.t(), g, beta=decay) if decay else torch.mm(h.t(), g)).t()
    return torch.addmm(weight, g.t(), h, beta=decay) if decay else torch.mm(g.t(), h)


# Batched (bmm) products of N slices (N = 1: the lean loop's unfused trials), against
# the same products as written, one thread (`python benchmarks/skinny_products.py`,
# its products_us "forced": the transposed branch at every shape):
# * an AVX-512 Xeon (2026-12-01): the read-out's transpose paid from about
#   N x B x D = 64k multiply-adds at N > 1 (below, the copy of W^T and the
#   strided result cost more than they saved), its weight gradient's from N = 4;
# * an AMD EPYC (Zen 4, 2026-12-02): the read-out's from ~16k at every N, N = 1
#   included (B 128: D 128 1.4x, D 417 2.6x; below ~8k up to 2x slower), its
#   weight gradient's from ~4k (B 128, N = 1: D 64 1.6x, D 417 3.7x) or N = 3.
# The two disagree on the read-out between 16k and 64k; the rule follows the
# EPYC (the machines this project's CI and development run on): there a Xeon
# may pay a few us a product more (AWNN_SKINNY_PRODUCTS=0: all as written).
# Until 2026-12-02 the rule followed the Xeon, N = 1 never transposed, while
# the AWNN's unbatched products of the same shapes were: on the EPYC an
# unfused fixed-grid trial at width 417 paid ~110 us of its ~430 us step for
# a layout its AWNN counterpart avoided.
_STACKED_READ_OUT_WORK = 16384
_STACKED_WEIGHT_GRAD_WORK = 4096
_STACKED_WEIGHT_GRAD_SLICES = 4


def stacked_read_out_transposed(h: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `stacked_affine(b, h, weight)` takes its product transposed:
    (N, B, in) h, (N, in, out) weight."""
    n, rows, inner = h.shape
    return transposed(rows, weight.shape[2], h) and n * rows * inner >= _STACKED_READ_OUT_WORK


def stacked_weight_grad_transposed(h: torch.Tensor, g: torch.Tensor) -> bool:
    """Whether `stacked_weight_grad_(out, h, g)` takes its product transposed:
    (N, B, in) h, (N, B, out) g."""
    n, rows, inner = h.shape
    return transposed(inner, g.shape[2], g) and (n >= _STACKED_WEIGHT_GRAD_SLICES or n * rows * inner >= _STACKED_WEIGHT_GRAD_WORK)


def stacked_affine(bias: torch.Tensor, h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """h W + b for every slice: (N, B, in) h, (N, in, out) W, (N, 1, out) b ->
    (N, B, out).  A read-out a few columns wide over enough work (see above)
    is taken transposed, (W^T h^T + b^T)^T with W^T copied dense (W is a
    strided view of the stack's flat buffer, which MKL takes ~3x slower):
    an (N, B, out) view of an (N, out, B) result."""
    if stacked_read_out_transposed(h, weight):
        return torch.baddbmm(bias.transpose(1, 2), weight.transpose(1, 2).contiguous(), h.transpose(1, 2)).transpose(1, 2)
    return torch.baddbmm(bias, h, weight)


def stacked_weight_grad_(out: torch.Tensor, h: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """out <- h^T g for every slice: the gradient of h W's W, (N, in, out),
    from the input h (N, B, in) and the output's gradient g (N, B, out),
    written into `out` (a view of the stack's flat gradient).  A gradient a
    few columns wide over enough work or slices (see above) is taken
    transposed: computed as (N, out, in), then copied into `out`."""
    if stacked_weight_grad_transposed(h, g):
        return out.copy_(torch.bmm(g.transpose(1, 2), h).transpose(1, 2))
    return torch.bmm(h.transpose(1, 2), g, out=out)
