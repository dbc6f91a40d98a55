"""Does storing the weights fed by an adaptive layer in units of their
kaiming+ scale (`scale_free_weights`) let a 1-layer AWNN learn SpiralHard as
fast as a fixed-width MLP?  (issue #14, "beyond the paper")

Why it might: with the authors' renormalised importances p (summing to 1)
and kaiming+ weights W ~ N(0, 2 / sum p^2), the read-out's weights are
~20 at D = 232, and an Adam step moves each by ~lr = 0.01, i.e. ~0.05% of
its size, while a fixed MLP's kaiming weights (~0.09 at 256 inputs) move
~10% per step.  With `scale_free_weights` the parameter is V = W / c
(c = sqrt(2 / sum p^2)), so an Adam step moves W by ~lr c.

Three runs on the authors' SpiralHard (split `outer`: train 72%, validation
8%, test 20%), the same for all: one hidden layer, Adam lr 0.01, batch 128,
`--activation` (default relu6), seed 0, `--epochs`:

* `fixed`: a fixed-width MLP of `--fixed-width` (256) neurons,
* `awnn`: AWNN in the `authors` profile (sigma_theta 100, the larger value
  of their SpiralHard grid; starting rate 0.01, k 0.9),
* `awnn_scale_free`: the same with `scale_free_weights=true`.

For each: the first epoch whose validation accuracy reaches 0.90 / 0.95 /
0.99 (null: never), the best validation accuracy, the test accuracy and
width at the best epoch (the profile's tie rule), and train seconds (wall
time only comparable between runs of one invocation on a quiet machine).

    python benchmarks/scale_free.py                  # 1000 epochs, ~10 min on 2 cores
    python benchmarks/scale_free.py --epochs 100     # a quick look

Progress on stderr; the last stdout line is one JSON object with the keys
`fixed`, `awnn`, `awnn_scale_free` (each the run's figures) and
`scale_free_as_fast_as_fixed` (whether it reached 0.99 no later than 1.5x
the fixed MLP's epoch), plus the configuration.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

THRESHOLDS = (0.90, 0.95, 0.99)


def run_one(args: tuple[str, dict]) -> dict:
    name, values = args
    import torch

    torch.set_num_threads(1)
    from awnn.config import TrainConfig
    from awnn.train import train

    from benchmarks._progress import epoch_printer

    config = TrainConfig.from_dict(values, source="scale_free")
    show = epoch_printer(name, config.epochs, lines=10)
    first: dict[float, int | None] = {t: None for t in THRESHOLDS}

    def on_epoch(rec):
        for t in THRESHOLDS:
            if first[t] is None and rec["val_acc"] >= t:
                first[t] = rec["epoch"]
        show(rec)

    result = train(config, on_epoch=on_epoch)
    return {
        "name": name,
        "status": result.status,
        **{f"epoch_to_val_{t:.2f}": first[t] for t in THRESHOLDS},
        "best_val_acc": result.best_val_acc,
        "best_epoch": result.best_epoch,
        "test_acc": result.test_acc,
        "width": sum(result.widths_at_best) if config.adaptive else config.width,
        "final_widths": result.widths,
        "train_seconds": round(result.train_seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--activation", default="relu6")
    p.add_argument("--fixed-width", type=int, default=256)
    p.add_argument("--hidden-layers", type=int, default=1)
    p.add_argument("--sigma-theta", type=float, default=100.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args(argv)

    base = {"task": "spiralhard", "hidden_layers": args.hidden_layers, "lr": 0.01, "batch_size": 128, "epochs": args.epochs,
            "seed": args.seed, "activation": args.activation, "split": "outer", "device": "cpu"}
    awnn = {**base, "model": "awnn", "awnn_profile": "authors", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": args.sigma_theta,
            "on_max_width": "cap"}
    jobs = [
        ("awnn_scale_free", {**awnn, "scale_free_weights": True}),
        ("awnn", awnn),
        ("fixed", {**base, "model": "fixed", "width": args.fixed_width}),
    ]
    print(f"scale_free: {len(jobs)} runs of {args.epochs} epochs, {args.processes} processes", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(args.processes) as pool:
        runs = {r["name"]: r for r in pool.imap_unordered(run_one, jobs)}
    wall = time.perf_counter() - start

    out: dict = {name: runs[name] for name, _ in jobs}
    fixed99, sf99 = runs["fixed"]["epoch_to_val_0.99"], runs["awnn_scale_free"]["epoch_to_val_0.99"]
    out["scale_free_as_fast_as_fixed"] = bool(sf99 is not None and fixed99 is not None and sf99 <= 1.5 * fixed99)
    out.update({"epochs": args.epochs, "config": {"awnn": awnn, "fixed_width": args.fixed_width}, "wall_seconds": round(wall, 1)})
    for name, _ in jobs:
        r = runs[name]
        print(f"{name:>16}: val 0.90/0.95/0.99 at epochs {r['epoch_to_val_0.90']}/{r['epoch_to_val_0.95']}/{r['epoch_to_val_0.99']}, "
              f"best val {r['best_val_acc']:.4f} (epoch {r['best_epoch']}), test {r['test_acc']:.4f}, width {r['width']}", file=sys.stderr)
    print(json_text(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
