"""Adaptive-width layers: the width controller, a resizable linear layer and
the adaptive MLP (paper section 3.1, Eq. 14, Algorithm 1).

    h_j = act(W_j . h_prev + b_j) * f(j),   j < D = ceil(-ln(1-k)/rate)

Widths change only in `update_width`, which the trainer calls every
`width_update_interval` steps; `forward` never changes them, so evaluation
(`model.eval()`, `torch.no_grad()`) cannot alter the network.
"""
from __future__ import annotations

import copy
import math
import warnings
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .distributions import RENORM_EPS, WIDTH_RULES, importance_from_rho, renormalise, rho_from_rate, width_from_rate
from .init import DISTRIBUTIONS, GROW_INITS, INITS, fill_, init_std
from .optim import CapacityBuffer, grow_capacity, resize_optimizer_state

__all__ = [
    "ACTIVATIONS",
    "resolve_activation",
    "AdaptiveWidth",
    "ResizableLinear",
    "AdaptiveMLP",
    "FixedMLP",
    "adaptive_modules",
    "model_widths",
    "named_model_widths",
    "MaxWidthReached",
]

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "leaky_relu": F.leaky_relu,
    "relu6": F.relu6,
    "tanh": torch.tanh,
    "gelu": F.gelu,
}


def resolve_activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Could not resolve activation {name!r} among choices {sorted(ACTIVATIONS)}.") from None


class MaxWidthReached(RuntimeWarning):
    """A layer wanted more neurons than `max_width`; it was capped."""


class AdaptiveWidth(nn.Module):
    """The width of one adaptive layer: rate = softplus(rho), D, f(j).

    On its own it owns its `rho` parameter.  Inside an AdaptiveMLP the rho's
    of all layers are one vector parameter of the MLP (`AdaptiveMLP.rho`, one
    tensor for the optimiser instead of one per layer) and `ctrl.rho` is a
    view of this layer's entry."""

    def __init__(self, rate: float, quantile_k: float, max_width: int, width_rule: str = "ceil", renormalise: bool = False, rate_min: float = 0.0):
        super().__init__()
        if not 0.0 < quantile_k < 1.0:
            raise ValueError(f"quantile_k must lie in (0, 1), but got {quantile_k=}.")
        if max_width < 1:
            raise ValueError(f"max_width must be at least 1, but got {max_width=}.")
        if width_rule not in WIDTH_RULES:
            raise ValueError(f"Could not resolve width_rule {width_rule!r} among choices {list(WIDTH_RULES)}.")
        if not rate_min >= 0.0:
            raise ValueError(f"rate_min cannot be negative, but got {rate_min=}.")
        self.initial_rate = float(rate)
        self.quantile_k = float(quantile_k)
        self.max_width = int(max_width)
        self.width_rule = width_rule
        self.renormalise = bool(renormalise)  # importances divided by their sum over the D kept neurons
        self.rate_min = float(rate_min)  # the rate is projected back to this bound (0: none)
        self.rho = nn.Parameter(torch.empty(()))
        self.width = 1
        self.capped = False  # the last update wanted more than max_width
        self.register_buffer("_arange", torch.arange(16, dtype=torch.float32), persistent=False)
        self._index_cache = None  # (arange, {width: (j, j + 1)}) of index_views
        self.reset_parameters()

    def __getattr__(self, name: str):
        if name == "rho":
            owner = self.__dict__.get("_owner")
            if owner is not None:  # adopted by an AdaptiveMLP: a view of its rho vector
                return owner._parameters["rho"][self.__dict__["_slot"]]
        return super().__getattr__(name)

    def _adopt(self, owner: nn.Module, slot: int) -> None:
        """Hand this layer's rho over to entry `slot` of `owner.rho`."""
        del self._parameters["rho"]
        self.__dict__["_owner"] = owner  # not a submodule: kept out of nn.Module's registries
        self.__dict__["_slot"] = slot

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.rho.fill_(rho_from_rate(self.initial_rate))
        self.width, self.capped = self.target_width()
        if self.capped:  # reported like a cap reached during training, never silent
            warnings.warn(f"an adaptive layer starts at max_width={self.max_width}: its starting rate {self.initial_rate} wants more neurons", MaxWidthReached, stacklevel=2)

    def rate(self) -> torch.Tensor:
        return F.softplus(self.rho)

    def target_width(self) -> tuple[int, bool]:
        """(D from the current rate, capped at max_width; whether it was capped)."""
        return self.width_for_rho(self.rho.item())

    def width_for_rho(self, rho: float) -> tuple[int, bool]:
        """`target_width` for the value `rho` of this layer's rho parameter."""
        if math.isnan(rho):
            raise FloatingPointError("the rate of an adaptive layer became NaN (the run diverged)")
        rate = math.log1p(math.exp(rho)) if rho < 30 else rho  # softplus, in Python: no tensor op
        if not 0.0 < rate < math.inf or math.isinf(-math.log1p(-self.quantile_k) / rate):
            # softplus(rho) underflowed to 0 or so close that D overflows (rho below
            # about -708), or rho is infinite: no stable run gets there (its float32
            # importances died long before), so this is divergence, not a request
            # for max_width (nor, for rho=+inf, for it).
            raise FloatingPointError(f"the rate of an adaptive layer left the representable range (rho={rho:g}; the run diverged)")
        if rate < self.rate_min:  # (update_width projects rho back to the bound)
            rate = self.rate_min
        d = width_from_rate(rate, self.quantile_k, self.width_rule)
        if d > self.max_width:
            return self.max_width, True
        return d, False

    def indices(self) -> torch.Tensor:
        """j = 0..width-1 as floats (a view of a cached arange)."""
        width = self.width
        if self._arange.numel() < width:
            self._arange = torch.arange(grow_capacity(width, self._arange.numel(), None), dtype=self.rho.dtype, device=self.rho.device)
        return self._arange[:width]

    def index_views(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(j, j + 1) for j = 0..width-1 as floats: two views of a cached arange.
        A width moves back and forth by a neuron or two, so the views of the
        last few widths are kept (making them costs two slicing ops); dropped
        when the arange changes (grown, or converted by .to())."""
        arange = self._buffers["_arange"]
        cache = self._index_cache
        if cache is not None and cache[0] is arange:
            views = cache[1].get(self.width)
            if views is not None:
                return views
        width = self.width
        if arange.numel() < width + 1:
            arange = self._arange = torch.arange(grow_capacity(width + 1, arange.numel(), None), dtype=self.rho.dtype, device=self.rho.device)
        if cache is None or cache[0] is not arange:
            cache = self._index_cache = (arange, {})
        elif len(cache[1]) >= 16:
            del cache[1][next(iter(cache[1]))]  # the oldest
        views = cache[1][width] = (arange[:width], arange[1 : width + 1])
        return views

    def importance(self, width: int | None = None) -> torch.Tensor:
        """f(j) for j < width (default: the current width), differentiable in rho;
        renormalised over those `width` neurons when `renormalise` is set."""
        width = self.width if width is None else width
        if self._arange.numel() < width:
            self._arange = torch.arange(grow_capacity(width, self._arange.numel(), None), dtype=self.rho.dtype, device=self.rho.device)
        f = importance_from_rho(self.rho, self._arange[:width])
        return renormalise(f) if self.renormalise else f

    def importance_sq_sum(self, width: int | None = None) -> float:
        with torch.no_grad():
            return float(self.importance(width).pow(2).sum())

    def get_extra_state(self):
        return {"width": self.width}

    def set_extra_state(self, state) -> None:
        self.width = int(state["width"])

    def extra_repr(self) -> str:
        extra = (f", width_rule={self.width_rule!r}" if self.width_rule != "ceil" else "") + (", renormalise=True" if self.renormalise else "")
        extra += f", rate_min={self.rate_min}" if self.rate_min else ""
        return f"width={self.width}, quantile_k={self.quantile_k}, max_width={self.max_width}{extra}"


class ResizableLinear(nn.Module):
    """y = x W^T + b whose W and b are views of capacity buffers.

    `resize` changes the number of output rows and/or input columns in
    place; the Parameter objects stay the same so an optimiser built before
    the resize keeps working.  Loading a state dict with other shapes
    resizes the layer first, so checkpoints carry their widths.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self._wbuf = CapacityBuffer(self.weight.data, self.weight.shape)
        self.weight.data = self._wbuf.view()
        self._bbuf = None
        if self.bias is not None:
            self._bbuf = CapacityBuffer(self.bias.data, self.bias.shape)
            self.bias.data = self._bbuf.view()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def resize(
        self,
        out_features: int,
        in_features: int,
        fill_rows: Callable[[torch.Tensor], None],
        fill_cols: Callable[[torch.Tensor], None],
        optimizer: torch.optim.Optimizer | None = None,
        out_limit: int | None = None,
        in_limit: int | None = None,
        fill_bias: Callable[[torch.Tensor], None] | None = None,
        reset_state: bool = False,
    ) -> None:
        """Resize to (out_features, in_features), keeping surviving weights and
        their optimiser state; new rows/columns are filled by the fill functions,
        new bias entries by `fill_bias` (default zero), new optimiser state is
        zero.  `reset_state` zeroes the optimiser state of this layer's weight
        and bias instead, step count included (as if the layer were
        re-created: Adam restarts both)."""
        old = (self.out_features, self.in_features)
        new = (int(out_features), int(in_features))
        if new == old:
            return
        if torch.is_grad_enabled():
            with torch.no_grad():
                self._resize(new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias, reset_state)
        else:  # (no second no_grad context: a width update makes several resizes)
            self._resize(new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias, reset_state)

    def _resize(self, new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias=None, reset_state=False) -> None:
        """`resize` to `new` (out, in), under no_grad."""
        old = (self.out_features, self.in_features)
        params = self._parameters
        weight, bias = params["weight"], params["bias"]
        wbuf = self._wbuf
        if not wbuf.owns(weight):  # e.g. after .to(device) or load_state_dict
            wbuf = self._wbuf = CapacityBuffer(weight.data, weight.shape)
        cap = wbuf.cap
        cap = (
            cap[0] if new[0] <= cap[0] else grow_capacity(new[0], cap[0], out_limit),
            cap[1] if new[1] <= cap[1] else grow_capacity(new[1], cap[1], in_limit),
        )
        _rebind(weight, wbuf.resize(new, cap, fill_rows, fill_cols))
        resize_optimizer_state(optimizer, weight, old, new, cap)
        if bias is not None and new[0] != old[0]:
            bbuf = self._bbuf
            if not bbuf.owns(bias):
                bbuf = self._bbuf = CapacityBuffer(bias.data, bias.shape)
            _rebind(bias, bbuf.resize(new[:1], cap[:1], fill_bias or _zero))
            resize_optimizer_state(optimizer, bias, old[:1], new[:1], cap[:1])
        if reset_state and optimizer is not None:
            # the state a fresh optimiser would create (Adam: step 0, zero
            # moments), written in place: no re-allocation, the capacity
            # buffers stay (one fused kernel; a width moves at ~1/3 of steps)
            state = optimizer.state
            tensors = [v for p in (weight, bias) if p is not None and p in state for v in state[p].values() if torch.is_tensor(v)]
            if tensors:
                torch._foreach_zero_(tensors)
        _set_plain(self, "out_features", new[0])
        _set_plain(self, "in_features", new[1])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        w = state_dict.get(prefix + "weight")
        if w is not None and tuple(w.shape) != (self.out_features, self.in_features):
            self.resize(w.shape[0], w.shape[1], _zero, _zero)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _zero(t: torch.Tensor) -> None:
    t.zero_()


def _standard_normal(t: torch.Tensor) -> None:
    t.normal_(0.0, 1.0)


BIAS_INITS = ("zero", "uniform")


def _grow_filler(std: float, distribution: str) -> Callable[[torch.Tensor], None]:
    """init.fill_(t, std, distribution) for the new weights of a resize, which
    runs under no_grad already (the gaussian case without fill_'s own context)."""
    if distribution == "gaussian":
        return lambda t: t.normal_(0.0, std)
    return lambda t: fill_(t, std, distribution)


def _set_plain(module: nn.Module, name: str, value) -> None:
    """module.name = value for a plain (not a parameter, buffer or module)
    attribute, without nn.Module.__setattr__'s checks of all three registries:
    width updates write several of these at every step that moves a width."""
    module.__dict__[name] = value


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


_DTYPE_TOGGLE: dict = {}


def _rebind(param: nn.Parameter, view: torch.Tensor) -> None:
    """Make `param` (the same Python object) a Parameter over `view`.

    Assigning `param.data` a tensor of another shape leaves autograd's cached
    gradient accumulator with the old shape whenever a graph from the last
    step is still referenced (the next backward then fails).  Assigning data
    of another dtype first makes autograd drop that cache (set_data resets
    the accumulator on a type change), so the next backward builds one with
    the new shape.  Every holder of the object (the optimiser's param groups
    and state keys) stays valid.  ~3 us, against ~9 us for
    torch.utils.swap_tensors, and a width update makes several of these."""
    key = (view.device, view.dtype)
    other = _DTYPE_TOGGLE.get(key)
    if other is None:
        other = _DTYPE_TOGGLE[key] = torch.empty(0, dtype=torch.float64 if view.dtype != torch.float64 else torch.float32, device=view.device)
    param.data = other
    param.data = view


class AdaptiveMLP(nn.Module):
    """An MLP whose every hidden layer has an adaptive width (AWNN).

    Args:
        in_features, out_features: input and output sizes (fixed).
        hidden_layers: number of adaptive hidden layers (>= 1).
        rate: starting rate of every layer's discretised exponential.
        quantile_k: k of the quantile function; D = ceil(-ln(1-k)/rate).
        activation: one of ACTIVATIONS.
        init: 'kaiming' or 'kaiming+' for the initial weights.
        init_distribution: 'gaussian' or 'uniform'.
        grow_init: how new neurons' weights are drawn: 'normal' (standard
            normal, as in the paper) or 'kaiming+'.
        max_width: no layer grows beyond this; reaching it is reported.
        prior_on_readout: also put the read-out layer under p(theta).
        width_rule: 'ceil' (D = ceil(-ln(1-k)/rate), the paper's text) or
            'floor+2' (floor(-ln(1-k)/rate) + 2, what its authors ran).
        renormalise_importances: rescale by p = (f + 1e-6) / sum over the D
            kept neurons (the authors) instead of f (the paper's text);
            kaiming+ then uses sum p^2.
        rate_min: lower bound on every rate (0: none); a rate below it is
            projected back at the next width update.
        reset_optimizer_on_resize: a width change drops the optimiser state
            of the two layers it touches (the authors re-create them) instead
            of keeping the surviving entries' state.
        bias_init: 'zero', or 'uniform': U(+-1/sqrt(fan_in)) (PyTorch's
            default) at the start and N(0, 1) for new neurons (the authors).
        scale_free: store every weight fed by an adaptive layer in units of
            its kaiming+ scale c = sqrt(2 / sum_j p_j^2) (p: the importances
            of the layer feeding it): the parameter V holds W / c and the
            forward uses W = c V, with c recomputed at every forward from
            the current rates and treated as a constant (no gradient through
            it: the rates' gradient is the one of the plain model).  The
            same network at the start and after every growth (V's new
            entries are drawn at std / c), the same weight prior on W
            (`prior_sq_scales`); only the optimiser's coordinates change:
            Adam moves W by ~lr c per step instead of ~lr.  Beyond the paper
            (issue #14); off in both profiles.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden_layers: int = 1,
        rate: float = 0.01,
        quantile_k: float = 0.9,
        activation: str = "relu",
        init: str = "kaiming+",
        init_distribution: str = "gaussian",
        grow_init: str = "normal",
        max_width: int = 4096,
        prior_on_readout: bool = False,
        width_rule: str = "ceil",
        renormalise_importances: bool = False,
        rate_min: float = 0.0,
        reset_optimizer_on_resize: bool = False,
        bias_init: str = "zero",
        scale_free: bool = False,
    ):
        super().__init__()
        if bias_init not in BIAS_INITS:
            raise ValueError(f"Could not resolve bias_init {bias_init!r} among choices {list(BIAS_INITS)}.")
        if hidden_layers < 1:
            raise ValueError(f"hidden_layers must be at least 1, but got {hidden_layers=}.")
        if init not in INITS:
            raise ValueError(f"Could not resolve init {init!r} among choices {list(INITS)}.")
        if init_distribution not in DISTRIBUTIONS:
            raise ValueError(f"Could not resolve init_distribution {init_distribution!r} among choices {list(DISTRIBUTIONS)}.")
        if grow_init not in GROW_INITS:
            raise ValueError(f"Could not resolve grow_init {grow_init!r} among choices {list(GROW_INITS)}.")
        self.in_features = in_features
        self.out_features = out_features
        self.activation = activation
        self._act = resolve_activation(activation)
        self.init = init
        self.init_distribution = init_distribution
        self.grow_init = grow_init
        self.frozen = False  # a truncated copy never changes width
        self.prior_on_readout = prior_on_readout
        self.renormalise_importances = bool(renormalise_importances)
        self.reset_optimizer_on_resize = bool(reset_optimizer_on_resize)
        self.bias_init = bias_init
        self.scale_free = bool(scale_free)
        self.widths_ctrl = nn.ModuleList(
            AdaptiveWidth(rate, quantile_k, max_width, width_rule, renormalise_importances, rate_min) for _ in range(hidden_layers)
        )
        # every layer's rho in one parameter: one tensor for the optimiser's
        # multi-tensor step, not one per layer (each costs ~10 us a step on a CPU)
        self.rho = nn.Parameter(torch.stack([c.rho.detach() for c in self.widths_ctrl]))
        for l, ctrl in enumerate(self.widths_ctrl):
            ctrl._adopt(self, l)
        dims = [in_features] + [w.width for w in self.widths_ctrl] + [out_features]
        self.layers = nn.ModuleList(ResizableLinear(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
        self.reset_parameters()

    # ----------------------------------------------------------------- basics
    @property
    def hidden_layers(self) -> int:
        return len(self.widths_ctrl)

    @property
    def widths(self) -> list[int]:
        return [w.width for w in self.widths_ctrl]

    def reset_parameters(self) -> None:
        for ctrl in self.widths_ctrl:
            ctrl.reset_parameters()
        self.set_widths([c.width for c in self.widths_ctrl])
        with torch.no_grad():
            scales = self.weight_scales()
            for l, layer in enumerate(self.layers):
                std = self._layer_std(l, self.init) / scales[l]
                fill_(layer.weight, std, self.init_distribution)
                if self.bias_init == "uniform":
                    bound = 1.0 / math.sqrt(layer.in_features)
                    layer.bias.uniform_(-bound, bound)
                else:
                    layer.bias.zero_()

    def _layer_std(self, l: int, init: str) -> float:
        """kaiming(+) std of layer l (fed by adaptive layer l-1 when l > 0)."""
        fan_in = self.layers[l].in_features
        sq = self.widths_ctrl[l - 1].importance_sq_sum() if l > 0 else None
        return init_std(init, fan_in, sq)

    def weight_scales(self, dims: Sequence[int] | None = None) -> list[float]:
        """c_l with W_l = c_l x (layer l's weight parameter): 1.0 everywhere
        unless `scale_free`, then the kaiming+ std of every layer fed by an
        adaptive layer (l > 0), for the current widths or the hidden widths
        `dims[1:-1]`."""
        n = len(self.widths_ctrl)
        if not self.scale_free:
            return [1.0] * (n + 1)
        ctrls = list(self._modules["widths_ctrl"]._modules.values())
        widths = [c.width for c in ctrls] if dims is None else list(dims[1:-1])
        return [1.0] + [init_std("kaiming+", widths[l], ctrls[l].importance_sq_sum(widths[l])) for l in range(n)]

    def effective_weights(self) -> list[torch.Tensor]:
        """Every layer's weight W as the network uses it (c_l V_l when `scale_free`)."""
        return [layer.weight * c if c != 1.0 else layer.weight for layer, c in zip(self.layers, self.weight_scales())]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Eq. 14 rescales the activations of layer l by f_l: a_l * f_l, (B, D_l).
        # The next layer only ever sees W_{l+1} (a_l * f_l) = (W_{l+1} * f_l) a_l,
        # so the rescaling is applied to whichever is smaller, the activations
        # (B x D_l) or the next weight matrix (D_{l+1} x D_l): same function and
        # gradients, far less work for the read-out and for large batches.
        if self.activation in _FUSED_ACTIVATIONS and self._act is ACTIVATIONS[self.activation]:
            # (the registries are read directly: nn.Module.__getattr__ costs more
            # than the rest of this list building, ~20 lookups per step)
            modules = self._modules
            args = []
            scales = self.weight_scales() if self.scale_free else None
            for l, layer in enumerate(modules["layers"]._modules.values()):
                p = layer._parameters
                args += (p["weight"] if scales is None or l == 0 else p["weight"] * scales[l], p["bias"])
            args += [c.index_views()[1] for c in modules["widths_ctrl"]._modules.values()]
            return _AdaptiveMLPFunction.apply(self.activation, self.renormalise_importances, x, self._parameters["rho"], *args)
        act = self._act
        layers = self.layers
        weights = self.effective_weights()
        prev = None  # the adaptive layer feeding the current one
        h = x
        for l, ctrl in enumerate(self.widths_ctrl):
            h = act(_scaled_linear(h, weights[l], layers[l].bias, prev))
            prev = ctrl
        return _scaled_linear(h, weights[-1], layers[-1].bias, prev)

    # ---------------------------------------------------------------- widths
    def update_width(self, optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Algorithm 1, update_width: set each D_l from its current rate.

        Returns True if any layer hit max_width (it is then capped there and
        a MaxWidthReached warning is issued once per layer)."""
        if self.frozen:
            return False
        ctrls = list(self._modules["widths_ctrl"]._modules.values())
        capped_any = False
        changed = False
        targets = []
        rhos = self._parameters["rho"].tolist()  # one read (one transfer on a GPU)
        if ctrls[0].rate_min:
            self._project_rates(rhos)
        for ctrl, rho in zip(ctrls, rhos):
            d, capped = ctrl.width_for_rho(rho)
            if capped != ctrl.capped:
                if capped:
                    warnings.warn(f"an adaptive layer reached max_width={ctrl.max_width}; its width is capped there", MaxWidthReached, stacklevel=2)
                ctrl.capped = capped
            capped_any |= capped
            changed |= d != ctrl.width
            targets.append(d)
        if changed:
            self._apply_widths(targets, optimizer, self.grow_init)
        return capped_any

    def _project_rates(self, rhos: list[float]) -> None:
        """Set every rate below its layer's `rate_min` back to the bound (in
        place, and in `rhos`)."""
        for l, (ctrl, rho) in enumerate(zip(self.widths_ctrl, rhos)):
            if not math.isnan(rho) and rho < 30 and math.log1p(math.exp(rho)) < ctrl.rate_min:
                rhos[l] = rho_from_rate(ctrl.rate_min)
                with torch.no_grad():
                    self._parameters["rho"][l] = rhos[l]

    def set_widths(self, widths: Sequence[int], optimizer: torch.optim.Optimizer | None = None, fill: str | None = None) -> None:
        """Grow or shrink the hidden layers to `widths`, in place.

        Shrinking drops the last neurons (rows of layer l, columns of layer
        l+1).  Growing draws the new rows and columns with `grow_init`.
        Surviving weights and their optimiser state are untouched."""
        fill = fill or self.grow_init
        widths = [int(w) for w in widths]
        if len(widths) != self.hidden_layers:
            raise ValueError(f"expected {self.hidden_layers} widths, but got {len(widths)}.")
        if any(w < 1 for w in widths):
            raise ValueError(f"widths must be at least 1, but got {widths=}.")
        self._apply_widths(widths, optimizer, fill)

    def _apply_widths(self, widths: list[int], optimizer: torch.optim.Optimizer | None, fill: str) -> None:
        """`set_widths` without its argument checks (`widths`: valid ints), the
        path of every width update: the registries are read directly and all
        resizes share one no_grad context."""
        limits = [None]
        for ctrl, w in zip(self._modules["widths_ctrl"]._modules.values(), widths):
            if ctrl.width != w:
                _set_plain(ctrl, "width", w)
            limits.append(ctrl.max_width)
        limits.append(None)
        dims = [self.in_features, *widths, self.out_features]
        distribution = self.init_distribution
        fill_bias = _standard_normal if self.bias_init == "uniform" else _zero
        reset = self.reset_optimizer_on_resize
        scales = self.weight_scales(dims) if self.scale_free else None
        with torch.no_grad():
            for l, layer in enumerate(self._modules["layers"]._modules.values()):
                if layer.out_features == dims[l + 1] and layer.in_features == dims[l]:
                    continue
                std = 1.0 if fill == "normal" else self._layer_std_for(l, dims)
                if scales is not None:
                    std /= scales[l]  # the same W as without scale_free: V = W / c
                grow = _grow_filler(std, distribution)
                layer._resize((dims[l + 1], dims[l]), grow, grow, optimizer, limits[l + 1], limits[l], fill_bias, reset)

    def _layer_std_for(self, l: int, dims: Sequence[int]) -> float:
        fan_in = dims[l]
        sq = self.widths_ctrl[l - 1].importance_sq_sum(dims[l]) if l > 0 else None
        return init_std("kaiming+", fan_in, sq)

    def truncate(self, keep: Sequence[int] | int | float) -> "AdaptiveMLP":
        """A copy keeping the first neurons of each hidden layer (section 5.4).

        `keep` is a list of widths, one int for every layer, or a fraction in
        (0, 1] of each current width.  The copy keeps the rates (so f(j) of
        the kept neurons is unchanged) and never changes width again."""
        if isinstance(keep, float):
            if not 0.0 < keep <= 1.0:
                raise ValueError(f"keep fraction must lie in (0, 1], but got {keep=}.")
            keep = [max(1, round(w * keep)) for w in self.widths]
        elif isinstance(keep, int):
            keep = [keep] * self.hidden_layers
        keep = [min(int(k), w) for k, w in zip(keep, self.widths)]
        clone = copy.deepcopy(self)
        clone.set_widths(keep)
        clone.frozen = True
        return clone

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # The widths travel with a state dict (the layers resize to it), but the
        # tensors must agree with them and with the fixed input/output sizes.
        old = [f"{prefix}widths_ctrl.{l}.rho" for l in range(self.hidden_layers)]
        if f"{prefix}rho" not in state_dict and all(k in state_dict for k in old):
            # saved before the rho's were packed into one vector (one per layer)
            state_dict[f"{prefix}rho"] = torch.stack([state_dict.pop(k).reshape(()) for k in old])
        widths = [state_dict.get(f"{prefix}widths_ctrl.{l}._extra_state", {"width": w})["width"] for l, w in enumerate(self.widths)]
        dims = [self.in_features] + widths + [self.out_features]
        for l in range(len(self.layers)):
            for name, shape in (("weight", (dims[l + 1], dims[l])), ("bias", (dims[l + 1],))):
                t = state_dict.get(f"{prefix}layers.{l}.{name}")
                if t is not None and tuple(t.shape) != shape:
                    error_msgs.append(f"{prefix}layers.{l}.{name} has shape {tuple(t.shape)}, but widths {widths} need {shape}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    # ---------------------------------------------------------------- priors
    def prior_parameters(self) -> list[nn.Parameter]:
        """The weights and biases under the Gaussian prior p(theta): those of the
        adaptive (hidden) layers, theta_ln of Eq. 13 for l = 1..L, plus the
        read-out's when `prior_on_readout` is set."""
        layers = self.layers if self.prior_on_readout else self.layers[:-1]
        return [p for layer in layers for p in (layer.weight, layer.bias)]

    def prior_sq_scales(self) -> list[float] | None:
        """c^2 for each of `prior_parameters` (the prior is on W = c V, so
        its gradient in V is c^2 V / sigma^2), or None when every c is 1."""
        if not self.scale_free:
            return None
        scales = self.weight_scales()
        n = len(self.layers) if self.prior_on_readout else len(self.layers) - 1
        return [c * c if kind == 0 else 1.0 for c in scales[:n] for kind in (0, 1)]

    def rates(self) -> list[torch.Tensor]:
        return list(F.softplus(self.rho).unbind())

    def extra_repr(self) -> str:
        extra = ", renormalise_importances=True" if self.renormalise_importances else ""
        extra += ", reset_optimizer_on_resize=True" if self.reset_optimizer_on_resize else ""
        extra += f", bias_init={self.bias_init!r}" if self.bias_init != "zero" else ""
        extra += ", scale_free=True" if self.scale_free else ""
        return f"widths={self.widths}, activation={self.activation!r}, init={self.init!r}, grow_init={self.grow_init!r}{extra}"


class FixedMLP(nn.Module):
    """The fixed-width baseline with the same interface as AdaptiveMLP."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden_layers: int = 1,
        width: int = 64,
        activation: str = "relu",
        init: str = "kaiming",
        init_distribution: str = "gaussian",
    ):
        super().__init__()
        if hidden_layers < 0:
            raise ValueError(f"hidden_layers cannot be negative, but got {hidden_layers=}.")
        if width < 0:
            raise ValueError(f"width cannot be negative, but got {width=}.")
        if width == 0:  # width 0: no hidden layer, a linear read-out (paper Table 4)
            hidden_layers = 0
        self.activation = activation
        self._act = resolve_activation(activation)
        self.init_distribution = init_distribution
        dims = [in_features] + [width] * hidden_layers + [out_features]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
        self.reset_parameters()

    @property
    def widths(self) -> list[int]:
        return [layer.out_features for layer in self.layers[:-1]]

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for layer in self.layers:
                fill_(layer.weight, init_std("kaiming", layer.in_features, None), self.init_distribution)
                layer.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers[:-1]:
            h = self._act(layer(h))
        return self.layers[-1](h)

    def update_width(self, optimizer=None) -> bool:
        return False


def adaptive_modules(model: nn.Module) -> list[AdaptiveMLP]:
    """Every AdaptiveMLP inside `model` (the model itself included), in order."""
    return [m for m in model.modules() if isinstance(m, AdaptiveMLP)]


def model_widths(model: nn.Module) -> list[int]:
    """Hidden widths of every (adaptive or fixed) MLP block, flattened in order."""
    if hasattr(model, "widths") and not isinstance(model, nn.ModuleList):
        w = model.widths
        return list(w() if callable(w) else w)
    return [w for m in adaptive_modules(model) for w in m.widths]


def named_model_widths(model: nn.Module) -> dict[str, int]:
    """{name: width} for the entries of `model_widths(model)`.

    A model names its MLP blocks by defining `width_names()` (one name per
    entry, e.g. 'head', 'conv2', 'dec3_ffn'); otherwise they are 'l0', 'l1', ..."""
    widths = model_widths(model)
    names_fn = getattr(model, "width_names", None)
    names = list(names_fn()) if callable(names_fn) else [f"l{i}" for i in range(len(widths))]
    assert len(names) == len(widths), f"width_names() gave {len(names)} names for {len(widths)} widths"
    return dict(zip(names, widths))
