"""The fixed grid's skinny products taken transposed (awnn/products.py): what
it saves the fixed grid's fused trials on a CPU, measured in one process.

A classifier's read-out with 2 classes makes two products per step whose
result is only 2 columns wide: the read-out itself, h W (B x 2 per slice),
and its weight's gradient, h^T g (D x 2).  For a batch of N slices (bmm)
MKL takes those up to ~5x longer than their transposes.  The AWNN's paths
took their (unbatched) ones transposed since issue #30; the stacked trainer
(the fixed grid, fused) did not until 2026-12-01.  This script measures
both layouts by flipping `awnn.products._ON` (the AWNN_SKINNY_PRODUCTS
switch) in one process:

    products_us   the two products alone, per (width D, slices N, batch B),
                  median us of each layout: "as_written", "transposed" (what
                  the rule picks: where it does not, the written one) and
                  "forced" (the transposed branch at every shape: where the
                  rule's thresholds come from)
    groups        the SpiralHard fixed grid's 180 configs (inner split,
                  `--epochs` epochs) in the groups a comparison fuses them into
                  (`--max-group`, --fuse's CPU default), each group trained by
                  StackedTrainer in each layout in turn, in interleaved rounds;
                  the fastest round's process CPU seconds count (less sensitive
                  to other load than the wall clock; wall seconds too)
    speedup_cpu, speedup_wall
                  as_written / transposed over the whole grid
    max_abs_loss_diff_f64
                  the largest |difference| of a per-epoch train or validation
                  loss between the layouts (4 configs of the first group, float64):
                  the same products in another order, so <= 1e-9 (f64_check_passed)

One torch thread and float denormals flushed, as a trial's process.  Progress
on stderr; the last line of stdout is one JSON object.

Usage:  python benchmarks/skinny_products.py [--epochs 2] [--repeats 2] [--max-group 32]
                                             [--widths 16,128,356] [--sizes 1,4,8,32] [--batches 128]
                                             [--products-only]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

import awnn.products as products  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.machine import cpu_model  # noqa: E402
from awnn.config import TrainConfig  # noqa: E402
from awnn.stacked import StackedTrainer, group_configs  # noqa: E402
from search.commands.common import AUTO_FUSE_CPU  # noqa: E402
from search.grid import load_grid  # noqa: E402
from fused_trials import GRID, timed  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402

LAYOUTS = {"as_written": False, "transposed": True}


def log(msg: str) -> None:
    print(f"[skinny_products] {msg}", file=sys.stderr, flush=True)


def median_us(fn, n: int = 200) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(n):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return round(statistics.median(times) * 1e6, 1)


class _Forced:
    """The transposed branch at every shape: the rule's thresholds set to 0."""

    NAMES = ("_STACKED_READ_OUT_WORK", "_STACKED_WEIGHT_GRAD_WORK", "_STACKED_WEIGHT_GRAD_SLICES")

    def __enter__(self):
        self.saved = {k: getattr(products, k) for k in self.NAMES}
        for k in self.NAMES:
            setattr(products, k, 0)
        products._ON = True

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(products, k, v)


def product_times(width: int, slices: int, batch: int = 128, classes: int = 2) -> dict:
    """The read-out and its weight gradient in each layout: {layout: {product: us}}."""
    h = torch.randn(slices, batch, width).relu_()
    w = torch.randn(slices, width, classes)
    b = torch.randn(slices, 1, classes)
    g = torch.randn(slices, batch, classes)
    grad = torch.zeros(slices, width * classes + 7)[:, 3 : 3 + width * classes].view(-1, width, classes)  # a view, as the stack's
    out = {}
    for name, on in LAYOUTS.items():
        products._ON = on
        out[name] = {"read_out": median_us(lambda: products.stacked_affine(b, h, w)),
                     "weight_grad": median_us(lambda: products.stacked_weight_grad_(grad, h, g))}
    with _Forced():
        out["forced"] = {"read_out": median_us(lambda: products.stacked_affine(b, h, w)),
                         "weight_grad": median_us(lambda: products.stacked_weight_grad_(grad, h, g))}
    products._ON = True
    return out


def grid_groups(epochs: int, max_group: int) -> list[list[TrainConfig]]:
    """The SpiralHard fixed grid's 180 configs on the inner split (model
    selection), `epochs` epochs each, in the groups a comparison fuses them
    into (`--fuse` auto on CPUs: awnn.stacked.group_configs, max_group)."""
    grid = load_grid(GRID)
    configs = [TrainConfig.from_dict({**p, "epochs": epochs, "split": "inner", "device": "cpu", "threads": 1}) for p in grid.configs()]
    return [[configs[i] for i in idx] for idx in group_configs(configs, max_group)]


def label(group: list[TrainConfig]) -> str:
    c = group[0]
    return f"N{len(group)}_{c.hidden_layers}x{max(g.width for g in group)}@{c.batch_size}"


def group_times(task, groups, repeats: int) -> dict:
    """{(layout, group index): (min CPU s, min wall s)} over interleaved rounds."""
    best: dict = {}
    for r in range(repeats):
        log(f"round {r + 1}/{repeats}: {len(groups)} groups")
        for i, group in enumerate(groups):
            for name, on in LAYOUTS.items():
                products._ON = on
                wall, cpu, _ = timed(lambda: StackedTrainer(group, task).run())
                old = best.get((name, i), (float("inf"), float("inf")))
                best[(name, i)] = (min(old[0], cpu), min(old[1], wall))
            log(f"  {label(group)}: " + ", ".join(f"{name} {best[(name, i)][0]:.2f} s CPU" for name in LAYOUTS))
    return best


def loss_diff_f64(task, group: list[TrainConfig]) -> float:
    """max |per-epoch loss difference| between the layouts of one group, in float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task64 = dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})
        histories = []
        for on in LAYOUTS.values():
            products._ON = on
            results = StackedTrainer(group, task64).run()
            histories.append([(e["train_loss"], e["val_loss"]) for r in results for e in r.history])
        return max(abs(a - b) for x, y in zip(*histories, strict=True) for a, b in zip(x, y))
    finally:
        torch.set_default_dtype(old)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=2, help="epochs of every grid config")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved rounds; the fastest counts")
    ap.add_argument("--max-group", type=int, default=AUTO_FUSE_CPU, help="configs per fused group (--fuse; 1: the lean loop)")
    ap.add_argument("--widths", default="16,128,356", help="widths of the products-alone timings")
    ap.add_argument("--sizes", default="1,4,8,32", help="slices of the products-alone timings")
    ap.add_argument("--batches", default="128", help="batch sizes of the products-alone timings")
    ap.add_argument("--products-only", action="store_true", help="time the products alone, not the grid's groups")
    args = ap.parse_args()
    worker_setup({"cpus_per_trial": 1})  # a trial's process: one thread, denormals flushed
    task = load_task("spiralhard")
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    alone = {}
    for batch in ints(args.batches):
        for d in ints(args.widths):
            for n in ints(args.sizes):
                key = f"D{d}_N{n}" + ("" if batch == 128 else f"_B{batch}")
                t = alone[key] = product_times(d, n, batch)
                log(f"products {key}: " + ", ".join(f"{p} {t['as_written'][p]} -> {t['transposed'][p]} us (forced {t['forced'][p]})" for p in t["as_written"]))
    if args.products_only:
        print(json_text({"products_us": alone, "threads": 1, "torch": torch.__version__, "cpu": cpu_model()}))
        return
    groups = grid_groups(args.epochs, args.max_group)
    best = group_times(task, groups, args.repeats)
    per_group = {}
    for i, group in enumerate(groups):
        cpu = {name: best[(name, i)][0] for name in LAYOUTS}
        per_group[f"{i:02d}_{label(group)}"] = {"cpu_s": {k: round(v, 3) for k, v in cpu.items()},
                                               "speedup": round(cpu["as_written"] / cpu["transposed"], 3)}
    total = {name: [sum(best[(name, i)][k] for i in range(len(groups))) for k in (0, 1)] for name in LAYOUTS}
    diff = loss_diff_f64(task, [dataclasses.replace(c, epochs=2) for c in groups[0][:4]])
    products._ON = True
    out = {
        "products_us": alone, "groups": per_group,
        "grid_cpu_s": {k: round(v[0], 2) for k, v in total.items()}, "grid_wall_s": {k: round(v[1], 2) for k, v in total.items()},
        "speedup_cpu": round(total["as_written"][0] / total["transposed"][0], 3),
        "speedup_wall": round(total["as_written"][1] / total["transposed"][1], 3),
        "max_abs_loss_diff_f64": diff, "f64_check_passed": diff <= 1e-9,
        "configs": sum(len(g) for g in groups), "max_group": args.max_group, "epochs": args.epochs, "repeats": args.repeats,
        "threads": 1, "torch": torch.__version__, "cpu": cpu_model(),
    }
    print(json_text(out))


if __name__ == "__main__":
    main()
