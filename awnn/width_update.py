"""Algorithm 1's update_width for the adaptive MLP (awnn/layers.py), from the
host values of its rates: one read of rho a step, which the forward and the
rate prior reuse (on a GPU: no second device sync)."""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch

from .distributions import rho_from_rate
from .width import MaxWidthReached

if TYPE_CHECKING:
    from .width import AdaptiveWidth

__all__ = ["HostRates"]


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
            self._apply_widths(targets, optimizer, self.grow_init)
        return capped_any

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

