"""Cost of one AWNN training step relative to a fixed-width MLP of the same width.

A full step is: width update (AWNN only), forward, ELBO (plain cross-entropy
for the fixed MLP), backward, Adam step.  Batch 128 of SpiralHard's inner
training split, torch threads 1.  The AWNN width moves during training, so
the fixed MLP is built with the AWNN's median width per layer over the
measured steps, and the two are measured in interleaved blocks so that
machine noise hits both alike.  Prints one JSON object as its last line:

    ratio_1_layer, ratio_4_layers            AWNN median step / fixed median step (CPU)
    awnn_us_*, fixed_us_*, width_*           the raw medians (microseconds) and widths
    gpu: {...}                               the same on CUDA, when a GPU is present

Usage:  python benchmarks/step_overhead.py [--steps 1500] [--device cpu|cuda|all]
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
    out = []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(n):
        x, y = next(it)
        sync()
        t0 = time.perf_counter()
        step(x, y)
        sync()
        out.append(time.perf_counter() - t0)
    return out


def measure(layers: int, device: torch.device, steps: int, block: int = 50) -> dict:
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", device)
    base = {"task": "spiralhard", "split": "inner", "hidden_layers": layers, "activation": "relu", "batch_size": 128,
            "optimizer": "adam", "lr": 0.01, "device": device.type}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0}))
    a_step = make_stepper(awnn)
    it = batches(x, y, 128, device, torch.Generator().manual_seed(0))
    timed(a_step, it, 300, device)  # warm-up: let the width settle, fill capacity buffers
    a_times: list[float] = []
    widths = []
    for _ in range(5):
        timed(a_step, it, 20, device)
        widths.extend(awnn.model.widths)
    width = int(statistics.median(widths))
    fixed = Trainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
    f_step = make_stepper(fixed)
    timed(f_step, it, 300, device)
    f_times: list[float] = []
    seen_widths = []
    while len(a_times) < steps:
        a_times += timed(a_step, it, block, device)
        seen_widths.append(sum(awnn.model.widths) / layers)
        f_times += timed(f_step, it, block, device)
    a, f = statistics.median(a_times), statistics.median(f_times)
    return {
        "awnn_us": round(a * 1e6, 1),
        "fixed_us": round(f * 1e6, 1),
        "ratio": round(a / f, 3),
        "fixed_width": width,
        "awnn_mean_width_per_layer": round(statistics.fmean(seen_widths), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out: dict = {"batch": 128, "threads": 1, "steps": args.steps, "torch": torch.__version__}
    if args.device in ("cpu", "all"):
        for layers, name in ((1, "1_layer"), (4, "4_layers")):
            r = measure(layers, torch.device("cpu"), args.steps)
            print(f"cpu {name}: awnn {r['awnn_us']} us, fixed {r['fixed_us']} us (width {r['fixed_width']}), ratio {r['ratio']}", file=sys.stderr)
            out[f"ratio_{name}"] = r["ratio"]
            out[f"awnn_us_{name}"] = r["awnn_us"]
            out[f"fixed_us_{name}"] = r["fixed_us"]
            out[f"width_{name}"] = r["fixed_width"]
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        gpu = {"name": torch.cuda.get_device_name(0)}
        for layers, name in ((1, "1_layer"), (4, "4_layers")):
            r = measure(layers, torch.device("cuda"), args.steps)
            print(f"cuda {name}: awnn {r['awnn_us']} us, fixed {r['fixed_us']} us, ratio {r['ratio']}", file=sys.stderr)
            gpu[f"ratio_{name}"] = r["ratio"]
            gpu[f"awnn_us_{name}"] = r["awnn_us"]
            gpu[f"fixed_us_{name}"] = r["fixed_us"]
            gpu[f"width_{name}"] = r["fixed_width"]
        out["gpu"] = gpu
    elif args.device == "cuda":
        out["gpu"] = None
        print("no CUDA device: GPU figures skipped", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
