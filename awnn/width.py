"""The width of one adaptive layer: its rate, importances f(j) and width D
(paper section 3.1; the profiles' width rule and renormalisation)."""
from __future__ import annotations

import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from .distributions import WIDTH_RULES, importance_from_rho, renormalise, rho_from_rate, width_from_rate
from .optim import grow_capacity

__all__ = ["AdaptiveWidth", "MaxWidthReached"]


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
        # (in rho's dtype: a float64 model whose widths stay below 16 never regrows it)
        self.register_buffer("_arange", torch.arange(16, dtype=self.rho.dtype), persistent=False)
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
        was_capped, (self.width, self.capped) = self.capped, self.target_width()
        if self.capped and not was_capped:  # reported like a cap reached during training, never silent; once per layer
            # (an AdaptiveMLP resets its layers again after building them: a second warning from another line)
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
