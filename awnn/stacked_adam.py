"""Adam over a stacked model's flat buffer (awnn/stacked.py): one update of
every fused config, each slice with its own lr, weight decay and eps.

On a CPU the update is torch's fused Adam kernel (awnn/lean_adam.py
`fused_adam`, behind its switch AWNN_LEAN_ADAM): one pass over the buffers
where the reference below makes eleven (measured on the fixed grid's
4x256@32, one core: 194 us a step against 661, a third of the lean loop's
step; issue #30).  The reference, the path on GPUs and with the switch off,
makes the float32 roundings of torch.optim.Adam's foreach path op by op;
the kernel computes the same update in another order of rounding
(tests/awnn/test_stacked_adam.py compares the two)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from .lean_adam import fused_adam, kernel_applies

if TYPE_CHECKING:
    from .stacked import StackedMLP

__all__ = ["BETAS", "StackedAdam", "sqrt_floor"]

BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults, which the Trainer uses


class StackedAdam:
    """torch.optim.Adam (foreach, default betas, coupled L2, no amsgrad) over
    a StackedMLP's flat buffer, with per-slice lr, weight decay and eps.
    Every slice steps together, so one step counter serves them all."""

    def __init__(self, model: StackedMLP, lrs: Sequence[float], weight_decays: Sequence[float], eps: Sequence[float]):
        if not len(lrs) == len(weight_decays) == len(eps) == model.n:
            raise ValueError(f"StackedAdam: expected {model.n} values of lr, weight_decay and eps, found {len(lrs)}, {len(weight_decays)}, {len(eps)}")
        self.model, dev, dtype = model, model.flat.device, model.flat.dtype

        def column(values, dt=dtype):
            return torch.tensor(list(values), dtype=dt, device=dev).view(-1, 1)

        self.lr = column(lrs, torch.float64)  # step sizes are formed in double, as torch does
        self.weight_decay, self.eps = column(weight_decays), column(eps)
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(model.flat), torch.zeros_like(model.flat)
        self.steps = 0
        self._step_t = torch.zeros((), dtype=torch.float32, device=dev)  # the kernel's step count (torch.optim.Adam's dtype)
        self._buffers()

    def _buffers(self) -> None:
        # reused scratch space: fresh (N, P) temporaries every step cost ~40% more on a CPU
        self._denom, self._update = torch.empty_like(self.exp_avg), torch.empty_like(self.exp_avg)
        self._decayed = torch.empty_like(self.exp_avg) if bool(self.weight_decay.any()) else None
        self._floor = sqrt_floor(self.eps)
        self._kernel: tuple | None = None  # (the buffers it was built for, the kernel's calls or None)

    def _kernel_calls(self) -> list | None:
        """The fused kernel's calls (awnn/lean_adam.py `fused_adam`): one per
        distinct (lr, weight decay, eps) among the slices, over their rows of
        the flat buffers (contiguous), or the whole buffers when every slice
        shares them; None where the kernel does not apply (the switch off, a
        GPU, ...): the reference step below.  Rebuilt when a buffer is replaced."""
        buffers = (self.model.flat, self.model.grad, self.exp_avg, self.exp_avg_sq)
        if self._kernel is not None and all(a is b for a, b in zip(self._kernel[0], buffers)):
            return self._kernel[1]
        calls = None
        if kernel_applies(list(buffers)):
            rows_of: dict[tuple[float, float, float], list[int]] = {}
            for row, hyper in enumerate(zip(self.lr.view(-1).tolist(), self.weight_decay.view(-1).tolist(), self.eps.view(-1).tolist())):
                rows_of.setdefault(hyper, []).append(row)
            calls = []
            for (lr, wd, eps), rows in rows_of.items():
                views = [[t.view(-1)] if len(rows) == self.model.n else [t[r] for r in rows] for t in buffers]
                calls.append((*views, [self._step_t] * len(views[0]), lr, wd, eps))
        self._kernel = (buffers, calls)
        return calls

    @torch.no_grad()
    def step(self) -> None:
        """One update of every slice: on a CPU by torch's fused kernel (one pass
        over the buffers, ~3x faster than the ops below at the fixed grid's
        sizes; torch.optim.Adam's numbers to rounding), else (the reference)
        with each float32 rounding the one torch's foreach Adam makes (addcdiv
        with value 1 computes self + t1 / t2)."""
        p, g = self.model.flat, self.model.grad
        beta1, beta2 = BETAS
        self.steps += 1
        calls = self._kernel_calls()
        if calls is not None:
            self._step_t.fill_(self.steps)
            for params, grads, exp_avgs, exp_avg_sqs, steps, lr, wd, eps in calls:
                fused_adam(params, grads, exp_avgs, exp_avg_sqs, steps, lr, BETAS, wd, eps)
            return
        if self._decayed is not None:
            g = torch.addcmul(g, self.weight_decay, p, out=self._decayed)  # torch: g.add(p, alpha=wd)
        self.exp_avg.lerp_(g, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** self.steps
        bias_correction2 = 1 - beta2 ** self.steps
        step_size = ((self.lr / bias_correction1) * -1).to(p.dtype)  # torch: (lr / bc1) * -1 in double, cast in the kernel
        if self._floor is None:
            denom = torch.sqrt(self.exp_avg_sq, out=self._denom)
        else:  # the same numbers (sqrt_floor), without the root of exact zeros
            denom = torch.clamp_min(self.exp_avg_sq, self._floor, out=self._denom).sqrt_()
        denom = denom.div_(bias_correction2 ** 0.5).add_(self.eps)
        p.addcdiv_(torch.mul(self.exp_avg, step_size, out=self._update), denom)  # p + (step_size * m) / denom

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only these slices' state, after `StackedMLP.keep(rows)`."""
        rows = list(rows)
        self.lr, self.weight_decay, self.eps = self.lr[rows], self.weight_decay[rows], self.eps[rows]
        self.exp_avg, self.exp_avg_sq = self.exp_avg[rows].contiguous(), self.exp_avg_sq[rows].contiguous()
        self._buffers()


def sqrt_floor(eps: torch.Tensor) -> float | None:
    """A floor for Adam's second moments below which clamping changes no
    number: the root of any value up to it, divided by the bias correction
    sqrt(1 - 0.999^t) (>= 0.0316, its value at the first step), is under a
    quarter of an ulp of the smallest eps, so `+ eps` rounds it away, as it
    rounds away the root of the value it replaces.  It spares the root of
    exact zeros (the moments of units whose gradient has always been zero:
    dead ReLUs, padded units), which torch's CPU kernel computes ~12x slower
    than any other root (docs/design.md).  None when that floor would not be
    a normal float of eps's dtype (a very small eps)."""
    smallest = float(eps.min()) if eps.numel() else 0.0
    info = torch.finfo(eps.dtype)
    if not smallest > 0.0:
        return None
    floor = (smallest * info.eps / 128.0) ** 2  # root <= eps * ulp(1) / 128; x 31.7 < eps * ulp(1) / 4 <= half an ulp of eps
    return floor if floor >= info.tiny else None
