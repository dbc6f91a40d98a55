"""The adaptive MLP (paper section 3.1, Eq. 14, Algorithm 1).  The width of
one layer is awnn/width.py, the resizable linear layer awnn/resizable.py,
the fused autograd nodes awnn/fused.py, the fixed-width baseline
awnn/fixed.py and the activations awnn/activations.py (all importable from
here too).

    h_j = act(W_j . h_prev + b_j) * f(j),   j < D = ceil(-ln(1-k)/rate)

Widths change only in `update_width`, which the trainer calls every
`width_update_interval` steps; `forward` never changes them, so evaluation
(`model.eval()`, `torch.no_grad()`) cannot alter the network.
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .activations import ACTIVATIONS, resolve_activation
from .fixed import FixedMLP
from .fused import _FUSED_ACTIVATIONS, PriorGrads, _AdaptiveMLPFunction, _scaled_linear, importance_constants
from .init import DISTRIBUTIONS, GROW_INITS, INITS, fill_, init_std
from .resizable import BIAS_INITS, ResizableLinear, _grow_filler, _set_plain, _standard_normal, _zero
from .width import AdaptiveWidth, MaxWidthReached
from .width_update import HostRates

__all__ = [
    "ACTIVATIONS",
    "resolve_activation",
    "AdaptiveWidth",
    "ResizableLinear",
    "AdaptiveMLP",
    "FixedMLP",
    "PriorGrads",
    "adaptive_modules",
    "model_widths",
    "named_model_widths",
    "MaxWidthReached",
]

class AdaptiveMLP(HostRates, nn.Module):
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

    def fused_forward(self) -> bool:
        """Whether `forward` runs as one fused autograd node (awnn/fused.py),
        which is what applies `prior_grads`."""
        return self.activation in _FUSED_ACTIVATIONS and self._act is ACTIVATIONS[self.activation]

    def forward(self, x: torch.Tensor, prior_grads: PriorGrads | None = None) -> torch.Tensor:
        """The network's output; with `prior_grads` (a trainer's closed-form
        prior gradients, weight_decay and the rate's; its decay_layers is set
        here from `prior_on_readout`), the backward adds them to the
        gradients of `prior_parameters()` and rho.  Needs `fused_forward()`."""
        # Eq. 14 rescales the activations of layer l by f_l: a_l * f_l, (B, D_l).
        # The next layer only ever sees W_{l+1} (a_l * f_l) = (W_{l+1} * f_l) a_l,
        # so the rescaling is applied to whichever is smaller, the activations
        # (B x D_l) or the next weight matrix (D_{l+1} x D_l): same function and
        # gradients, far less work for the read-out and for large batches.
        if self.fused_forward():
            return _AdaptiveMLPFunction.apply(*self.fused_inputs(x, prior_grads))
        if prior_grads is not None:
            raise ValueError(f"prior_grads needs the fused forward, which activation {self.activation!r} as set on this model does not take.")
        act = self._act
        layers = self.layers
        weights = self.effective_weights()
        prev = None  # the adaptive layer feeding the current one
        h = x
        for l, ctrl in enumerate(self.widths_ctrl):
            h = act(_scaled_linear(h, weights[l], layers[l].bias, prev))
            prev = ctrl
        return _scaled_linear(h, weights[-1], layers[-1].bias, prev)

    def fused_inputs(self, x: torch.Tensor, prior_grads: PriorGrads | None = None) -> tuple:
        """The inputs of the fused node (`_AdaptiveMLPFunction`) for `x`: what
        `forward` applies it to, and what a trainer's written-out step
        (awnn/train_step.py) calls its forward and backward with."""
        # (the registries are read directly: nn.Module.__getattr__ costs more
        # than the rest of this list building, ~20 lookups per step)
        modules = self._modules
        args = []
        scales = self.weight_scales() if self.scale_free else None
        for l, layer in enumerate(modules["layers"]._modules.values()):
            p = layer._parameters
            args += (p["weight"] if scales is None or l == 0 else p["weight"] * scales[l], p["bias"])
        ctrls = modules["widths_ctrl"]._modules.values()
        args += [c.index_views()[1] for c in ctrls]
        rho = self._parameters["rho"]
        renorm = self.renormalise_importances
        rhos = self._host_rhos(rho)
        consts = None if rhos is None else [importance_constants(r, c.width, renorm) for r, c in zip(rhos, ctrls)]
        if consts is not None and None in consts:  # a rate beyond float range: the tensor path handles (or reports) it
            consts = None
        if prior_grads is not None:  # the weight prior covers the hidden layers, and the read-out with prior_on_readout
            prior_grads = prior_grads._replace(decay_layers=len(modules["widths_ctrl"]._modules) + (1 if self.prior_on_readout else 0))
        return (self.activation, renorm, consts, prior_grads, x, rho, *args)

    # ---------------------------------------------------------------- widths
    # (update_width and the host reads of rho: awnn/width_update.py)
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
        zero_state: list[torch.Tensor] = []  # (reset: the state of every resized layer, zeroed at once)
        with torch.no_grad():
            for l, layer in enumerate(self._modules["layers"]._modules.values()):
                if layer.out_features == dims[l + 1] and layer.in_features == dims[l]:
                    continue
                std = 1.0 if fill == "normal" else self._layer_std_for(l, dims)
                if scales is not None:
                    std /= scales[l]  # the same W as without scale_free: V = W / c
                grow = _grow_filler(std, distribution)
                layer._resize((dims[l + 1], dims[l]), grow, grow, optimizer, limits[l + 1], limits[l], fill_bias, reset, zero_state)
            if zero_state:
                torch._foreach_zero_(zero_state)

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
