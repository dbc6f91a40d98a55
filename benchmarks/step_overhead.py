"""Cost of one AWNN training step relative to a fixed-width MLP of the same width.

A full step is: width update (AWNN only), forward, ELBO (plain cross-entropy
for the fixed MLP), backward, Adam step.  Batch 128 of SpiralHard's inner
training split, torch threads 1.  The AWNN width moves during training, so
the AWNN is measured in windows and after each window a fixed MLP with
that window's mean AWNN width per layer runs as many steps (interleaved, so
machine noise hits both alike).  Prints one JSON object as its last line:

    ratio_1_layer, ratio_4_layers            AWNN median step / fixed median step (CPU), both in
                                             awnn.train.Trainer (the AWNN's own overhead)
    ratio_vs_lean_1_layer, ..._4_layers      AWNN median step / the same fixed MLP's median step
                                             in the lean loop (awnn/lean.py: how fixed-grid trials
                                             train since issue #30), i.e. per step, what an AWNN
                                             trial costs against a fixed-grid trial of its width
    ratio_vs_lean_paired_*, ..._window_range_*
                                             the same ratio per window (the AWNN's window against
                                             the fixed MLP timed right after it, at its width):
                                             the median and the range of the windows' ratios
    awnn_us_*, fixed_us_*, width_*           the raw medians (microseconds) and widths
    awnn_still_us_*, awnn_moving_us_*        CPU: the median AWNN step (width update + step) that kept
                                             its widths and one that moved a width (resize included)
    width_move_share_of_excess_*             the width moves' share of the AWNN's excess over the lean
                                             step: fraction of moving steps x (moving - still) / (AWNN -
                                             lean); ratio_vs_lean_without_moves_*: still / lean
    products_us_*, layout_asymmetry_*        CPU: the two 2-class products of each arm's read-out
                                             (the product, its weight's gradient) timed alone on
                                             the trainers' own tensors at the end, at the AWNN's
                                             width, and the fixed
                                             arm's total over the AWNN's: a value well above 1 says
                                             `ratio_vs_lean` measures the arms' layouts
                                             (awnn/products.py), not the AWNN's work; a warning
                                             is printed above 1.5 (2026-12-02, an AMD EPYC: 2.7-3.6
                                             with the lean loop's products as written, 1.30-1.43
                                             since: the stack keeps W as (in, out), so its
                                             transposes copy W^T and the result, ~3% of a step)
    ops_* (CPU, --profile)                  the torch operators a step dispatches (the profiler's top-level
                                             ops; the C pass's ctypes calls are not ops): the AWNN's steps that
                                             keep their widths (awnn_ops_still) and that move one
                                             (awnn_ops_moving), the lean fixed step's (lean_ops), one cheap
                                             op's time (dispatch_us) and dispatch_floor_ratio = (lean step +
                                             the AWNN's extra ops x dispatch_us) / lean step: what the AWNN's
                                             ops alone would cost it (2026-12-06, an AMD EPYC: 36 ops still,
                                             62 moving, 35 lean, floor 1.05 against a measured 1.42: the excess
                                             is host Python and ctypes around the ops, not more ops)
    gpu: {...}                               the same on CUDA, when a GPU is present,
                                             for every --batch (suffix _b<batch>), with
                                             kernel launches and host syncs per step

On CUDA a step's time is its share of a window of consecutive steps timed
between two synchronisations (throughput, as in training: the host queues
kernels ahead of the GPU, and a host read of the rate stalls that queue),
not the latency of one step between synchronisations, which would hide
the cost of host syncs.  Launches per step come from the torch profiler
(`--profile`): CUDA kernels, memory copies and sets recorded on the device,
and on the host the runtime calls that launch them or wait for the device.

The AWNN runs in the `authors` profile unless `--awnn-profile paper-text` is given
(renormalised importances, optimiser reset on resize, ...: see docs/design.md, "Profiles").

Both trainers use the Trainer's Adam, on a CPU the lean one (awnn/lean_adam.py,
issue #30: torch's fused kernel, ~0.2 ms a step less for both); with
AWNN_LEAN_ADAM=0 both use torch.optim.Adam.  The JSON's `adam` says which.
A lighter optimiser lowers both steps by about the same time, so it raises the
ratio: what is left is the AWNN's own work (width update, importances, rho).

On a CPU the AWNN's element-wise work (importances, their product, rho's
gradient, the relu around them) runs as one C pass each way (awnn/native.py,
built at first use with the system compiler) where it builds; with
AWNN_NATIVE=0, or with no compiler, as torch ops.  The JSON's `c_pass` says which.

Both run as a trial's process does: one torch thread, and on the CPU float
denormals flushed to zero (search/trial_common.worker_setup; `--keep-denormals`
keeps them, the JSON's `flush_denormal` says which).

Usage:  python benchmarks/step_overhead.py [--steps 1500] [--device cpu|cuda|all] [--batch 128,1024] [--profile]
                                          [--awnn-profile authors|paper-text] [--keep-denormals]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn import products  # noqa: E402
from awnn.lean import LeanTrainer  # noqa: E402
from awnn.stacked_grad import forward_backward  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402


def make_stepper(trainer: Trainer):
    """The trainer's own step: width update (AWNN), forward, ELBO, backward, optimiser."""
    prior = trainer.rate_prior(1)
    adaptive = bool(trainer.blocks)

    def step(x, y):
        if adaptive:
            trainer.update_widths()
        trainer.train_step(x, y, prior)

    return step


def make_lean_stepper(lean: LeanTrainer):
    """A fixed-grid trial's step as the lean loop takes it (awnn/stacked.py's
    _train_epoch at N = 1): the written-out forward and backward, the flat Adam."""
    stack = lean.stack
    model, opt = stack.model, stack.optimizer

    def step(x, y):
        forward_backward(model, x.unsqueeze(0), y.unsqueeze(0))
        opt.step()

    return step


def batches(x, y, batch, device, gen):
    while True:
        perm = torch.randperm(len(y), generator=gen).to(device)  # one copy per pass, as the trainer does
        for s in range(0, len(y) - batch + 1, batch):
            idx = perm[s : s + batch]
            yield x[idx], y[idx]


def timed(step, it, n, device) -> list[float]:
    """Per-step times.  On CPU: the training thread's CPU time (torch runs on
    this one thread), which equals wall time on an idle machine and is not
    inflated when other processes compete for the cores.  On CUDA: wall time
    between synchronisations."""
    out = []
    if device.type == "cuda":
        sync, clock = torch.cuda.synchronize, time.perf_counter
    else:
        sync, clock = (lambda: None), time.thread_time
    for _ in range(n):
        x, y = next(it)
        sync()
        t0 = clock()
        step(x, y)
        sync()
        out.append(clock() - t0)
    return out


PROFILE = "authors"

# above this, the fixed arm's read-out products cost so much more than the AWNN's that the ratio measures layouts
LAYOUT_ASYMMETRY_WARN = 1.5


def _interleaved_medians_us(fns: dict, n: int = 400) -> dict:
    """Median us of each function, the functions called in turn (drift hits all alike)."""
    for _ in range(30):
        for fn in fns.values():
            fn()
    times: dict = {k: [] for k in fns}
    for _ in range(n):
        for k, fn in fns.items():
            t0 = time.thread_time()
            fn()
            times[k].append(time.thread_time() - t0)
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


def read_out_products(awnn: Trainer, make_lean, batch: int) -> dict:
    """Each arm's 2-class read-out product and its weight's gradient, timed
    alone (median us) at the AWNN's current width, on the trainers' own
    read-out tensors (their layouts and strides: the AWNN's, and those of
    `make_lean(width)`'s fixed MLP) with random inputs, as their steps take
    them: awnn/fast_step.py's (the importances folded into a dense copy of W,
    then products.affine; the gradient g^T a, already (classes, D)) and
    awnn/stacked_grad.py's (products.stacked_affine, products.stacked_weight_grad_)."""
    layer = awnn.model.layers[-1]
    w, b = layer.weight.detach(), layer.bias.detach()  # (classes, D): views of the capacity buffers
    classes, d_awnn = w.shape
    h, g = torch.randn(batch, d_awnn).relu_(), torch.randn(batch, classes)
    scaled = w * torch.rand(d_awnn)  # fast_step's scaled = W * p: a dense (classes, D) tensor
    model = make_lean(d_awnn).stack.model
    sw, sb = model.weights[-1], model.biases[-1]  # (1, D, classes), (1, 1, classes): views of the stack's flat buffer
    sh, sg = torch.randn(1, batch, d_awnn).relu_(), torch.randn(1, batch, classes)
    grad = torch.empty_like(sw)
    with torch.no_grad():
        t = _interleaved_medians_us({
            ("awnn", "read_out"): lambda: products.affine(h, scaled, b),
            ("awnn", "weight_grad"): lambda: torch.mm(g.t(), h),
            ("fixed", "read_out"): lambda: products.stacked_affine(sb, sh, sw),
            ("fixed", "weight_grad"): lambda: products.stacked_weight_grad_(grad, sh, sg),
        })
    out = {arm: {p: t[(arm, p)] for p in ("read_out", "weight_grad")} for arm in ("awnn", "fixed")}
    totals = {arm: sum(t.values()) for arm, t in out.items()}
    return {"us": {arm: {k: round(v, 1) for k, v in t.items()} for arm, t in out.items()}, "width": d_awnn,
            "asymmetry": round(totals["fixed"] / totals["awnn"], 3)}


def timed_window(step, it, n, device, on_step=None) -> float:
    """Mean time per step of `n` consecutive steps between two synchronisations
    (CUDA: the GPU path's throughput; see the module docstring)."""
    batches_ = [next(it) for _ in range(n)]
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for x, y in batches_:
        step(x, y)
        if on_step is not None:
            on_step()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / n


def measure(layers: int, device: torch.device, steps: int, windows: int = 8, batch: int = 128) -> dict:
    """AWNN steps in windows; after each window, a fixed MLP with that window's
    mean AWNN width per layer runs as many steps.  The AWNN width drifts while
    it trains, so each window is compared with a fixed MLP of its own width.
    On CUDA each window is timed as a whole (and more, shorter windows are used)."""
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", device)
    base = {"task": "spiralhard", "split": "inner", "hidden_layers": layers, "activation": "relu", "batch_size": batch,
            "optimizer": "adam", "lr": 0.01, "device": device.type}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": PROFILE}))
    a_step = make_stepper(awnn)
    it = batches(x, y, batch, device, torch.Generator().manual_seed(0))
    timed(a_step, it, 300, device)  # warm-up: capacity buffers, allocator, first width moves
    cuda = device.type == "cuda"
    if cuda:
        windows = max(windows, 4 * windows)
    per_window = max(50, steps // windows)
    a_times: list[float] = []
    f_times: list[float] = []
    l_times: list[float] = []  # the same fixed MLP's step in the lean loop (how fixed-grid trials train)
    widths: list[float] = []
    window_ratios: list[float] = []  # each window's AWNN median over its lean fixed MLP's (paired: the same minutes)
    moved: list[bool] = []  # CPU: whether each timed AWNN step (a_times, in order) moved a width
    changes = 0
    n_a = 0
    for _ in range(windows):
        a0, l0 = len(a_times), len(l_times)
        seen = []
        before = list(awnn.model.widths)

        def track():
            nonlocal before, changes
            w = awnn.model.widths
            seen.append(sum(w) / layers)
            changes += w != before
            moved.append(w != before)
            before = list(w)

        if cuda:
            a_times.append(timed_window(a_step, it, per_window, device, track))
        else:
            for _ in range(per_window):
                a_times += timed(a_step, it, 1, device)
                track()
        n_a += per_window
        width = max(1, round(statistics.fmean(seen)))
        widths.append(width)
        fixed = Trainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
        f_step = make_stepper(fixed)
        timed(f_step, it, 30, device)  # warm-up
        lean = LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
        l_step = make_lean_stepper(lean)
        timed(l_step, it, 30, device)
        if cuda:
            f_times.append(timed_window(f_step, it, per_window, device))
            l_times.append(timed_window(l_step, it, per_window, device))
        else:
            f_times += timed(f_step, it, per_window, device)
            l_times += timed(l_step, it, per_window, device)
        window_ratios.append(statistics.median(a_times[a0:]) / statistics.median(l_times[l0:]))
    a, f, le = statistics.median(a_times), statistics.median(f_times), statistics.median(l_times)
    out = {
        "awnn_us": round(a * 1e6, 1),
        "fixed_us": round(f * 1e6, 1),
        "ratio": round(a / f, 3),
        "lean_fixed_us": round(le * 1e6, 1),
        "ratio_vs_lean": round(a / le, 3),
        "ratio_vs_lean_paired": round(statistics.median(window_ratios), 3),
        "ratio_vs_lean_window_range": [round(min(window_ratios), 3), round(max(window_ratios), 3)],
        "mean_width": round(statistics.fmean(widths), 1),
        "width_change_fraction": round(changes / n_a, 3),
    }
    if device.type == "cpu":
        out.update(width_move_split(a_times, moved, a, le))
        out["read_out_products"] = read_out_products(awnn, lambda w: LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": w})), batch)
    out["_trainers"] = (awnn, fixed, it, lean)
    return out


def width_move_split(a_times: list[float], moved: list[bool], awnn_median: float, lean_median: float) -> dict:
    """How much of the AWNN's excess over the lean fixed step its width moves
    make (CPU): the median AWNN step (update + step) that moved a width and one
    that did not, and the moves' share of the excess, fraction x (moved - still)
    / (AWNN - lean).  A move costs its resize (~100 us on a 2-core Xeon) and a
    dearer next step: the resize's code evicts the step's from the core's
    caches (benchmarks/cold_step.py)."""
    still = [t for t, m in zip(a_times, moved) if not m]
    moving = [t for t, m in zip(a_times, moved) if m]
    if not still or not moving:
        return {}
    frac = len(moving) / len(a_times)
    extra = statistics.median(moving) - statistics.median(still)
    excess = awnn_median - lean_median
    return {"awnn_still_us": round(statistics.median(still) * 1e6, 1), "awnn_moving_us": round(statistics.median(moving) * 1e6, 1),
            "width_move_share_of_excess": round(frac * extra / excess, 3) if excess > 0 else None,
            "ratio_vs_lean_without_moves": round(statistics.median(still) / lean_median, 3)}


# host-side CUDA runtime/driver calls that launch work or wait for the device
_LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaMemcpyAsync", "cudaMemsetAsync",
                 "cudaGraphLaunch")
_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def profile_launches(awnn: Trainer, fixed: Trainer, it, device: torch.device, n: int = 50) -> dict:
    """Per step, for the AWNN (at its current width) and the last window's fixed
    MLP: device activities (kernels, copies, sets), host launch calls and host
    syncs, counted by the torch profiler over `n` steps, and the names of the
    AWNN's extra kernels."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    names = {}
    for label, trainer in (("awnn", awnn), ("fixed", fixed)):
        step = make_stepper(trainer)
        for _ in range(10):
            step(*next(it))
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step(*next(it))
            torch.cuda.synchronize(device)
        kernels = launches = syncs = 0
        counts: dict[str, int] = {}
        runtime: dict[str, int] = {}
        for e in prof.events():
            dev = str(getattr(e, "device_type", "")).endswith("CUDA")
            if dev:
                kernels += 1
                counts[e.name] = counts.get(e.name, 0) + 1
                continue
            if e.name.startswith("cu"):
                runtime[e.name] = runtime.get(e.name, 0) + 1
            if e.name in _LAUNCH_CALLS:
                launches += 1
            elif e.name in _SYNC_CALLS:
                syncs += 1
        out[f"{label}_runtime_calls_per_step"] = {k: round(v / n, 2) for k, v in sorted(runtime.items(), key=lambda kv: -kv[1])[:12]}
        # the closing synchronize of the profiled window is not a step's
        out[f"{label}_device_ops_per_step"] = round(kernels / n, 2)
        out[f"{label}_launch_calls_per_step"] = round(launches / n, 2)
        out[f"{label}_host_syncs_per_step"] = round(max(0, syncs - 1) / n, 2)
        names[label] = counts
    extra = {k: round((v - names["fixed"].get(k, 0)) / n, 2) for k, v in names["awnn"].items() if v > names["fixed"].get(k, 0)}
    out["awnn_extra_device_ops"] = dict(sorted(extra.items(), key=lambda kv: -kv[1])[:25])
    return out


def count_cpu_ops(awnn: Trainer, lean: LeanTrainer, it, n: int = 300) -> dict:
    """CPU: the torch operators each step dispatches (top-level ops as the torch
    profiler records them; the C pass's two ctypes calls are not among them), for
    the AWNN's steps that keep their widths and those that move one, and for the
    lean loop's fixed step (the last window's width).  With `dispatch_us`, the
    time of one cheap op (torch.empty of a few floats) timed alone, the ops the
    AWNN adds give a floor for its ratio that no rearranging of the same ops
    lowers: (lean step + extra ops x dispatch_us) / lean step."""
    from torch.profiler import ProfilerActivity, profile, record_function

    out: dict = {}
    steps = {"awnn": make_stepper(awnn), "lean": make_lean_stepper(lean)}
    for label, step in steps.items():
        for _ in range(10):
            step(*next(it))
        moved: list[bool] = []
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(n):
                before = list(awnn.model.widths) if label == "awnn" else None
                with record_function(f"awnn_step_{i}"):
                    step(*next(it))
                moved.append(label == "awnn" and list(awnn.model.widths) != before)
        per_step: dict[int, int] = {}
        names: dict[str, int] = {}
        for e in prof.events():
            if e.name.startswith("awnn_step_"):
                i = int(e.name.rsplit("_", 1)[1])
                per_step[i] = len(e.cpu_children)
                for c in e.cpu_children:
                    names[c.name] = names.get(c.name, 0) + 1
        counts = [per_step.get(i, 0) for i in range(n)]
        if label == "awnn":
            still = [c for c, m in zip(counts, moved) if not m]
            moving = [c for c, m in zip(counts, moved) if m]
            out["awnn_ops_still"] = statistics.median(still) if still else None
            out["awnn_ops_moving"] = statistics.median(moving) if moving else None
            out["awnn_ops_mean"] = round(statistics.fmean(counts), 1)
            out["awnn_top_ops"] = {k: round(v / n, 2) for k, v in sorted(names.items(), key=lambda kv: -kv[1])[:15]}
        else:
            out["lean_ops"] = statistics.median(counts)
    probe = torch.empty(4)
    out["dispatch_us"] = round(min(_interleaved_medians_us({"empty": lambda: torch.empty(4), "add": lambda: probe.add_(0.0)}).values()), 2)
    return out


def measure_device(device: torch.device, steps: int, batches_: tuple[int, ...] = (128,), profile: bool = False) -> dict:
    """ratio_/awnn_us_/fixed_us_/width_/width_change_fraction_ for 1 and 4 layers
    (suffixed _b<batch> for batches other than 128, or for every batch when
    several are measured)."""
    out: dict = {}
    for batch in batches_:
        suffix = "" if batches_ == (128,) else f"_b{batch}"
        for layers, name in ((1, "1_layer"), (4, "4_layers")):
            r = measure(layers, device, steps, batch=batch)
            awnn, fixed, it, lean = r.pop("_trainers")
            print(f"{device.type} batch {batch} {name}: awnn {r['awnn_us']} us, fixed {r['fixed_us']} us (mean width {r['mean_width']}, "
                  f"width changed at {100 * r['width_change_fraction']:.0f}% of steps), ratio {r['ratio']}; "
                  f"fixed in the lean loop {r['lean_fixed_us']} us, ratio {r['ratio_vs_lean']}", file=sys.stderr)
            key = f"{name}{suffix}"
            out[f"ratio_{key}"] = r["ratio"]
            out[f"ratio_vs_lean_{key}"] = r["ratio_vs_lean"]
            out[f"ratio_vs_lean_paired_{key}"] = r["ratio_vs_lean_paired"]
            out[f"ratio_vs_lean_window_range_{key}"] = r["ratio_vs_lean_window_range"]
            out[f"lean_fixed_us_{key}"] = r["lean_fixed_us"]
            out[f"awnn_us_{key}"] = r["awnn_us"]
            out[f"fixed_us_{key}"] = r["fixed_us"]
            out[f"width_{key}"] = r["mean_width"]
            out[f"width_change_fraction_{key}"] = r["width_change_fraction"]
            for k in ("awnn_still_us", "awnn_moving_us", "width_move_share_of_excess", "ratio_vs_lean_without_moves"):
                if k in r:
                    out[f"{k}_{key}"] = r[k]
            if "awnn_moving_us" in r:
                print(f"  AWNN step without a width move {r['awnn_still_us']} us, with one {r['awnn_moving_us']} us: the moves make "
                      f"{r['width_move_share_of_excess']} of the excess over the lean step; without moves the ratio is "
                      f"{r['ratio_vs_lean_without_moves']}", file=sys.stderr)
            products_ = r.get("read_out_products")
            if products_ is not None:
                out[f"products_us_{key}"] = products_["us"]
                out[f"layout_asymmetry_{key}"] = products_["asymmetry"]
                print(f"  read-out products (us) at width {products_['width']}: awnn {products_['us']['awnn']}, "
                      f"fixed {products_['us']['fixed']}: fixed / awnn {products_['asymmetry']}", file=sys.stderr)
                if products_["asymmetry"] > LAYOUT_ASYMMETRY_WARN:
                    print(f"  WARNING: the fixed arm's read-out products cost {products_['asymmetry']}x the AWNN's: ratio_vs_lean_{key} "
                          f"measures the two arms' layouts (awnn/products.py), not the AWNN's work", file=sys.stderr)
            if profile and device.type == "cpu":
                try:
                    p = count_cpu_ops(awnn, lean, it)
                    extra = p["awnn_ops_mean"] - p["lean_ops"]
                    p["dispatch_floor_ratio"] = round((r["lean_fixed_us"] + extra * p["dispatch_us"]) / r["lean_fixed_us"], 3)
                except Exception as e:  # noqa: BLE001 - the timings above still count
                    p = {"error": f"{type(e).__name__}: {e}"}
                print(f"  torch ops per step: {json_text(p)}", file=sys.stderr)
                out[f"ops_{key}"] = p
            if profile and device.type == "cuda":
                try:
                    p = profile_launches(awnn, fixed, it, device)
                except Exception as e:  # noqa: BLE001 - the timings above still count
                    p = {"error": f"{type(e).__name__}: {e}"}
                print(f"  launches per step: {json_text(p)}", file=sys.stderr)
                out[f"profile_{key}"] = p
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    ap.add_argument("--batch", default="128", help="comma-separated batch sizes (default 128)")
    ap.add_argument("--profile", action="store_true", help="CUDA: count kernel launches and host syncs per step; CPU: the torch ops per step and the floor they set (torch profiler)")
    ap.add_argument("--awnn-profile", choices=["authors", "paper-text"], default="authors", help="the AWNN's awnn_profile (default authors)")
    ap.add_argument("--keep-denormals", action="store_true", help="keep float denormals on the CPU (trials flush them by default)")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.awnn_profile
    batches_ = tuple(int(b) for b in args.batch.split(","))
    flushed = worker_setup({"cpus_per_trial": 1, "flush_denormal": not args.keep_denormals})  # as a trial's process
    from awnn import lean_adam, native

    out: dict = {"batch": batches_[0] if len(batches_) == 1 else list(batches_), "threads": 1, "steps": args.steps, "torch": torch.__version__,
                 "awnn_profile": args.awnn_profile, "adam": "lean (CPU)" if lean_adam.enabled() else "torch.optim.Adam",
                 "flush_denormal": flushed, "c_pass": native.kernels() is not None}
    if args.device in ("cpu", "all"):
        out.update(measure_device(torch.device("cpu"), args.steps, batches_, args.profile))
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        out["gpu"] = {"name": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                      **measure_device(torch.device("cuda"), args.steps, batches_, args.profile)}
    elif args.device == "cuda":
        out["gpu"] = None
        print("no CUDA device: GPU figures skipped", file=sys.stderr)
    print(json_text(out))


if __name__ == "__main__":
    main()
