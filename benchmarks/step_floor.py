"""How low can a 1-layer AWNN step go in Python on a CPU?  The floor under
`benchmarks/step_overhead.py`'s `ratio_vs_lean_1_layer` (issue #30's target
<= 1.15).

Times three steps on one trainer, in interleaved windows (the AWNN's width
moves while it trains: each window times the floor and the product steps, then
a lean fixed step at the mean width those steps had):

    product  the Trainer's step as trials take it (awnn/train.py: width update,
             then awnn/fast_step.py's straight-line step, the `authors`
             profile's since 2026-11-26; its element-wise work in one C pass
             each way since 2026-12-05, awnn/native.py, where it builds:
             `product_c_pass` says)
    general  the Trainer's general written-out step (awnn/train_step.py's
             forward and backward through the fused node, the lean Adam
             handed the gradients, LeanAdam.step_with): the product step
             before awnn/fast_step.py, and still its reference
    floor    the same arithmetic in torch ops written out inline for this one shape
             (`authors` profile: renormalised importances, relu, 1 hidden
             layer, both priors), with everything that can be cached cached
             (views, the Adam state lists), the weight decay inside Adam's
             kernel, and the width update (Algorithm 1) kept: the least
             Python and the fewest torch calls this design allows
    lean     a fixed MLP of the window's width in the lean loop (awnn/lean.py),
             how fixed-grid trials train

Before timing, the floor step is checked against the product step (its torch
ops, the C pass off for the check): from the
same state (weights, rates, Adam moments, generator) both take `--check`
steps and must agree to float32 rounding (`check_max_abs_diff`), else the
script fails: a fast step that computes something else would be no floor.
The floor is a measurement device, not a training path: nothing imports it.

`--frozen` freezes the widths after the warm-up (no width update, no resize):
what is then left between the steps is the step's own arithmetic and Python.

Runs as a trial's process does: one torch thread, float denormals flushed
(`--keep-denormals` keeps them).

Prints one JSON object as its last line: the medians and means (us) of each
step, ratio_*_vs_lean (median and mean), the final and mean widths and the check.

Usage:  python benchmarks/step_floor.py [--windows 10] [--per-window 120] [--check 20] [--keep-denormals] [--frozen]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.fused import _scratch_like, importance_constants, one_like  # noqa: E402
from awnn.lean import LeanTrainer  # noqa: E402
from awnn.lean_adam import fused_adam  # noqa: E402
from awnn.loss import mean_cross_entropy_grad  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402
from step_overhead import batches, make_lean_stepper, make_stepper, timed  # noqa: E402

BASE = {"task": "spiralhard", "split": "inner", "hidden_layers": 1, "activation": "relu", "batch_size": 128,
        "optimizer": "adam", "lr": 0.01, "device": "cpu"}
AWNN = {**BASE, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}


class FloorParts(NamedTuple):
    """What an inline 1-layer `authors` step needs of a Trainer (see make_floor_step)."""

    model: Any
    opt: Any
    ctrl: Any
    params: list  # rho, w0, b0, w1, b1: the Adam group's order
    decay: float  # the weight prior's coupled decay
    rate_mean: float
    rate_scale: float  # the rate prior's 1 / (std^2 n_obs)
    lr: float
    betas: tuple
    eps: float
    begin: Callable[[], tuple]  # () -> (w0^T, b1 as a column, j + 1, the lean Adam's direct lists, rho, importance constants)


def floor_parts(trainer: Trainer) -> FloorParts:
    """The parameters, prior constants and cached views of `trainer`'s 1-layer
    `authors` AWNN for an inline step (this script's floor, benchmarks/compiled_step.py)."""
    model, opt = trainer.model, trainer.optimizer
    c = trainer.config
    assert c.awnn_profile == "authors" and model.renormalise_importances and model.prior_on_readout and len(model.widths) == 1
    l0, l1 = model.layers[0], model.layers[1]
    w0, b1, rho = l0.weight, l1.bias, model.rho
    ctrl = model.widths_ctrl[0]
    params = [rho, w0, l0.bias, l1.weight, b1]
    prior = trainer.rate_prior(1)
    cache: dict = {}

    def state():
        """(width, w0^T, b1 as a column, j + 1, the Adam lists), rebuilt when a width
        update or a load replaced what they hold (the lean Adam's own checks)."""
        direct = opt.direct(params)
        if direct is None:
            raise RuntimeError("the lean Adam's state is not there yet: take one product step first")
        v = cache.get("v")
        if v is None or v[0] != ctrl.width or v[4] is not direct:
            v = cache["v"] = (ctrl.width, w0.t(), b1.unsqueeze(1), ctrl.index_views()[1], direct)
        return v

    def begin():
        """A step's start: Algorithm 1's width update (as the product step), the
        cached views and Adam lists, rho's host value and the importances' scalars."""
        model.update_width(opt)
        _, w0t, b1c, j1, direct = state()
        r = rho.item()
        return w0t, b1c, j1, direct, r, importance_constants(r, ctrl.width, True)

    group = opt.param_groups[0]
    return FloorParts(model, opt, ctrl, params, trainer._prior_decay, prior.mean, 1.0 / (prior.std ** 2 * trainer.n_obs),
                      c.lr, group["betas"], group["eps"], begin)


def make_floor_step(trainer: Trainer):
    """The inline step (see the module docstring) on `trainer`'s model and Adam state."""
    fp = floor_parts(trainer)
    begin = fp.begin
    rho, w0, b0, w1, b1 = fp.params
    decay, rate_mean, rate_scale, lr, betas, eps = fp.decay, fp.rate_mean, fp.rate_scale, fp.lr, fp.betas, fp.eps
    one, c0_t = one_like(rho), _scratch_like(rho)

    @torch.no_grad()  # (as the product's step_grads: no autograd graph)
    def step(x, y):
        w0t, b1c, j1, direct, r, (neg_rate, c0, e, s, sigma) = begin()
        a = torch.addmm(b0, x, w0t).relu_()
        big_e = torch.add(c0_t.fill_(c0), j1, alpha=neg_rate).exp_()  # f / S
        p = torch.add(big_e, one, alpha=e)  # renormalised importances
        scaled = w1 * p
        out = torch.addmm(b1c, scaled, a.t()).t()
        loss, g = mean_cross_entropy_grad(out, y)
        db1 = g.sum(0)
        gs = torch.mm(g.t(), a)
        ga = torch.mm(g, scaled)
        dw1 = gs * p
        dp = torch.add(one, j1, alpha=-s).mul_(big_e).add_(p, alpha=-sigma)
        grho = torch.mv(gs * w1, dp).sum(0, keepdim=True)
        gz = torch.ops.aten.threshold_backward(ga, a, 0)
        db0 = gz.sum(0)
        dw0 = torch.mm(x.t(), gz).t().contiguous()
        # the rate prior's gradient, less the decay the kernel adds to every tensor (rho has none)
        grho.add_(one, alpha=(-neg_rate - rate_mean) * s * rate_scale - decay * r)
        _, held, exp_avgs, exp_avg_sqs, steps, counter = direct
        counter.add_(one)
        fused_adam(held, [grho, dw0, db0, dw1, db1], exp_avgs, exp_avg_sqs, steps, lr, betas, decay, eps)
        return loss

    return step


def check(trainer: Trainer, floor, product, it, steps: int) -> float:
    """Both steps from the same state for `steps` steps: the largest parameter difference."""
    saved_model = copy.deepcopy(trainer.model.state_dict())
    saved_opt = copy.deepcopy(trainer.optimizer.state_dict())
    data = [next(it) for _ in range(steps)]
    finals = []
    for step in (product, floor):
        trainer.model.load_state_dict(copy.deepcopy(saved_model))
        trainer.optimizer.load_state_dict(copy.deepcopy(saved_opt))
        torch.manual_seed(11)  # the draws of the neurons a width update adds
        for x, y in data:
            step(x, y)
        finals.append([p.detach().clone() for p in trainer.model.parameters()])
    diff = 0.0
    for a, b in zip(*finals):
        if a.shape != b.shape:
            return float("inf")  # the widths went apart
        diff = max(diff, float((a - b).abs().max()))
    return diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=10)
    ap.add_argument("--per-window", type=int, default=120)
    ap.add_argument("--check", type=int, default=20, help="steps of the floor-vs-product check (0: skip)")
    ap.add_argument("--keep-denormals", action="store_true", help="keep float denormals (trials flush them by default)")
    ap.add_argument("--frozen", action="store_true", help="freeze the widths after the warm-up (no width updates)")
    args = ap.parse_args()
    flushed = worker_setup({"cpus_per_trial": 1, "flush_denormal": not args.keep_denormals})  # as a trial's process
    cpu = torch.device("cpu")
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", cpu)
    trainer = Trainer(TrainConfig.from_dict(AWNN))
    it = batches(x, y, 128, cpu, torch.Generator().manual_seed(0))
    product = make_stepper(trainer)
    timed(product, it, 300, cpu)  # warm-up: the widths grow, the Adam state is made
    assert trainer._fast is not None, "the product step is awnn/fast_step.py's here (AWNN_FAST_STEP=0?)"
    fast = trainer._fast

    def general(x, y):
        trainer._fast = None
        try:
            product(x, y)
        finally:
            trainer._fast = fast

    if args.frozen:
        trainer.model.frozen = True
    floor = make_floor_step(trainer)
    # checked against the product's torch ops (the floor's arithmetic); its C pass (awnn/native.py) rounds
    # exp and rho's sum otherwise, and over 20 float32 steps Adam spreads that (~1e-3: tests/awnn/test_native.py
    # compares the two paths in float64)
    native, fast.native = fast.native, None
    try:
        diff = check(trainer, floor, product, it, args.check) if args.check else None
    finally:
        fast.native = native
    if diff is not None and not diff <= 1e-4:
        print(json_text({"error": f"the floor step disagrees with the product step: max |diff| {diff}"}))
        sys.exit(1)
    res: dict[str, list[float]] = {"product": [], "general": [], "floor": [], "lean": []}
    widths: list[int] = []
    for _ in range(args.windows):
        seen: list[int] = []
        for name, step in (("floor", floor), ("product", product), ("general", general)):
            timed(step, it, 5, cpu)
            for _ in range(args.per_window):
                res[name] += timed(step, it, 1, cpu)
                seen.append(trainer.model.widths[0])
        # the width moves while the AWNN trains: the lean step at the width the AWNN steps had (their mean)
        width = max(1, round(statistics.fmean(seen)))
        widths.append(width)
        lean_step = make_lean_stepper(LeanTrainer(TrainConfig.from_dict({**BASE, "model": "fixed", "width": width})))
        timed(lean_step, it, 35, cpu)
        res["lean"] += timed(lean_step, it, args.per_window, cpu)
    med = {k: statistics.median(v) * 1e6 for k, v in res.items()}
    mean = {k: statistics.fmean(v) * 1e6 for k, v in res.items()}
    out = {"width": trainer.model.widths[0], "mean_width": round(statistics.fmean(widths), 1), "flush_denormal": flushed, "frozen": args.frozen,
           "product_c_pass": native is not None,
           "check_steps": args.check, "check_max_abs_diff": diff}
    for k in res:
        out[f"{k}_us_median"] = round(med[k], 1)
        out[f"{k}_us_mean"] = round(mean[k], 1)
    for k in ("product", "general", "floor"):
        out[f"ratio_{k}_vs_lean"] = round(med[k] / med["lean"], 3)
        out[f"ratio_{k}_vs_lean_mean"] = round(mean[k] / mean["lean"], 3)
    print(json_text(out))


if __name__ == "__main__":
    main()
