"""Adam for the Trainer on a CPU: torch.optim.Adam's state and results, in one
fused kernel call per step (issue #30).  Every use of torch's private Adam
kernel is here, behind one switch.

On a CPU torch.optim.Adam's `foreach` path is a Python-level loop of
per-tensor ops: ~9 dispatches per parameter tensor and step.  For the
small networks of the tabular tasks that loop is most of the optimiser's
time (measured on SpiralHard, 1 hidden layer of ~550, batch 128, 2-core
Xeon: 358 us a step; the same update by `torch._fused_adam_`, one call that
walks the tensors in C++: 72 us).  `LeanAdam` is a torch.optim.Adam whose
`step` makes that one call when it may:

* the state is torch.optim.Adam's own (`step`, `exp_avg`, `exp_avg_sq`
  per parameter, created by Adam's `_init_group`), and the param groups
  keep the reference's flags (`foreach=True`), so a state dict written by
  either loads into the other and the run continues;
* the kernel computes the same update (coupled L2 `weight_decay`, bias
  corrections per parameter's own step count) in another order of
  rounding: it agrees with torch.optim.Adam to float rounding (float64:
  1e-12 after hundreds of steps, tests/awnn/test_lean_adam.py), not bit for
  bit;
* it runs only on plain CPU float tensors that are *contiguous*: torch's
  CPU kernel reads a strided view as if it were dense (checked on torch
  2.14: it updated entries outside a capacity buffer's active view and
  left wrong values in it).  awnn/optim.py's capacity buffers are laid out
  densely whenever this optimiser is in use (`CapacityBuffer`'s
  `DENSE_VIEWS`, the layout the GPU path uses); any other case (a strided
  tensor, amsgrad, maximize, capturable, a GPU tensor, mixed dtypes, a
  closure) takes the reference step, torch.optim.Adam's own.

Applied only when the switch is on (`AWNN_LEAN_ADAM` unset or `1`; `0`:
torch.optim.Adam everywhere) and the installed torch is one it was checked
against (`TESTED_TORCH`); on another version nothing changes, with one line
on stderr.  `tests/awnn/test_lean_adam.py` fails if the kernel or
`_init_group` changes shape, so an upgrade cannot silently break it.  A
version joins `TESTED_TORCH` once the lean paths' tests (test_lean_adam.py,
test_stacked_adam.py, test_fast_step.py, test_step_floor.py, test_stacked.py,
test_lean.py, test_train_step.py, test_optim.py, test_profiles.py) pass
under it with the prefix added: 2.14 (the Makefile's pin), 2.13 (2026-11-26,
torch 2.13.0+cpu: 166 passed), 2.11 (2026-11-26, torch 2.11.0+cu130 on the
GPU machine's CPU, the image's torch: 165 passed).  On any other torch those tests skip, saying
why, and tests/awnn/test_lean_adam_unchecked.py checks the fallback.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.optim import adam as _adam
from torch.optim import optimizer as _optimizer

__all__ = ["LeanAdam", "SWITCH", "TESTED_TORCH", "UNWRAPPED", "enabled", "fused_adam", "kernel_applies", "make_adam"]

SWITCH = "AWNN_LEAN_ADAM"
TESTED_TORCH = ("2.14.", "2.13.", "2.11.")  # version prefixes the kernel's signature and CPU behaviour were checked against (see above)
_warned: list[str] = []
_ONE = torch.tensor(1.0, dtype=torch.float32)  # never written: the step counters' increment


def enabled() -> bool:
    """The switch is on and the installed torch is a checked one."""
    if os.environ.get(SWITCH, "1") == "0":
        return False
    version = torch.__version__
    if not version.startswith(TESTED_TORCH) or not hasattr(torch, "_fused_adam_"):
        if version not in _warned:
            _warned.append(version)
            print(f"awnn: torch {version} is not one the lean Adam was checked against {TESTED_TORCH}: "
                  f"the trainer uses torch.optim.Adam", file=sys.stderr)
        return False
    return True


def make_adam(groups: list[dict[str, Any]], lean: bool = True, **kwargs: Any) -> torch.optim.Adam:
    """A LeanAdam when `lean` and the switch allows it, else torch.optim.Adam
    (both with `foreach=True`: the reference's flags)."""
    cls = LeanAdam if lean and enabled() else torch.optim.Adam
    return cls(groups, foreach=True, **kwargs)


def _plain(group: dict[str, Any]) -> bool:
    """Flags the kernel computes as the reference does."""
    return not (group["amsgrad"] or group["maximize"] or group["capturable"] or group["differentiable"]
                or group.get("decoupled_weight_decay", False) or torch.is_tensor(group["lr"]))


def _dense_cpu(tensors: list[torch.Tensor], dtype: torch.dtype) -> bool:
    for t in tensors:
        if t.device.type != "cpu" or t.dtype != dtype or not t.is_contiguous():
            return False
    return True


def _moment_fits(m: Any, p: torch.Tensor, dtype: torch.dtype) -> bool:
    """`m` may be handed to the kernel as a moment of `p`: a dense CPU tensor
    of `dtype` and of p's shape."""
    return torch.is_tensor(m) and m.shape == p.shape and m.device.type == "cpu" and m.dtype == dtype and m.is_contiguous()


def kernel_applies(tensors: list[torch.Tensor]) -> bool:
    """Whether `fused_adam` may update these tensors: the switch is on and
    they are plain dense CPU tensors of one floating dtype (the kernel
    misreads strided views; see the module docstring)."""
    if not tensors or not enabled():
        return False
    dtype = tensors[0].dtype
    return dtype.is_floating_point and not dtype.is_complex and _dense_cpu(tensors, dtype)


def fused_adam(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
               steps: list[torch.Tensor], lr: float, betas: tuple[float, float], weight_decay: float, eps: float) -> None:
    """One Adam update (coupled L2 `weight_decay`, bias corrections from each
    tensor's `steps` entry, already incremented) of every tensor, by torch's
    fused CPU kernel: what torch.optim.Adam computes, rounded in another order.
    Only where `kernel_applies`.  The stacked trainer's Adam (awnn/stacked.py)
    uses it too."""
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=lr, beta1=betas[0],
                       beta2=betas[1], weight_decay=weight_decay, eps=eps, maximize=False)


def _adam_step(optimizer: torch.optim.Adam, closure=None):
    """torch.optim.Adam.step without the optimizer hooks' wrapper (the hooks
    have run already for this call; torch wraps the class's step once the
    first Adam is made, `hooked`)."""
    step = torch.optim.Adam.step
    if getattr(step, "hooked", False):
        step = step.__wrapped__
    return step(optimizer, closure)


# torch.optim.Optimizer's methods that torch wraps in `torch._disable_dynamo`
# (torch/_compile.py): the wrapper's first call imports torch._dynamo, only to
# keep a torch.compile trace out of the method.  LeanAdam is never traced (the
# product compiles nothing; its step is torch's fused kernel, called directly),
# so it calls the methods themselves (`__wrapped__`, set by functools.wraps):
# a trial process then never imports torch._dynamo - 1.1 CPU-s of a worker's
# ~3.6 s start on a 2-core Xeon (search/warm.py no longer imports it either).
# tests/awnn/test_lean_adam.py fails if torch stops wrapping them this way.
UNWRAPPED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def _unwrapped(name: str):
    method = getattr(_optimizer.Optimizer, name)
    return getattr(method, "__wrapped__", method)


class LeanAdam(torch.optim.Adam):
    """torch.optim.Adam whose step is one `torch._fused_adam_` call per param
    group where that computes the same update (see the module docstring), and
    whose other methods skip torch's import of torch._dynamo (`UNWRAPPED`)."""

    lean_steps = 0  # steps taken by the kernel (tests and benchmarks read it)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        return _unwrapped("add_param_group")(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        return _unwrapped("zero_grad")(self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return _unwrapped("state_dict")(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return _unwrapped("load_state_dict")(self, state_dict)

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None or any(g["differentiable"] for g in self.param_groups):
            return _adam_step(self, closure)
        return self._step()

    def quick_step(self) -> None:
        """`step()` without the wrapper torch puts around every optimiser's step
        (a profiler record and the hook loops: ~20 us a step on a CPU) when no
        step hook is registered, on this optimiser or globally; else `step()`.
        (Not for an optimiser an LR scheduler drives: the scheduler counts the
        wrapped calls.)"""
        if self._hooked():
            self.step()
            return
        with torch.no_grad():
            self._step()

    def _step(self) -> None:
        work = self._memo_work()
        if work is None:
            work = self._collect()
            if work is None:
                return self._reference_step()
        for group, params, grads, exp_avgs, exp_avg_sqs, steps in work:
            torch._foreach_add_(steps, _ONE, alpha=1.0)  # (as torch's: a tensor operand, 1/3 the time of a Python 1.0 on CPU steps)
            fused_adam(params, grads, exp_avgs, exp_avg_sqs, steps, group["lr"], group["betas"], group["weight_decay"], group["eps"])
        self.lean_steps += 1
        return None

    def step_with(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> bool:
        """One kernel step with `grads`, the gradients of `params` (the single
        param group's parameters, in its order), without setting `.grad`: the
        Trainer's written-out step (awnn/train_step.py) hands its gradients
        over directly (setting five `.grad`s and walking them back took ~35 us
        of a 1-layer SpiralHard step on a CPU).  Also one increment of the
        step counters a step: they are made 0-d views of one buffer (still a
        tensor per parameter, torch.optim.Adam's state layout).

        Returns False, having done nothing, where this step does not apply
        (more than one group, a parameter without state yet, a step hook, a
        flag the kernel does not carry, a tensor it misreads, the switch off);
        the caller then sets the gradients and calls `step()`."""
        direct = self.direct(params)
        if direct is None:
            return False
        _, held, exp_avgs, exp_avg_sqs, steps, counter = direct
        for g, p in zip(grads, held):
            if g.dtype != p.dtype or not g.is_contiguous() or g.shape != p.shape:
                return False
        group = self.param_groups[0]
        counter.add_(_ONE)
        fused_adam(held, grads, exp_avgs, exp_avg_sqs, steps, group["lr"], group["betas"], group["weight_decay"], group["eps"])
        self.lean_steps += 1
        return True

    def direct(self, params: list[torch.Tensor]) -> tuple | None:
        """(group, params, exp_avgs, exp_avg_sqs, steps, counter): what the kernel
        is handed for `params` (the single group's parameters, in its order),
        valid now, or None where the kernel step does not apply (`_direct_build`).

        Checked every step: the group, the parameters and their step counters
        are the ones held, no hook is registered, every parameter is dense and
        its moments have its shape (the kernel checks no shape: a parameter
        resized without its state would have it write out of bounds).  A
        width update replaces the moments of the parameters it resizes
        (awnn/optim.py); those entries are refreshed in place, after the
        checks `_direct_build` makes (a dense CPU tensor of the parameters'
        dtype), instead of rebuilding everything (~45 us of a step that
        follows a resize, on a CPU).  Anything else rebuilds."""
        direct = self.__dict__.get("_direct")
        if direct is not None:
            group, held, exp_avgs, exp_avg_sqs, steps, _ = direct
            groups = self.param_groups
            if len(groups) == 1 and groups[0] is group and len(params) == len(held) and not self._hooked():
                state = self.state
                dtype = held[0].dtype
                for i, (p, q, t) in enumerate(zip(params, held, steps)):
                    st = state.get(p)
                    if p is not q or st is None or st.get("step") is not t or not p.is_contiguous():
                        break
                    m, v = st.get("exp_avg"), st.get("exp_avg_sq")
                    if m is not exp_avgs[i] or v is not exp_avg_sqs[i]:
                        if not (_moment_fits(m, p, dtype) and _moment_fits(v, p, dtype)):
                            break
                        exp_avgs[i], exp_avg_sqs[i] = m, v
                    elif m.shape != p.shape or v.shape != p.shape:
                        break
                else:
                    return direct
        return self._direct_build(params)

    def _direct_build(self, params: list[torch.Tensor]) -> tuple | None:
        """(group, params, exp_avgs, exp_avg_sqs, steps, counter) for `step_with`,
        the step counters made views of `counter`; None where it does not apply."""
        self.__dict__["_direct"] = None
        groups = self.param_groups
        if len(groups) != 1 or not enabled() or self._hooked():
            return None
        group = groups[0]
        held = group["params"]
        if len(held) != len(params) or any(p is not q for p, q in zip(params, held)) or not _plain(group):
            return None
        entries = [self.state.get(p) for p in params]
        if not all(st and torch.is_tensor(st.get("exp_avg")) and torch.is_tensor(st.get("exp_avg_sq")) and torch.is_tensor(st.get("step"))
                   for st in entries):
            return None  # (the first step makes the state: the caller's `step()`)
        exp_avgs = [st["exp_avg"] for st in entries]
        exp_avg_sqs = [st["exp_avg_sq"] for st in entries]
        dtype = params[0].dtype
        if not (dtype.is_floating_point and not dtype.is_complex and _dense_cpu(list(params), dtype)
                and _dense_cpu(exp_avgs, dtype) and _dense_cpu(exp_avg_sqs, dtype)):
            return None
        if any(m.shape != p.shape or v.shape != p.shape for p, m, v in zip(params, exp_avgs, exp_avg_sqs)):
            return None  # (a parameter resized without its state: the kernel, which checks no shape, would write out of bounds)
        old = [st["step"] for st in entries]
        last = self.__dict__.get("_direct_steps")  # (a resize replaces the moments, not the counters: kept)
        if last is not None and len(last[0]) == len(old) and all(t is u for t, u in zip(old, last[0])):
            steps, counter = last
        else:
            if any(t.dim() != 0 or t.device.type != "cpu" for t in old):
                return None
            counter = torch.stack([t.detach() for t in old])  # each parameter's own count (a reset layer's differs)
            steps = list(counter.unbind())
            for st, t in zip(entries, steps):
                st["step"] = t
            self.__dict__["_direct_steps"] = (steps, counter)
        direct = (group, list(params), exp_avgs, exp_avg_sqs, steps, counter)
        self.__dict__["_direct"] = direct
        return direct

    def _hooked(self) -> bool:
        return bool(self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks or _optimizer._global_optimizer_pre_hooks
                    or _optimizer._global_optimizer_post_hooks or any(g["differentiable"] for g in self.param_groups))

    def _memo_work(self) -> list | None:
        """The last kernel step's lists with this step's gradients, when nothing
        in them can have changed: every group holds the same parameters, each
        dense with a dense gradient of its dtype, and each parameter's state
        tensors are the same objects (a resize, awnn/optim.py, or a
        load_state_dict replaces them).  Skips `_init_group`'s walk, ~1/3 of
        a small network's optimiser step on a CPU.  None: collect afresh."""
        memo = self.__dict__.get("_memo")
        if memo is None or len(memo) != len(self.param_groups):
            return None
        work = []
        state = self.state  # (load_state_dict replaces it and its dicts: looked up afresh)
        for (group, params, exp_avgs, exp_avg_sqs, steps), current in zip(memo, self.param_groups):
            held = current["params"]
            if current is not group or len(held) != len(params) or not _plain(group):
                return None
            grads = []
            for p, q, m, v, t in zip(held, params, exp_avgs, exp_avg_sqs, steps):
                g, st = p.grad, state.get(p)
                if (p is not q or st is None or g is None or g.dtype != p.dtype or g.is_sparse or not g.is_contiguous() or not p.is_contiguous()
                        or st.get("exp_avg") is not m or st.get("exp_avg_sq") is not v or st.get("step") is not t):
                    return None
                grads.append(g)
            work.append((group, params, grads, exp_avgs, exp_avg_sqs, steps))
        return work

    def _collect(self) -> list | None:
        """Every group's lists for the kernel (Adam's `_init_group`: the state
        made where missing), or None where the kernel does not apply; kept for
        `_memo_work` when every parameter has its gradient."""
        work = []
        memo = []
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            exp_avgs: list[torch.Tensor] = []
            exp_avg_sqs: list[torch.Tensor] = []
            steps: list[torch.Tensor] = []
            complex_ = self._init_group(group, params, grads, exp_avgs, exp_avg_sqs, [], steps)
            memo.append((group, params, exp_avgs, exp_avg_sqs, steps)
                        if len(params) == len(group["params"]) else None)
            if not params:
                continue
            dtype = params[0].dtype
            if complex_ or not _plain(group) or not dtype.is_floating_point:
                return None
            for ts in (params, grads, exp_avgs, exp_avg_sqs):
                if not _dense_cpu(ts, dtype):
                    return None
            work.append((group, params, grads, exp_avgs, exp_avg_sqs, steps))
        self.__dict__["_memo"] = memo if all(m is not None and m[1] for m in memo) else None
        return work

    def _reference_step(self) -> None:
        """torch.optim.Adam's step, its body (not differentiable: no closure)."""
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            exp_avgs: list[torch.Tensor] = []
            exp_avg_sqs: list[torch.Tensor] = []
            max_exp_avg_sqs: list[torch.Tensor] = []
            steps: list[torch.Tensor] = []
            beta1, beta2 = group["betas"]
            has_complex = self._init_group(group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps)
            _adam.adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad=group["amsgrad"],
                       has_complex=has_complex, beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                       eps=group["eps"], maximize=group["maximize"], foreach=group["foreach"], capturable=group["capturable"],
                       differentiable=group["differentiable"], fused=group["fused"], grad_scale=getattr(self, "grad_scale", None),
                       found_inf=getattr(self, "found_inf", None), decoupled_weight_decay=group.get("decoupled_weight_decay", False))
        return None
