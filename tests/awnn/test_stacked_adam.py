"""The stacked trainer's Adam (awnn/stacked_adam.py, issue #30): torch's fused
CPU kernel, one call per distinct (lr, weight decay, eps) among the slices,
must give the reference step's numbers (torch.optim.Adam's foreach roundings,
op by op) to rounding, slice by slice, through a change of the stack's rows."""
import pytest
import torch

import awnn.lean_adam as lean_adam
import awnn.stacked_adam as stacked_adam
from awnn.layers import FixedMLP
from awnn.stacked import StackedMLP
from awnn.stacked_adam import StackedAdam
from train_helpers import needs_checked_torch

pytestmark = needs_checked_torch  # (every test here times or checks the kernel)

# 4 slices: 0 and 3 share their hyperparameters (one kernel call for both), 1 and 2 differ in lr, decay and eps
LRS, WDS, EPS = [0.01, 0.3, 1e-3, 0.01], [0.0, 0.0, 0.01, 0.0], [1e-8, 1e-6, 1e-8, 1e-8]


def make(dtype, seed=0):
    torch.manual_seed(seed)
    mlps = [FixedMLP(3, 2, hidden_layers=2, width=6).to(dtype) for _ in LRS]
    stack = StackedMLP(mlps)
    return stack, StackedAdam(stack, LRS, WDS, EPS)


def steps(stack, adam, n, seed, dead_rows=()):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n):
        stack.grad.copy_(torch.randn(stack.grad.shape, generator=gen, dtype=stack.grad.dtype))
        for r in dead_rows:  # a slice whose units never get a gradient: exact zeros in its moments
            stack.grad[r].zero_()
        adam.step()


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-13), (torch.float32, 1e-5)])
def test_the_kernel_gives_the_reference_steps(dtype, tol, monkeypatch):
    calls = []
    real = stacked_adam.fused_adam
    monkeypatch.setattr(stacked_adam, "fused_adam", lambda *a: (calls.append(len(a[0])), real(*a)))
    fast, fast_adam = make(dtype)
    monkeypatch.setenv(lean_adam.SWITCH, "0")
    ref, ref_adam = make(dtype)
    steps(ref, ref_adam, 30, seed=1, dead_rows=[1])
    monkeypatch.delenv(lean_adam.SWITCH)
    start = fast.flat.clone()
    steps(fast, fast_adam, 30, seed=1, dead_rows=[1])
    # one call per distinct hyperparameter triple and step: rows {0, 3}, {1}, {2}
    assert calls == [2, 1, 1] * 30 and ref_adam._kernel[1] is None
    # float64: the same update in another order of rounding (measured ~1e-16); float32:
    # a few ulps a step on entries below 1 (a wrong lr, decay or eps row moves them by ~lr)
    assert torch.allclose(fast.flat, ref.flat, rtol=0, atol=tol)
    assert torch.allclose(fast_adam.exp_avg, ref_adam.exp_avg, rtol=0, atol=tol)
    assert torch.allclose(fast_adam.exp_avg_sq, ref_adam.exp_avg_sq, rtol=0, atol=tol)
    moved = (fast.flat - start).abs().amax(1)
    assert moved[[0, 2, 3]].min() > 1e-3  # every live slice moved a hundred tolerances
    # the dead slice (no gradient, no decay): moments of exact zeros, whose root the kernel takes
    # (the reference clamps them first, sqrt_floor), and not one weight moved, nor a NaN
    assert not fast_adam.exp_avg_sq[1].any() and torch.equal(fast.flat[1], start[1])


def test_one_call_over_the_whole_buffers_when_the_slices_agree(monkeypatch):
    seen = []
    real = stacked_adam.fused_adam
    monkeypatch.setattr(stacked_adam, "fused_adam", lambda *a: (seen.append([t.shape for t in a[0]]), real(*a)))
    torch.manual_seed(0)
    stack = StackedMLP([FixedMLP(3, 2, hidden_layers=1, width=5) for _ in range(3)])
    adam = StackedAdam(stack, [0.01] * 3, [0.0] * 3, [1e-8] * 3)
    adam.step()
    assert seen == [[torch.Size([stack.flat.numel()])]]


def test_after_keep_the_kernel_updates_the_kept_rows(monkeypatch):
    """Dropping slices replaces the buffers: the kernel's views must follow them."""
    fast, fast_adam = make(torch.float64)
    monkeypatch.setenv(lean_adam.SWITCH, "0")
    ref, ref_adam = make(torch.float64)
    monkeypatch.delenv(lean_adam.SWITCH)
    for stack, adam in ((fast, fast_adam), (ref, ref_adam)):
        if adam is ref_adam:
            monkeypatch.setenv(lean_adam.SWITCH, "0")
        steps(stack, adam, 5, seed=2)
        stack.keep([1, 3])
        adam.keep([1, 3])
        steps(stack, adam, 5, seed=3)
    assert fast_adam._kernel[1] is not None and ref_adam._kernel[1] is None
    assert fast.flat.shape[0] == 2
    assert torch.allclose(fast.flat, ref.flat, rtol=0, atol=1e-13)


def test_the_switch_and_non_cpu_layouts_take_the_reference(monkeypatch):
    monkeypatch.setenv(lean_adam.SWITCH, "0")
    stack, adam = make(torch.float32)
    adam.step()
    assert adam._kernel[1] is None
    monkeypatch.delenv(lean_adam.SWITCH)
    assert lean_adam.kernel_applies([stack.flat, stack.grad])
    assert not lean_adam.kernel_applies([stack.flat[:, ::2]])  # a strided view: the kernel misreads those
    assert not lean_adam.kernel_applies([])
