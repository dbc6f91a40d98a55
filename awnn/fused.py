"""The fused autograd nodes of the adaptive MLP: the whole forward pass (Eq. 14)
as one node with its gradient written out, and one rescaled linear layer.
The plain-autograd path in AdaptiveMLP.forward is their reference (tests
compare them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F

from .distributions import RENORM_EPS

if TYPE_CHECKING:
    from .width import AdaptiveWidth


class _ImportanceScaledLinear(torch.autograd.Function):
    """y = (h * f) W^T + b with f = f(j; softplus(rho)), as one autograd node.

    This is the hot path of Eq. 14: layer l+1 reads the activations of
    adaptive layer l rescaled by their importances.  Written as separate
    torch ops it costs five autograd nodes per layer per step (importance,
    rescale, linear, ...), whose bookkeeping outweighs the arithmetic at
    tabular sizes; here it is one node with the gradient written out.
    The rescaling is applied to whichever is smaller, the activations
    (B x D) or the weight's columns (out x D): W (h * f) = (W * f) h.
    Gradients (g = dL/dy, s = sigmoid(rho)):
        dL/dh   = (g W) * f              dL/dW = g^T (h * f)
        dL/db   = sum_batch g            dL/df_j = sum_batch (g W)_j h_j
        dL/drho = sum_j dL/df_j f_j ((1 - s) - s j)
    """

    @staticmethod
    def forward(ctx, h, weight, bias, rho, j):
        f = torch.exp(torch.addcmul(F.logsigmoid(rho), j, F.softplus(rho), value=-1.0))
        shape = h.shape
        h2 = h.reshape(-1, shape[-1])
        scale_h = h2.shape[0] * h2.shape[1] <= weight.numel()
        if scale_h:
            hf = h2 * f
            out = torch.addmm(bias, hf, weight.t()) if bias is not None else hf @ weight.t()
            ctx.save_for_backward(h2, weight, hf, f, rho, j)
        else:
            wf = weight * f
            out = torch.addmm(bias, h2, wf.t()) if bias is not None else h2 @ wf.t()
            ctx.save_for_backward(h2, weight, wf, f, rho, j)
        ctx.scale_h = scale_h
        ctx.shape = shape
        ctx.has_bias = bias is not None
        return out.reshape(*shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_out):
        h2, weight, scaled, f, rho, j = ctx.saved_tensors
        g = grad_out.reshape(-1, grad_out.shape[-1])
        if ctx.scale_h:
            hf = scaled
            grad_hf = g @ weight  # (B, D)
            grad_w = g.t() @ hf
            grad_h = grad_hf * f
            grad_f = (grad_hf * h2).sum(0)
        else:
            wf = scaled
            grad_h = g @ wf
            grad_wf = g.t() @ h2  # (out, D)
            grad_w = grad_wf * f
            grad_f = (grad_wf * weight).sum(0)
        grad_b = g.sum(0) if ctx.has_bias else None
        s = torch.sigmoid(rho)
        gf = grad_f * f
        grad_rho = gf.sum() * (1.0 - s) - torch.dot(gf, j) * s
        return grad_h.reshape(ctx.shape), grad_w, grad_b, grad_rho, None


def _scaled_linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ctrl: "AdaptiveWidth | None") -> torch.Tensor:
    """linear(h * f(ctrl), weight, bias) as one autograd node; ctrl=None means no rescaling."""
    if ctrl is None:
        return F.linear(h, weight, bias)
    if ctrl.renormalise:  # plain autograd ops (the reference of the fused path)
        return F.linear(h * ctrl.importance(), weight, bias)
    return _ImportanceScaledLinear.apply(h, weight, bias, ctrl.rho, ctrl.indices())


def _leaky_relu_(z):
    return F.leaky_relu(z, 0.01, inplace=True)


def _relu6_(z):
    return F.relu6(z, inplace=True)


# activation name -> (forward: pre-activation z -> output (may reuse z's memory),
#                     backward: (grad of the output, z or None, output) -> grad of z,
#                     whether the backward needs z itself).
# The backward ops are those PyTorch's own autograd formulas call, so the
# gradients are bit for bit those of F.relu & co.
_FUSED_ACTIVATIONS: dict[str, tuple[Callable, Callable, bool]] = {
    "relu": (torch.Tensor.relu_, lambda g, z, a: torch.ops.aten.threshold_backward(g, a, 0), False),
    "leaky_relu": (_leaky_relu_, lambda g, z, a: torch.ops.aten.leaky_relu_backward(g, a, 0.01, True), False),
    "relu6": (_relu6_, lambda g, z, a: torch.ops.aten.hardtanh_backward(g, a, 0.0, 6.0), False),
    "tanh": (torch.Tensor.tanh_, lambda g, z, a: torch.ops.aten.tanh_backward(g, a), False),
    "gelu": (F.gelu, lambda g, z, a: torch.ops.aten.gelu_backward(g, z), True),
}


class _AdaptiveMLPFunction(torch.autograd.Function):
    """The whole forward pass of an AdaptiveMLP (Eq. 14) as one autograd node.

        z_0 = x W_0^T + b_0,   a_l = act(z_l),   z_l = (a_{l-1} * f_{l-1}) W_l^T + b_l

    At tabular sizes a training step is dominated by per-operation overhead
    (Python, dispatch, one autograd node per op), not by arithmetic; writing
    the network out as one node with its gradient by hand leaves, per
    adaptive layer, the two matrix products and a few vector ops.  Each
    rescaling is applied to whichever is smaller, the activations (B x D)
    or the next weight's columns (out x D): W (a * f) = (W * f) a.
    Gradients (g = dL/dz_l, s = sigmoid(rho), f_j = s (1 - s)^j):
        dL/da   = (g W) * f  = g (W * f)      dL/dW = g^T (a * f) = (g^T a) * f
        dL/db   = sum_batch g
        dL/drho = sum_j (dL/df_j) f_j ((1 - s) - s j) = sum_j gf_j (1 - s (j + 1)),
        gf_j = dL/df_j f_j = sum (g W)_j (a * f)_j  or  sum (g^T a)_j (W * f)_j.

    The importances come from log f_j = log s - softplus(rho) j with
    log s = logsigmoid(rho) = rho - softplus(rho), i.e.
        log f_j = rho - softplus(rho) (j + 1):  one op less than logsigmoid.

    Renormalised importances (`renorm`, the authors' choice): the layer reads
    p_j = q_j / S with q_j = f_j + 1e-6, S = sum_{i<D} q_i, in place of f_j.
    With G_j = dL/dp_j and w_j = f_j (1 - s (j + 1)) / S (= dq_j/drho / S),
        dL/drho = sum_j G_j dp_j/drho = G . w - (G . p) sum_j w_j,
    and G_j = sum (g W)_j a_j  or  sum (g^T a)_j W_j; the other gradients are
    those above with f replaced by p.

    Inputs: (activation name, renorm, x, rho (L,), W_0, b_0, ..., W_L, b_L,
    j1_0, .., j1_{L-1}) with j1 = 1..D (float), L the number of adaptive layers.
    """

    @staticmethod
    def forward(ctx, activation, renorm, x, rho_vec, *flat):
        n = (len(flat) - 2) // 3  # 2 (n + 1) weights and biases, then n j1
        params, j1s = flat[: 2 * n + 2], flat[2 * n + 2 :]
        rhos, softplus = rho_vec.unbind(), F.softplus(rho_vec).unbind()
        act, _, keep_z = _FUSED_ACTIVATIONS[activation]
        h = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        z = torch.addmm(params[1], h, params[0].t())  # (B, D_0)
        # Intermediates live on ctx (they are neither inputs nor outputs, and
        # unpacking ~4 saved tensors per layer costs more than the arithmetic
        # they save); the inputs go through save_for_backward, whose version
        # check catches a weight changed in place before the backward.
        layers = []  # per adaptive layer l: (f_l, scaled, a_l, z_l or None, scale_h)
        layers_norm = []  # renorm: per adaptive layer (unnormalised f_l, its sum S_l); f_l above is then p_l
        for l in range(n):
            a = act(z)  # (B, D_l); may reuse z's memory
            rho, weight = rhos[l], params[2 * l + 2]
            f = torch.exp(torch.addcmul(rho, j1s[l], softplus[l], value=-1.0))  # (D_l,)
            if renorm:
                q = f + RENORM_EPS
                total = q.sum()
                p = q / total  # (D_l,), sums to 1
                layers_norm.append((f, total))
                f = p
            scale_h = a.shape[0] * a.shape[1] <= weight.numel()
            if scale_h:
                scaled = a * f  # (B, D_l)
                out = torch.addmm(params[2 * l + 3], scaled, weight.t())
            else:
                scaled = weight * f  # (D_{l+1}, D_l)
                out = torch.addmm(params[2 * l + 3], a, scaled.t())
            layers.append((f, scaled, a, z if keep_z else None, scale_h))
            z = out
        ctx.save_for_backward(x, rho_vec, *params)
        ctx.layers, ctx.activation, ctx.j1s = layers, activation, j1s  # j1s: views of constant aranges
        ctx.layers_norm = layers_norm
        return z.reshape(*x.shape[:-1], z.shape[-1]) if x.dim() != 2 else z

    @staticmethod
    def backward(ctx, grad_out):
        _, act_backward, _ = _FUSED_ACTIVATIONS[ctx.activation]
        layers, layers_norm = ctx.layers, ctx.layers_norm
        n = len(layers)
        saved = ctx.saved_tensors
        x, rho_vec, params, j1s = saved[0], saved[1], saved[2:], ctx.j1s
        sig = torch.sigmoid(rho_vec).unbind()
        g = grad_out.reshape(-1, grad_out.shape[-1]) if grad_out.dim() != 2 else grad_out  # dL/dz, (B, out)
        grads: list = [None] * (2 * n + 2)
        grad_rhos: list = [None] * n
        one = _one_like(rho_vec)
        for l in range(n - 1, -1, -1):
            f, scaled, a, z, scale_h = layers[l]
            weight = params[2 * l + 2]
            grads[2 * l + 3] = g.sum(0)
            if scale_h:  # scaled = a * f
                grad_scaled = torch.mm(g, weight)  # (B, D)
                grads[2 * l + 2] = torch.mm(g.t(), scaled)
                grad_a = grad_scaled * f
            else:  # scaled = W * f
                grad_scaled = torch.mm(g.t(), a)  # (out, D)
                grad_a = torch.mm(g, scaled)
                grads[2 * l + 2] = grad_scaled * f
            d = torch.addcmul(one, j1s[l], sig[l], value=-1.0)  # 1 - s (j + 1)
            if layers_norm:  # f is p here; see the class docstring
                f_raw, total = layers_norm[l]
                grad_p = (grad_scaled * (a if scale_h else weight)).sum(0)  # G_j = dL/dp_j
                w = f_raw * d / total
                grad_rhos[l] = torch.dot(grad_p, w) - torch.dot(grad_p, f) * w.sum()
            else:
                gf = (grad_scaled * scaled).sum(0)  # dL/df_j f_j
                grad_rhos[l] = torch.dot(gf, d)
            g = act_backward(grad_a, z, a)
        h = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        grads[1] = g.sum(0)
        grads[0] = torch.mm(g.t(), h)
        grad_x = torch.mm(g, params[0]).reshape(x.shape) if ctx.needs_input_grad[2] else None
        return (None, None, grad_x, torch.stack(grad_rhos), *grads, *([None] * n))


_ONES: dict = {}


def _one_like(t: torch.Tensor) -> torch.Tensor:
    """A shared, never written 0-d tensor 1 of t's dtype and device."""
    key = (t.dtype, t.device)
    one = _ONES.get(key)
    if one is None:
        one = _ONES[key] = torch.ones((), dtype=t.dtype, device=t.device)
    return one
