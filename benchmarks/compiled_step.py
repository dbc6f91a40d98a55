"""Would compiled steps meet issue #30's step ratio (AWNN step / fixed step
<= 1.15, 1 hidden layer, CPU)?  Both steps' arithmetic compiled by
torch.compile (inductor: C++ loops, the elementwise ops fused), each against
the other, and each against the eager steps trials take today.

    awnn_eager      the product's AWNN step (awnn/train.py, as trials take it)
    awnn_compiled   the same arithmetic as benchmarks/step_floor.py's inline
                    floor (1 layer, `authors`: renormalised importances, both
                    priors), its forward and backward one compiled function
                    (dynamic shapes: no recompilation when the width moves),
                    Algorithm 1's width update and the lean Adam's kernel
                    left as they are (eager Python)
    lean_eager      a fixed MLP of the AWNN's mean width in the lean loop
                    (awnn/lean.py: how fixed-grid trials train)
    lean_compiled   the same with its written-out forward and backward
                    (awnn/stacked_grad.forward_backward) compiled

Before timing, each compiled step is checked against its eager one: from the
same state both take `--check` steps and must agree to float32 rounding
(largest parameter difference <= CHECK_TOL, a tenth of one Adam step at lr
0.01), else the script fails.  Compiled kernels round in another order, and
Adam divides by sqrt(v): on an AMD EPYC (AVX-512) 6 steps differ by up to
1.2e-4, the same arithmetic uncompiled (out of place) by 1.5e-5; a wrong
term of the step (a prior's term, the renormalisation, a gradient 5% off)
moves them 5e-3 or more in 6 steps.  (Adam does not see a whole
gradient's scale: a bias gradient 5% off moves them 4.6e-5, below any
rounding bound.)  The compiled AWNN arithmetic is checked
against step_floor.py's floor step, which that script checks bit for bit
against the product step.  Nothing imports this: a measurement, not a
training path.

Compilation costs wall time in every new process (the first call): the JSON
gives it (`*_compile_s`); inductor's on-disk cache (/tmp/torchinductor_<user>)
makes a second process's compile much shorter than the first's.

Runs as a trial's process does: one torch thread, float denormals flushed.
Needs a C++ compiler (inductor's CPU backend).  Prints one JSON object as its
last line: medians and means (us) of the four steps, the ratios, the mean
width, the compile seconds and the checks.

Usage:  python benchmarks/compiled_step.py [--windows 8] [--per-window 150] [--check 20]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.lean import LeanTrainer  # noqa: E402
from awnn.lean_adam import fused_adam  # noqa: E402
from awnn.stacked_grad import forward_backward  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402
from step_floor import AWNN, BASE, check, floor_parts, make_floor_step  # noqa: E402
from step_overhead import batches, make_stepper, timed  # noqa: E402


CHECK_TOL = 1e-3  # the compiled-vs-eager check's largest parameter difference (see the docstring)


def awnn_math(x, y, w0t, b0, w1, b1c, j1, k):
    """The floor step's forward and backward (benchmarks/step_floor.py), out of
    place, for torch.compile: k = (-rate, c0, e, s, sigma, the rate's prior
    gradient less the decay) as a tensor (a Python float would be a constant
    of the compiled code: a recompilation at every step)."""
    neg_rate, c0, e, s, sigma, gconst = k.unbind()
    a = torch.relu(torch.addmm(b0, x, w0t))
    big_e = torch.exp(c0 + neg_rate * j1)  # f / S
    p = big_e + e  # renormalised importances
    scaled = w1 * p
    out = torch.addmm(b1c, scaled, a.t()).t()
    inv = 1.0 / out.shape[0]
    logp = torch.log_softmax(out, -1)
    target = y.unsqueeze(1)
    loss = logp.gather(1, target).mean().neg()
    g = (logp.exp() * inv).scatter_add(1, target, torch.full_like(target, -inv, dtype=logp.dtype))
    db1 = g.sum(0)
    gs = torch.mm(g.t(), a)
    ga = torch.mm(g, scaled)
    dw1 = gs * p
    dp = (1.0 - s * j1) * big_e - sigma * p
    grho = ((gs * w1).sum(0) * dp).sum().reshape(1) + gconst
    gz = torch.where(a > 0, ga, 0.0)
    db0 = gz.sum(0)
    dw0 = torch.mm(gz.t(), x)
    return loss, grho, dw0, db0, dw1, db1


def make_compiled_awnn_step(trainer: Trainer, math):
    """The floor step with its arithmetic `math` (awnn_math, compiled or not)."""
    fp = floor_parts(trainer)
    _, _, b0, w1, _ = fp.params
    consts = torch.zeros(6)

    @torch.no_grad()  # (as the product's step_grads: no autograd graph)
    def step(x, y):
        w0t, b1c, j1, direct, r, (neg_rate, c0, e, s, sigma) = fp.begin()
        gconst = (-neg_rate - fp.rate_mean) * s * fp.rate_scale - fp.decay * r
        consts.copy_(torch.tensor((neg_rate, c0, e, s, sigma, gconst)))
        loss, *grads = math(x, y, w0t, b0, w1, b1c, j1, consts)
        _, held, exp_avgs, exp_avg_sqs, steps, counter = direct
        counter.add_(1)
        fused_adam(held, grads, exp_avgs, exp_avg_sqs, steps, fp.lr, fp.betas, fp.decay, fp.eps)
        return loss

    return step


def make_lean_step(lean: LeanTrainer, fb):
    """A fixed-grid trial's lean step (step_overhead.make_lean_stepper) with forward and backward `fb`."""
    model, opt = lean.stack.model, lean.stack.optimizer

    def step(x, y):
        fb(model, x.unsqueeze(0), y.unsqueeze(0))
        opt.step()

    return step


def check_lean(width: int, fb, it, steps: int) -> float:
    """Two lean trainers built alike, `steps` steps each on the same batches
    (eager, then `fb`): the largest weight difference."""
    data = [next(it) for _ in range(steps)]
    finals = []
    for f in (forward_backward, fb):
        lean = LeanTrainer(TrainConfig.from_dict({**BASE, "model": "fixed", "width": width}))
        step = make_lean_step(lean, f)
        for x, y in data:
            step(x, y)
        finals.append([w.detach().clone() for w in lean.stack.model.weights + lean.stack.model.biases])
    return max(float((a - b).abs().max()) for a, b in zip(*finals))


def first_call(step, it) -> float:
    t0 = time.perf_counter()
    step(*next(it))
    return round(time.perf_counter() - t0, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--per-window", type=int, default=150)
    ap.add_argument("--check", type=int, default=20, help="steps of each compiled-vs-eager check")
    args = ap.parse_args()
    flushed = worker_setup({"cpus_per_trial": 1, "flush_denormal": True})  # as a trial's process
    torch._dynamo.config.force_parameter_static_shapes = False  # a width update changes the parameters' shapes
    cpu = torch.device("cpu")
    x, y = load_task("spiralhard").tensors("inner", "train", cpu)
    trainer = Trainer(TrainConfig.from_dict(AWNN))
    it = batches(x, y, 128, cpu, torch.Generator().manual_seed(0))
    product = make_stepper(trainer)
    timed(product, it, 300, cpu)  # warm-up: the widths grow, the Adam state is made
    awnn_c = make_compiled_awnn_step(trainer, torch.compile(awnn_math, dynamic=True))
    lean_fb = torch.compile(forward_backward, dynamic=True)
    out: dict = {"torch": torch.__version__, "flush_denormal": flushed}
    saved = (copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict()))
    out["awnn_compile_s"] = first_call(awnn_c, it)
    trainer.model.load_state_dict(saved[0])
    trainer.optimizer.load_state_dict(saved[1])
    w = trainer.model.widths[0]
    probe = LeanTrainer(TrainConfig.from_dict({**BASE, "model": "fixed", "width": w}))
    out["lean_compile_s"] = first_call(make_lean_step(probe, lean_fb), it)
    diffs = {"awnn": check(trainer, awnn_c, make_floor_step(trainer), it, args.check),
             "lean": check_lean(w, lean_fb, it, args.check)}
    out["check_steps"] = args.check
    out["check_max_abs_diff"] = diffs
    bad = {k: v for k, v in diffs.items() if not v <= CHECK_TOL}
    if bad:
        print(json_text({"error": f"a compiled step disagrees with its eager one: max |diff| {bad}", **out}))
        sys.exit(1)
    res: dict[str, list[float]] = {"awnn_eager": [], "awnn_compiled": [], "lean_eager": [], "lean_compiled": []}
    widths = []
    for _ in range(args.windows):
        seen = []
        for name, step in (("awnn_compiled", awnn_c), ("awnn_eager", product)):
            timed(step, it, 5, cpu)
            for _ in range(args.per_window):
                res[name] += timed(step, it, 1, cpu)
                seen.append(trainer.model.widths[0])
        width = max(1, round(statistics.fmean(seen)))  # the lean steps at the width the AWNN steps had
        widths.append(width)
        for name, fb in (("lean_eager", forward_backward), ("lean_compiled", lean_fb)):
            step = make_lean_step(LeanTrainer(TrainConfig.from_dict({**BASE, "model": "fixed", "width": width})), fb)
            timed(step, it, 35, cpu)
            res[name] += timed(step, it, args.per_window, cpu)
    med = {k: statistics.median(v) * 1e6 for k, v in res.items()}
    mean = {k: statistics.fmean(v) * 1e6 for k, v in res.items()}
    out["mean_width"] = round(statistics.fmean(widths), 1)
    for k in res:
        out[f"{k}_us_median"] = round(med[k], 1)
        out[f"{k}_us_mean"] = round(mean[k], 1)
    for a, b in (("awnn_compiled", "lean_compiled"), ("awnn_compiled", "lean_eager"), ("awnn_eager", "lean_eager")):
        out[f"ratio_{a}_vs_{b}"] = round(med[a] / med[b], 3)
        out[f"ratio_{a}_vs_{b}_mean"] = round(mean[a] / mean[b], 3)
    print(json_text(out))


if __name__ == "__main__":
    main()
