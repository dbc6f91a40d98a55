"""A linear layer whose weight and bias are views of capacity buffers, resized
in place with the optimiser state (the Parameter objects never change)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .init import fill_
from .optim import CapacityBuffer, grow_capacity, reset_optimizer_state, resize_optimizer_state

__all__ = ["ResizableLinear", "BIAS_INITS"]


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
        re-created: Adam restarts both; awnn/optim.py's
        `reset_optimizer_state`, which copies none of the old state)."""
        old = (self.out_features, self.in_features)
        new = (int(out_features), int(in_features))
        if new == old:
            return
        if torch.is_grad_enabled():
            with torch.no_grad():
                self._resize(new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias, reset_state)
        else:  # (no second no_grad context: a width update makes several resizes)
            self._resize(new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias, reset_state)

    def _resize(self, new, fill_rows, fill_cols, optimizer, out_limit, in_limit, fill_bias=None, reset_state=False, zero_later=None) -> None:
        """`resize` to `new` (out, in), under no_grad.  With `reset_state` and a
        list `zero_later`, the optimiser state tensors to zero are appended to it
        (the caller zeroes those of several layers at once) instead of zeroed."""
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
        reset = reset_state and optimizer is not None
        _rebind(weight, wbuf.resize(new, cap, fill_rows, fill_cols))
        if reset:
            # the state a fresh optimiser would create (Adam: step 0, zero
            # moments), written in place over kept flat buffers, nothing copied
            # (one fused zeroing kernel; a width moves at ~1/3 of steps)
            tensors = zero_later if zero_later is not None else []
            reset_optimizer_state(optimizer, weight, old, new, cap, tensors)
        else:
            resize_optimizer_state(optimizer, weight, old, new, cap)
        if bias is not None:
            if new[0] != old[0]:
                bbuf = self._bbuf
                if not bbuf.owns(bias):
                    bbuf = self._bbuf = CapacityBuffer(bias.data, bias.shape)
                _rebind(bias, bbuf.resize(new[:1], cap[:1], fill_bias or _zero))
                if not reset:
                    resize_optimizer_state(optimizer, bias, old[:1], new[:1], cap[:1])
            if reset:
                reset_optimizer_state(optimizer, bias, old[:1], new[:1], cap[:1], tensors)
        if reset and zero_later is None and tensors:
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
