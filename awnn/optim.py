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
of every optimiser state are zero ("a new weight has no history").  Where a
resize restarts the layer's optimiser state instead (`reset_optimizer_on_resize`,
the `authors` profile), `reset_optimizer_state` copies nothing: the state
becomes zeroed views of kept flat buffers (issue #30: a resize ~30% cheaper).
Shrinking just takes a smaller view: the dropped entries are not read again
and are re-initialised if the neuron is grown back later.

The active part is laid out *densely* (`DENSE_VIEWS`; #19 on GPUs, #30 on
CPUs): a view `buf[:rows, :cols]` of a wider buffer is not contiguous, and

* on a GPU, PyTorch's multi-tensor optimiser kernels take their fast route
  (one launch for all tensors) only when every tensor is dense; one strided
  tensor sends the whole list to a per-tensor loop (Adam: ~5 launches per
  tensor per step, measured 4-7 extra Adam launches per AWNN layer on an H100);
* on a CPU, the Trainer's Adam (awnn/lean_adam.py) runs torch's fused kernel,
  which is correct only on contiguous tensors (it reads a strided view as
  if it were dense).

A dense buffer keeps the active (rows, cols) block contiguous at the start
of its storage; a change of columns moves the kept block to its new row
stride (one copy, only on steps where a width moves).  New entries are drawn
exactly as the strided layout draws them (through a scratch view with the
same strides), so both layouts give the same numbers; the strided layout
(`DENSE_VIEWS = False`) is the reference, and tests/awnn/test_optim.py
checks both agree.
"""
from __future__ import annotations

import math
import weakref
from typing import Callable, Sequence

import torch

__all__ = ["CapacityBuffer", "grow_capacity", "reset_optimizer_state", "resize_optimizer_state"]

Fill = Callable[[torch.Tensor], None]

# Lay 2-D capacity buffers out densely (see the module docstring)?  "auto":
# yes, on every device (until #30 the CPU kept the strided layout); True or
# False force it for every buffer made from then on (tests compare the two).
DENSE_VIEWS: "str | bool" = "auto"


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
    microseconds each on a CPU) because a width update makes a dozen of them;
    the buffer's geometry (capacity, row stride, offset, address) is kept in
    plain Python attributes so that neither a view nor the `owns` check asks
    the tensor for it again.
    """

    def __init__(self, active: torch.Tensor, capacity: Sequence[int]):
        assert active.dim() == len(capacity) and active.dim() in (1, 2)
        assert all(c >= s for c, s in zip(capacity, active.shape))
        # (#19) 1-D active parts are dense in either layout
        self.dense = active.dim() == 2 and (DENSE_VIEWS == "auto" or bool(DENSE_VIEWS))
        self._set_buf(active.new_zeros(tuple(capacity)))
        self.shape = tuple(active.shape)
        self.last_view = None  # the view the last `resize` returned
        self.view().copy_(active)

    def _set_buf(self, buf: torch.Tensor) -> None:
        self.buf = buf
        self.cap = tuple(buf.shape)
        self._s0 = buf.stride(0)
        self._offset = buf.storage_offset()
        self._ptr = buf.data_ptr()

    @property
    def capacity(self) -> tuple[int, ...]:
        return self.cap

    def view(self) -> torch.Tensor:
        shape = self.shape
        if len(shape) == 1:
            return self.buf.as_strided(shape, (1,), self._offset)
        return self.buf.as_strided(shape, (shape[1] if self.dense else self._s0, 1), self._offset)

    def owns(self, t: torch.Tensor) -> bool:
        """Whether `t` is (still) the active view of this buffer."""
        return t.data_ptr() == self._ptr and t.shape == self.shape

    def resize(self, shape: Sequence[int], capacity: Sequence[int], fill_rows: Fill, fill_cols: Fill | None = None) -> torch.Tensor:
        """Make the active part `shape`; fill what becomes newly active.

        `fill_rows` fills the new rows (new neurons of this layer), over all
        active columns; `fill_cols` the new columns (new neurons of the
        layer feeding this one) of the old rows.  Returns the new view.
        """
        shape = tuple(shape)
        capacity = tuple(capacity)
        old = self.shape
        if self.dense and (shape[1] != old[1] or capacity != self.cap):
            return self._resize_dense(shape, capacity, fill_rows, fill_cols)
        if capacity != self.cap:
            new = self.buf.new_zeros(capacity)
            keep = tuple(slice(0, min(a, b)) for a, b in zip(old, shape))
            new[keep] = self.buf[keep]
            self._set_buf(new)
        self.shape = shape
        buf, offset = self.buf, self._offset
        if len(shape) == 1:
            if shape[0] > old[0]:
                fill_rows(buf.as_strided((shape[0] - old[0],), (1,), offset + old[0]))
            view = buf.as_strided(shape, (1,), offset)
        else:
            s0 = shape[1] if self.dense else self._s0  # (dense: only rows change here)
            if self.dense:
                fill_rows = self._as_strided_fill(fill_rows)
            if shape[0] > old[0]:  # new rows, all active columns
                fill_rows(buf.as_strided((shape[0] - old[0], shape[1]), (s0, 1), offset + old[0] * s0))
            if shape[1] > old[1]:  # new columns of the surviving rows
                (fill_cols or fill_rows)(buf.as_strided((min(old[0], shape[0]), shape[1] - old[1]), (s0, 1), offset + old[1]))
            view = buf.as_strided(shape, (s0, 1), offset)
        self.last_view = view
        return view

    # ------------------------------------------------ dense layout (#19)
    def _as_strided_fill(self, fill: Fill) -> Fill:
        """`fill` applied to a dense region as the strided layout applies it: to a
        scratch view with the strided layout's row stride (the buffer's column
        capacity), then copied in.  Random fills (normal_, uniform_) take other
        code paths on contiguous and strided tensors, so drawing straight into
        the dense region could give other numbers than the reference layout."""
        if fill is _zero:
            return fill
        cap_cols = self.cap[1]

        def fill_like_strided(region: torch.Tensor) -> None:
            rows, cols = region.shape
            if (rows <= 1 or cols == cap_cols) == region.is_contiguous():
                # the strided layout's view (rows, cols), row stride cap_cols, is
                # contiguous exactly when this region is: the fills take the same
                # code path, drawing the same numbers in the same order (no scratch)
                fill(region)
                return
            scratch = region.new_empty((rows, cap_cols)).as_strided((rows, cols), (cap_cols, 1))
            fill(scratch)
            region.copy_(scratch)

        return fill_like_strided

    def _resize_dense(self, shape, capacity, fill_rows: Fill, fill_cols: Fill | None) -> torch.Tensor:
        """`resize` of a dense 2-D buffer whose columns (row stride) or capacity
        change: the kept block moves to a new buffer with the new row stride."""
        old = self.shape
        keep_r, keep_c = min(old[0], shape[0]), min(old[1], shape[1])
        new = self.buf.new_empty(capacity)
        new.as_strided((keep_r, keep_c), (shape[1], 1)).copy_(self.buf.as_strided((keep_r, keep_c), (old[1], 1), self._offset))
        self._set_buf(new)
        self.shape = shape
        cols = shape[1]
        if shape[0] > old[0]:  # new rows, all active columns
            self._as_strided_fill(fill_rows)(new.as_strided((shape[0] - old[0], cols), (cols, 1), old[0] * cols))
        if cols > old[1]:  # new columns of the surviving rows
            self._as_strided_fill(fill_cols or fill_rows)(new.as_strided((keep_r, cols - old[1]), (cols, 1), old[1]))
        view = new.as_strided(shape, (cols, 1), 0)
        self.last_view = view
        return view


def _zero(t: torch.Tensor) -> None:
    t.zero_()


# optimizer -> {id(param): [number of state entries, shape, {state key: CapacityBuffer}]}
_STATE_BUFFERS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict]" = weakref.WeakKeyDictionary()


def resize_optimizer_state(
    optimizer: torch.optim.Optimizer | None,
    param: torch.nn.Parameter,
    old_shape: Sequence[int],
    new_shape: Sequence[int],
    capacity: Sequence[int],
    fill: Fill | None = None,
) -> None:
    """Resize every state tensor of `param` that has the parameter's shape.

    Surviving entries keep their values bit for bit; new entries are zero
    (or filled by `fill`: a caller that zeroes the whole state next skips it).
    Scalar state (Adam's `step`) is left alone.  Works whatever the
    optimiser did before (many steps, a `load_state_dict`): a state tensor
    that is not a view of our buffer is adopted into a new buffer.  When the
    state still holds exactly the views the last resize handed out (the same
    objects, no entry added), they are resized without looking at the rest.
    """
    if optimizer is None:
        return
    state = optimizer.state.get(param)
    if not state:
        return  # no step taken yet: the optimiser will create state of the right shape
    buffers = _STATE_BUFFERS.get(optimizer)
    if buffers is None:
        buffers = _STATE_BUFFERS.setdefault(optimizer, {})
    old_shape = tuple(old_shape)
    new_shape = tuple(new_shape)
    record = buffers.get(id(param))
    managed = None
    if record is not None and record[0] == len(state) and record[1] == old_shape:
        managed = record[2]
        for key, cb in managed.items():
            if state.get(key) is not cb.last_view:
                managed = None
                break
    if managed is None:
        known = record[2] if record is not None else {}
        managed = {}
        for key, value in state.items():
            if not torch.is_tensor(value) or value.dim() == 0 or tuple(value.shape) != old_shape:
                continue
            cb = known.get(key)
            if cb is None or not cb.owns(value):
                cb = CapacityBuffer(value.detach(), capacity)
            managed[key] = cb
    fill = fill or _zero
    for key, cb in managed.items():
        state[key] = cb.resize(new_shape, capacity, fill)
    buffers[id(param)] = [len(state), new_shape, managed]


# optimizer -> {id(param): {state key: flat buffer}}: where the reset path's state lives
_RESET_BUFFERS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict]" = weakref.WeakKeyDictionary()


def reset_optimizer_state(
    optimizer: torch.optim.Optimizer | None,
    param: torch.nn.Parameter,
    old_shape: Sequence[int],
    new_shape: Sequence[int],
    capacity: Sequence[int],
    zero: list,
) -> None:
    """The state a fresh optimiser would hold for `param` once it has `new_shape`,
    to be zeroed by the caller (`reset_optimizer_on_resize`: the `authors`
    profile re-creates a resized layer's optimiser state).

    Every state tensor with the parameter's shape before the resize
    (`old_shape`: Adam's moments, SGD's momentum) becomes a dense view of
    `new_shape` at the start of a flat buffer that holds `capacity`'s entries,
    kept between resizes (re-allocated only when the capacity grows); that view
    and every other tensor of the state (Adam's step) are appended to `zero`,
    which the caller zeroes at once (several layers in one kernel).  Nothing
    is copied: `resize_optimizer_state` moves the surviving entries to their
    new layout, which is wasted where all of them are zeroed next (SpiralHard's
    1-layer `authors` AWNN, in training: a width update that resizes fell from
    ~215 to ~150 us, ~25 us of a step on average; issue #30).
    Within the capacity the state keeps its tensor objects: the view handed out
    by the last reset is re-pointed in place (`set_`), so an optimiser that
    holds its moments in lists (awnn/lean_adam.py's kernel step) finds the
    same objects and checks nothing again (~10 us of the step after a move).
    Works whatever the optimiser did before (a `load_state_dict` included):
    only the shape of each entry is read."""
    if optimizer is None:
        return
    state = optimizer.state.get(param)
    if not state:
        return  # no step taken yet: the optimiser will create state of the right shape
    old_shape, new_shape = tuple(old_shape), tuple(new_shape)
    if old_shape == new_shape:
        zero += [v for v in state.values() if isinstance(v, torch.Tensor)]
        return
    flats = _RESET_BUFFERS.get(optimizer)
    if flats is None:
        flats = _RESET_BUFFERS.setdefault(optimizer, {})
    owned = flats.get(id(param))
    if owned is None:
        owned = flats[id(param)] = {}
    numel = math.prod(new_shape)
    strides = (new_shape[1], 1) if len(new_shape) == 2 else (1,)
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        # [flat buffer, its size, the dtype and device it was made for, its storage, the view last handed out]
        held = owned.get(key)
        if held is not None and value is held[5] and held[1] >= numel:
            # the view handed out last time, still the state's: re-pointed in place (the same
            # object, so LeanAdam's kernel lists stay valid and are not checked again)
            value.set_(held[4], 0, new_shape, strides)
        elif value.shape == old_shape and value.dim():
            if held is None or held[1] < numel or held[2] is not value.dtype or held[3] != value.device:
                flat = value.new_empty(max(math.prod(capacity), numel))
                held = owned[key] = [flat, flat.numel(), value.dtype, value.device, flat.untyped_storage(), None]
            value = state[key] = held[5] = held[0].as_strided(new_shape, strides, 0)
        zero.append(value)
