"""Resizing a parameter in place while keeping its optimiser state.

An adaptive layer changes shape many times during training (with Adam at
lr 0.01 the width of a 231-neuron layer moves by a neuron or two at most
steps).  Re-allocating the parameter, or rebuilding the optimiser, at every
step is what makes a naive implementation several times slower than a
fixed-width network.  Instead each resizable tensor lives in a *capacity
buffer* that is larger than the active part, and the parameter's `.data`
is a view of the leading slice `buf[:rows, :cols]`:

* the `nn.Parameter` object never changes, so the optimiser keeps its
  param groups and its per-parameter state dictionary;
* the optimiser's own state tensors (Adam's `exp_avg`/`exp_avg_sq`, SGD's
  `momentum_buffer`, ...) are made views of capacity buffers of the same
  capacity, so the optimiser's in-place updates write straight into them
  and only the active slice is ever touched by a step;
* growing within capacity costs one fill of the newly exposed rows/columns;
  the buffers are re-allocated (geometrically larger) only when the
  capacity is exceeded, so the amortised cost per resize is O(new entries).

New entries of the parameter are filled by an init function; new entries
of every optimiser state are zero ("a new weight has no history").
Shrinking just takes a smaller view: the dropped entries are not read again
and are re-initialised if the neuron is grown back later.
"""
from __future__ import annotations

import math
import weakref
from typing import Callable, Sequence

import torch

__all__ = ["CapacityBuffer", "grow_capacity", "resize_optimizer_state"]

Fill = Callable[[torch.Tensor], None]


def grow_capacity(needed: int, current: int, limit: int | None) -> int:
    """New capacity for a dimension that must hold `needed` entries."""
    cap = max(needed, math.ceil(current * 1.5), 16)
    if limit is not None:
        cap = min(cap, max(limit, needed))
    return cap


class CapacityBuffer:
    """A 1-D or 2-D buffer whose active part is the leading slice.

    Views are made with a single `as_strided` call rather than Python
    slicing (`buf[:r, :c]` dispatches one slice op per dimension, several
    microseconds each on a CPU) because a width update makes a dozen of them.
    """

    def __init__(self, active: torch.Tensor, capacity: Sequence[int]):
        assert active.dim() == len(capacity) and active.dim() in (1, 2)
        assert all(c >= s for c, s in zip(capacity, active.shape))
        self.buf = active.new_zeros(tuple(capacity))
        self.shape = tuple(active.shape)
        self.view().copy_(active)

    @property
    def capacity(self) -> tuple[int, ...]:
        return tuple(self.buf.shape)

    def region(self, rows: tuple[int, int], cols: tuple[int, int] | None = None) -> torch.Tensor:
        """buf[r0:r1, c0:c1] (or buf[r0:r1] for 1-D) as one as_strided view."""
        buf = self.buf
        if buf.dim() == 1:
            return buf.as_strided((rows[1] - rows[0],), (1,), buf.storage_offset() + rows[0])
        s0 = buf.stride(0)
        return buf.as_strided((rows[1] - rows[0], cols[1] - cols[0]), (s0, 1), buf.storage_offset() + rows[0] * s0 + cols[0])

    def view(self) -> torch.Tensor:
        if self.buf.dim() == 1:
            return self.region((0, self.shape[0]))
        return self.region((0, self.shape[0]), (0, self.shape[1]))

    def owns(self, t: torch.Tensor) -> bool:
        """Whether `t` is (still) the active view of this buffer."""
        return t.data_ptr() == self.buf.data_ptr() and tuple(t.shape) == self.shape

    def resize(self, shape: Sequence[int], capacity: Sequence[int], fill_rows: Fill, fill_cols: Fill | None = None) -> torch.Tensor:
        """Make the active part `shape`; fill what becomes newly active.

        `fill_rows` fills the new rows (new neurons of this layer), over all
        active columns; `fill_cols` the new columns (new neurons of the
        layer feeding this one) of the old rows.  Returns the new view.
        """
        shape = tuple(shape)
        capacity = tuple(capacity)
        old = self.shape
        if capacity != self.capacity:
            new = self.buf.new_zeros(capacity)
            keep = tuple(slice(0, min(a, b)) for a, b in zip(old, shape))
            new[keep] = self.buf[keep]
            self.buf = new
        self.shape = shape
        if self.buf.dim() == 1:
            if shape[0] > old[0]:
                fill_rows(self.region((old[0], shape[0])))
        else:
            if shape[0] > old[0]:
                fill_rows(self.region((old[0], shape[0]), (0, shape[1])))
            if shape[1] > old[1]:
                (fill_cols or fill_rows)(self.region((0, min(old[0], shape[0])), (old[1], shape[1])))
        return self.view()


def _zero(t: torch.Tensor) -> None:
    t.zero_()


# optimizer -> {(id(param), state key): CapacityBuffer}
_STATE_BUFFERS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict]" = weakref.WeakKeyDictionary()


def resize_optimizer_state(
    optimizer: torch.optim.Optimizer | None,
    param: torch.nn.Parameter,
    old_shape: Sequence[int],
    new_shape: Sequence[int],
    capacity: Sequence[int],
) -> None:
    """Resize every state tensor of `param` that has the parameter's shape.

    Surviving entries keep their values bit for bit; new entries are zero.
    Scalar state (Adam's `step`) is left alone.  Works whatever the
    optimiser did before (many steps, a `load_state_dict`): a state tensor
    that is not a view of our buffer is adopted into a new buffer.
    """
    if optimizer is None:
        return
    state = optimizer.state.get(param)
    if not state:
        return  # no step taken yet: the optimiser will create state of the right shape
    buffers = _STATE_BUFFERS.setdefault(optimizer, {})
    old_shape = tuple(old_shape)
    for key, value in list(state.items()):
        if not torch.is_tensor(value) or tuple(value.shape) != old_shape or value.dim() == 0:
            continue
        cb = buffers.get((id(param), key))
        if cb is None or not cb.owns(value):
            cb = CapacityBuffer(value.detach(), capacity)
            buffers[(id(param), key)] = cb
        state[key] = cb.resize(new_shape, capacity, _zero)
