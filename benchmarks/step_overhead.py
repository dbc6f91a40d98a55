"""Cost of one AWNN training step relative to a fixed-width MLP of the same width.

A full step is: width update (AWNN only), forward, ELBO (plain cross-entropy
for the fixed MLP), backward, Adam step.  Batch 128 of SpiralHard's inner
training split, torch threads 1.  The AWNN width moves during training, so
the AWNN is measured in windows and after each window a fixed MLP with
that window's mean AWNN width per layer runs as many steps (interleaved, so
machine noise hits both alike).  Prints one JSON object as its last line:

    ratio_1_layer, ratio_4_layers            AWNN median step / fixed median step (CPU)
    awnn_us_*, fixed_us_*, width_*           the raw medians (microseconds) and widths
    gpu: {...}                               the same on CUDA, when a GPU is present

The AWNN runs in the `authors` profile unless `--awnn-profile paper-text` is given
(renormalised importances, optimiser reset on resize, ...: see the README).

Usage:  python benchmarks/step_overhead.py [--steps 1500] [--device cpu|cuda|all] [--awnn-profile authors|paper-text]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.train import Trainer  # noqa: E402


def make_stepper(trainer: Trainer):
    """The trainer's own step: width update (AWNN), forward, ELBO, backward, optimiser."""
    prior = trainer.rate_prior(1)
    adaptive = bool(trainer.blocks)

    def step(x, y):
        if adaptive:
            trainer.update_widths()
        trainer.train_step(x, y, prior)

    return step


def batches(x, y, batch, device, gen):
    while True:
        perm = torch.randperm(len(y), generator=gen)
        for s in range(0, len(y) - batch + 1, batch):
            idx = perm[s : s + batch].to(device)
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


def measure(layers: int, device: torch.device, steps: int, windows: int = 8) -> dict:
    """AWNN steps in windows; after each window, a fixed MLP with that window's
    mean AWNN width per layer runs as many steps.  The AWNN width drifts while
    it trains, so each window is compared with a fixed MLP of its own width."""
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", device)
    base = {"task": "spiralhard", "split": "inner", "hidden_layers": layers, "activation": "relu", "batch_size": 128,
            "optimizer": "adam", "lr": 0.01, "device": device.type}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": PROFILE}))
    a_step = make_stepper(awnn)
    it = batches(x, y, 128, device, torch.Generator().manual_seed(0))
    timed(a_step, it, 300, device)  # warm-up: capacity buffers, allocator, first width moves
    per_window = max(50, steps // windows)
    a_times: list[float] = []
    f_times: list[float] = []
    widths: list[float] = []
    changes = 0
    for _ in range(windows):
        seen = []
        before = list(awnn.model.widths)
        for _ in range(per_window):
            a_times += timed(a_step, it, 1, device)
            seen.append(sum(awnn.model.widths) / layers)
            changes += awnn.model.widths != before
            before = list(awnn.model.widths)
        width = max(1, round(statistics.fmean(seen)))
        widths.append(width)
        fixed = Trainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
        f_step = make_stepper(fixed)
        timed(f_step, it, 30, device)  # warm-up
        f_times += timed(f_step, it, per_window, device)
    a, f = statistics.median(a_times), statistics.median(f_times)
    return {
        "awnn_us": round(a * 1e6, 1),
        "fixed_us": round(f * 1e6, 1),
        "ratio": round(a / f, 3),
        "mean_width": round(statistics.fmean(widths), 1),
        "width_change_fraction": round(changes / len(a_times), 3),
    }


def measure_device(device: torch.device, steps: int) -> dict:
    """ratio_/awnn_us_/fixed_us_/width_/width_change_fraction_ for 1 and 4 layers."""
    out: dict = {}
    for layers, name in ((1, "1_layer"), (4, "4_layers")):
        r = measure(layers, device, steps)
        print(f"{device.type} {name}: awnn {r['awnn_us']} us, fixed {r['fixed_us']} us (mean width {r['mean_width']}, "
              f"width changed at {100 * r['width_change_fraction']:.0f}% of steps), ratio {r['ratio']}", file=sys.stderr)
        out[f"ratio_{name}"] = r["ratio"]
        out[f"awnn_us_{name}"] = r["awnn_us"]
        out[f"fixed_us_{name}"] = r["fixed_us"]
        out[f"width_{name}"] = r["mean_width"]
        out[f"width_change_fraction_{name}"] = r["width_change_fraction"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    ap.add_argument("--awnn-profile", choices=["authors", "paper-text"], default="authors", help="the AWNN's awnn_profile (default authors)")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.awnn_profile
    torch.set_num_threads(1)
    out: dict = {"batch": 128, "threads": 1, "steps": args.steps, "torch": torch.__version__, "awnn_profile": args.awnn_profile}
    if args.device in ("cpu", "all"):
        out.update(measure_device(torch.device("cpu"), args.steps))
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        out["gpu"] = {"name": torch.cuda.get_device_name(0), **measure_device(torch.device("cuda"), args.steps)}
    elif args.device == "cuda":
        out["gpu"] = None
        print("no CUDA device: GPU figures skipped", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
