"""Algorithm 1's update_width for the adaptive MLP (awnn/layers.py), from the
host values of its rates: one read of rho a step, which the forward and the
rate prior reuse (on a GPU: no second device sync).

The width check runs at every step (`width_update_interval` 1, the paper's
setting) and a width moves at only about a third of them (issue #30), so a
step that moves none takes a shortcut: each layer keeps a band of rho
values [lo, hi], worked out after each full check: the interval of rates
the width rule maps to that width, narrowed by a hair, and both ends put
through the full check (`AdaptiveWidth.width_for_rho`: that width, not
capped, no projection to `rate_min`).  D is a non-increasing function of
rho (softplus, the quantile, floor/ceil and the rate_min clamp are all
monotone), so every rho inside the band gives that width: the full check
runs only for a rho outside it, and the result is the one running it gives
(`WIDTH_BAND = False` runs it at every step: the reference,
tests/awnn/test_step_speed_paths.py).
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch

from .distributions import rho_from_rate
from .width import MaxWidthReached

if TYPE_CHECKING:
    from .width import AdaptiveWidth

__all__ = ["HostRates", "WIDTH_BAND"]

# Skip the full width check for a rho inside its layer's checked band (see above).
WIDTH_BAND = True


class HostRates:
    """AdaptiveMLP's width update and its host-side reads of rho (a mixin:
    uses the model's `rho`, `widths_ctrl`, `frozen` and `_apply_widths`)."""

    def update_width(self, optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Algorithm 1, update_width: set each D_l from its current rate.

        Returns True if any layer hit max_width (it is then capped there and
        a MaxWidthReached warning is issued once per layer)."""
        if self.frozen:
            return False
        rho_vec = self._parameters["rho"]
        rhos = rho_vec.tolist()  # one read (one transfer on a GPU)
        band = self.__dict__.get("_width_band")
        if band is not None and WIDTH_BAND:
            for rho, (lo, hi, ctrl, width) in zip(rhos, band[1]):
                if not (lo <= rho <= hi and ctrl.width == width):  # (NaN: outside)
                    break
            else:  # every layer keeps its width: nothing to change, rho needs no projection
                self.__dict__["_rho_read"] = (rho_vec.data_ptr(), rho_vec._version, rhos)
                return band[0]
        ctrls = list(self._modules["widths_ctrl"]._modules.values())
        capped_any = False
        changed = False
        targets = []
        projected = bool(ctrls[0].rate_min) and self._project_rates(rhos, ctrls)
        if not projected:
            # the forward's host values of rho (GPU: no second transfer), valid while rho is unchanged
            self.__dict__["_rho_read"] = (rho_vec.data_ptr(), rho_vec._version, rhos)
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
            self._apply_widths(targets, optimizer, self.grow_init)  # (forgets the band)
        if WIDTH_BAND:  # after every full check: a cap can come or go while the width stays (at max_width)
            self.__dict__["_width_band"] = (capped_any, self._checked_band(rhos, ctrls))
        return capped_any

    @staticmethod
    def _checked_band(rhos: list[float], ctrls: "list[AdaptiveWidth]") -> list[tuple]:
        """Per layer (lo, hi, ctrl, width): a band of rho around the rate
        interval that gives the layer its current width, both ends checked
        with the full `width_for_rho` (and against `rate_min`), so every rho
        between them gives that width; just this rho where a check fails (a
        capped layer, an edge the formula misses)."""
        out = []
        for rho, ctrl in zip(rhos, ctrls):
            width = ctrl.width
            lo = hi = rho
            if not ctrl.capped:
                edges = _rho_edges(width, ctrl.quantile_k, ctrl.width_rule)
                if edges is not None and _keeps(ctrl, edges[0], width) and _keeps(ctrl, edges[1], width):
                    lo, hi = edges
            out.append((lo, hi, ctrl, width))
        return out

    def _forget_width_band(self) -> None:
        """Drop the checked bands (the widths were set another way)."""
        self.__dict__.pop("_width_band", None)

    def rho_values(self) -> list[float]:
        """Every layer's rho as Python floats (on a GPU without a second
        transfer when the last width update read them and rho is unchanged)."""
        rho = self._parameters["rho"]
        rhos = self._host_rhos(rho)
        return rho.tolist() if rhos is None else rhos

    def _host_rhos(self, rho: torch.Tensor) -> list[float] | None:
        """Every layer's rho as Python floats: read now on a CPU; on a GPU the
        values the last width update read when rho has not changed since (the
        same step: no device sync), else None."""
        if rho.device.type == "cpu":
            return rho.tolist()
        return self._last_read_rhos(rho)

    def _last_read_rhos(self, rho: torch.Tensor) -> list[float] | None:
        """The values of rho the last width update read, if rho has not changed
        since (the same tensor, no in-place write: its version counter), else None."""
        read = self.__dict__.get("_rho_read")
        if read is not None and read[0] == rho.data_ptr() and read[1] == rho._version:
            return read[2]
        return None

    def _project_rates(self, rhos: list[float], ctrls: "list[AdaptiveWidth]") -> bool:
        """Set every rate below its layer's `rate_min` back to the bound (in
        place, and in `rhos`); whether one was."""
        projected = False
        for l, (ctrl, rho) in enumerate(zip(ctrls, rhos)):
            if not math.isnan(rho) and rho < 30 and math.log1p(math.exp(rho)) < ctrl.rate_min:
                rhos[l] = rho_from_rate(ctrl.rate_min)
                with torch.no_grad():
                    self._parameters["rho"][l] = rhos[l]
                projected = True
        return projected


def _rho_edges(width: int, quantile_k: float, rule: str) -> tuple[float, float] | None:
    """(lo, hi): rho values just inside the interval where the width rule gives
    `width` (a relative margin of 1e-7 of the rate inward: wider than the
    ceil rule's 1e-9 guard against float noise, distributions.width_from_rate), or None."""
    c = -math.log1p(-quantile_k)
    if rule == "floor+2":  # floor(c / rate) + 2 = width:  c / (width - 1) < rate <= c / (width - 2)
        low, high = (width - 1, width - 2)
    else:  # ceil(c / rate) = width:  c / width <= rate < c / (width - 1)
        low, high = (width, width - 1)
    if high <= 0:
        return None
    rate_hi, rate_lo = c / high, c / low  # (the larger rate gives the smaller width: rho's upper edge)
    rate_lo, rate_hi = rate_lo * (1.0 + 1e-7), rate_hi * (1.0 - 1e-7)
    if not 0.0 < rate_lo < rate_hi:
        return None
    return rho_from_rate(rate_lo), rho_from_rate(rate_hi)


def _keeps(ctrl: "AdaptiveWidth", rho: float, width: int) -> bool:
    """Whether the full check at `rho` gives `width`, uncapped, with no projection to rate_min."""
    if ctrl.rate_min and rho < 30 and math.log1p(math.exp(rho)) < ctrl.rate_min:
        return False
    try:
        return ctrl.width_for_rho(rho) == (width, False)
    except FloatingPointError:
        return False
