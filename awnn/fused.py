"""The fused autograd nodes of the adaptive MLP: the whole forward pass (Eq. 14)
as one node with its gradient written out, and one rescaled linear layer.
The plain-autograd path in AdaptiveMLP.forward is their reference (tests
compare them).  Also what the whole-network node takes: the host-side
scalars of the importances (`importance_constants`) and the priors'
closed-form gradients it adds to its own (`PriorGrads`; issue #30: a
training step at tabular sizes is dominated by the number of small ops)."""
from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Callable, NamedTuple

import torch
import torch.nn.functional as F

from .arith import saturated
from .distributions import RENORM_EPS
from .products import affine, weight_grad

if TYPE_CHECKING:
    from .width import AdaptiveWidth


class PriorGrads(NamedTuple):
    """Closed-form gradients of the ELBO's prior terms (awnn/loss.py) that
    `_AdaptiveMLPFunction` adds to the gradients it returns, so that a trainer
    needs no pass of its own over the gradients after the backward:

        weight_decay  d/dtheta of -log p(theta) / N = theta / (sigma_theta^2 N),
                      for the weights and biases under the prior (`decay_layers`:
                      the first layers, the read-out included or not);
        rate_mean, rate_scale
                      d/drho of -log p(rate) / N = (rate - mean) sigmoid(rho) / (std^2 N)
                      for a Gaussian p(rate) = N(mean, std^2), rate_scale =
                      1 / (std^2 N); rate_scale 0: no rate term."""

    weight_decay: float = 0.0
    decay_layers: int = 0
    rate_mean: float = 0.0
    rate_scale: float = 0.0


def importance_constants(rho: float, width: int, renorm: bool) -> tuple[float, float, float, float, float] | None:
    """The scalars of one layer's importances for `_AdaptiveMLPFunction`, from
    the host value of its rho (float64), or None where they are not finite.

    With rate = softplus(rho), s = sigmoid(rho) = 1 - e^{-rate} and j1 = j + 1:
        f_j = exp(rho - rate j1)                       (Eq. 12)
        E_j = exp(c0 - rate j1) = f_j / S,  p_j = E_j + e    (renormalised)
    where S = sum_{j<D} (f_j + 1e-6) = 1 - e^{-rate D} + D 1e-6 (a geometric
    sum), c0 = rho - log S and e = 1e-6 / S; without renormalisation S = 1,
    e = 0 and p = E = f.  The derivative the backward needs is
        dp_j/drho = E_j (1 - sigma - s j1) - e sigma,
    sigma = (dS/drho) / S = D s e^{-rate D} / S (0 without renormalisation).
    Returns (-rate, c0, e, s, sigma).  Computing these on the host leaves
    three vector ops for p and three for its derivative per layer and step,
    instead of a dozen tiny tensor ops (softplus, sigmoid, sums, ...); the
    geometric sums agree with the summed ones up to rounding."""
    rate = math.log1p(math.exp(rho)) if rho < 30.0 else rho  # softplus
    log_s = -(math.log1p(math.exp(-rho)) if rho > -30.0 else -rho)  # logsigmoid(rho) = rho - softplus(rho)
    if not (rate > 0.0 and math.isfinite(rate) and math.isfinite(log_s)):
        return None
    s = math.exp(log_s)
    if not renorm:
        return (-rate, rho, 0.0, s, 0.0)
    tail = math.exp(-rate * width)  # (1 - s)^D, the mass beyond the kept neurons
    total = -math.expm1(-rate * width) + width * RENORM_EPS
    return (-rate, rho - math.log(total), RENORM_EPS / total, s, width * s * tail / total)


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

    `consts`: per adaptive layer the host scalars of `importance_constants`
    (rate, S, sigmoid(rho), ... from the host value of rho), or None.  With
    them the rate-dependent scalars cost no tensor op: p = exp(c0 - rate j1)
    (+ e) and dp/drho = E (1 - sigma - s j1) - e sigma (S and its
    derivative as geometric sums: equal to the summed ones up to rounding).
    Without them (a rho on a GPU that the host has not read since it last
    changed) everything is computed from the rho tensor, as above.

    `priors`: a PriorGrads whose gradients are added to those returned (the
    weight decay as the beta of the weight gradient's matrix product where
    there is one), or None.

    Inputs: (activation name, renorm, consts, priors, x, rho (L,), W_0, b_0, ...,
    W_L, b_L, j1_0, .., j1_{L-1}) with j1 = 1..D (float), L the number of
    adaptive layers.
    """

    @staticmethod
    def forward(ctx, activation, renorm, consts, priors, x, rho_vec, *flat):
        n = (len(flat) - 2) // 3  # 2 (n + 1) weights and biases, then n j1
        params, j1s = flat[: 2 * n + 2], flat[2 * n + 2 :]
        if consts is None:
            softplus_vec = F.softplus(rho_vec)
            rhos, softplus = rho_vec.unbind(), softplus_vec.unbind()
            ctx.softplus = softplus_vec
        else:
            one, c0_t = one_like(rho_vec), _scratch_like(rho_vec)
        act, _, keep_z = _FUSED_ACTIVATIONS[activation]
        h = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        z = affine(h, params[0], params[1])  # (B, D_0)
        # Intermediates live on ctx (they are neither inputs nor outputs, and
        # unpacking ~4 saved tensors per layer costs more than the arithmetic
        # they save); the inputs go through save_for_backward, whose version
        # check catches a weight changed in place before the backward.
        layers = []  # per adaptive layer l: (p_l, scaled, a_l, z_l or None, scale_h, extra_l)
        for l in range(n):
            a = act(z)  # (B, D_l); may reuse z's memory
            weight = params[2 * l + 2]
            if consts is not None:
                # (scalars enter as alpha: a Python number as an operand costs a conversion op)
                neg_rate, c0, e = consts[l][:3]
                extra = torch.add(c0_t.fill_(c0), j1s[l], alpha=neg_rate).exp_()  # E = f / S, (D_l,)
                p = torch.add(extra, one, alpha=e) if renorm else extra
            else:
                f = torch.exp(torch.addcmul(rhos[l], j1s[l], softplus[l], value=-1.0))  # (D_l,)
                extra = None
                if renorm:
                    q = f + RENORM_EPS
                    total = q.sum()
                    extra = (f, total)  # the unnormalised f_l and its sum S_l
                    f = q / total  # (D_l,), sums to 1
                p = f
            scale_h = a.shape[0] * a.shape[1] <= weight.numel()
            if scale_h:
                scaled = a * p  # (B, D_l)
                out = affine(scaled, weight, params[2 * l + 3])
            else:
                scaled = weight * p  # (D_{l+1}, D_l)
                out = affine(a, scaled, params[2 * l + 3])
            layers.append((p, scaled, a, z if keep_z else None, scale_h, extra))
            z = out
        ctx.save_for_backward(x, rho_vec, *params)
        ctx.layers, ctx.activation, ctx.j1s = layers, activation, j1s  # j1s: views of constant aranges
        ctx.renorm, ctx.consts, ctx.priors = renorm, consts, priors
        return z.reshape(*x.shape[:-1], z.shape[-1]) if x.dim() != 2 else z

    @staticmethod
    def backward(ctx, grad_out):
        _, act_backward, _ = _FUSED_ACTIVATIONS[ctx.activation]
        layers, renorm, consts, priors = ctx.layers, ctx.renorm, ctx.consts, ctx.priors
        n = len(layers)
        saved = ctx.saved_tensors
        x, rho_vec, params, j1s = saved[0], saved[1], saved[2:], ctx.j1s
        decay, decay_layers, rate_mean, rate_scale = priors if priors is not None else (0.0, 0, 0.0, 0.0)
        if consts is None:
            sig_vec = torch.sigmoid(rho_vec)
            sig = sig_vec.unbind()
        g = grad_out.reshape(-1, grad_out.shape[-1]) if grad_out.dim() != 2 else grad_out  # dL/dz, (B, out)
        grads: list = [None] * (2 * n + 2)
        grad_rhos: list = [None] * n
        one = one_like(rho_vec)
        for l in range(n - 1, -1, -1):
            p, scaled, a, z, scale_h, extra = layers[l]
            weight, bias = params[2 * l + 2], params[2 * l + 3]
            wd = decay if l + 1 < decay_layers else 0.0  # (layer l + 1 is under the weight prior)
            grads[2 * l + 3] = g.sum(0).add_(bias, alpha=wd) if wd else g.sum(0)
            if scale_h:  # scaled = a * p
                grad_scaled = torch.mm(g, weight)  # (B, D)
                grads[2 * l + 2] = weight_grad(g, scaled, weight, wd)
                grad_a = grad_scaled * p
            else:  # scaled = W * p
                grad_scaled = torch.mm(g.t(), a)  # (out, D)
                grad_a = torch.mm(g, scaled)
                grads[2 * l + 2] = (grad_scaled * p).add_(weight, alpha=wd) if wd else grad_scaled * p
            if consts is not None:  # dL/drho = sum_j G_j dp_j/drho, G_j = dL/dp_j = sum (g W)_j a_j or sum (g^T a)_j W_j, as (1,)
                s, sigma = consts[l][3:]
                d = torch.add(one, j1s[l], alpha=-s)  # 1 - s (j + 1)
                if renorm:  # dp/drho = E d - sigma p (see importance_constants)
                    dp = d.mul_(extra).add_(p, alpha=-sigma)
                    grad_rhos[l] = torch.mv(grad_scaled * (a if scale_h else weight), dp).sum(0, keepdim=True)
                else:  # dp/drho = p d
                    grad_rhos[l] = torch.mv(grad_scaled * scaled, d).sum(0, keepdim=True)
                if rate_scale:  # the rate prior's gradient, a host scalar: (rate - mean) s / (std^2 N)
                    grad_rhos[l].add_(one, alpha=saturated((-consts[l][0] - rate_mean) * s * rate_scale, one.dtype))
            else:
                d = torch.addcmul(one, j1s[l], sig[l], value=-1.0)  # 1 - s (j + 1)
                if renorm:  # p is the renormalised f here; see the class docstring
                    f_raw, total = extra
                    grad_p = (grad_scaled * (a if scale_h else weight)).sum(0)  # G_j = dL/dp_j
                    w = f_raw * d / total
                    grad_rhos[l] = torch.dot(grad_p, w) - torch.dot(grad_p, p) * w.sum()
                else:
                    gf = (grad_scaled * scaled).sum(0)  # dL/df_j f_j
                    grad_rhos[l] = torch.dot(gf, d)
            g = act_backward(grad_a, z, a)
        h = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        wd = decay if decay_layers > 0 else 0.0
        grads[1] = g.sum(0).add_(params[1], alpha=wd) if wd else g.sum(0)
        grads[0] = weight_grad(g, h, params[0], wd)
        grad_x = torch.mm(g, params[0]).reshape(x.shape) if ctx.needs_input_grad[4] else None
        if consts is not None:  # (each entry has shape (1,))
            grad_rho = torch.cat(grad_rhos) if n > 1 else grad_rhos[0]
        else:
            grad_rho = torch.stack(grad_rhos) if n > 1 else grad_rhos[0].reshape(1)
            if rate_scale:  # the rate prior's gradient (see above), from the tensors
                grad_rho = torch.addcmul(grad_rho, ctx.softplus - rate_mean, sig_vec, value=rate_scale)
        return (None, None, None, None, grad_x, grad_rho, *grads, *([None] * n))


_ONES: dict = {}
_SCRATCH: dict = {}


def one_like(t: torch.Tensor) -> torch.Tensor:
    """A shared, never written 0-d tensor 1 of t's dtype and device: with it a
    scalar c enters an op as its alpha, torch.add(x, one, alpha=c), which
    skips the conversion op a Python number operand costs (x + c)."""
    key = (t.dtype, t.device)
    one = _ONES.get(key)
    if one is None:
        with torch.inference_mode(False):  # (usable outside inference mode whatever mode made it)
            one = _ONES[key] = torch.ones((), dtype=t.dtype, device=t.device)
    return one


def _scratch_like(t: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor of t's dtype and device, one per thread, to `fill_` with a
    scalar and use at once (the next fill overwrites it; never saved for
    backward)."""
    key = (t.dtype, t.device, threading.get_ident())
    scratch = _SCRATCH.get(key)
    if scratch is None:
        with torch.inference_mode(False):
            scratch = _SCRATCH[key] = torch.zeros((), dtype=t.dtype, device=t.device)
    return scratch
