"""Does the learned width grow with task difficulty, and does AWNN reach the
paper's SpiralHard numbers?  (paper section 5.1, Fig. 3 left, Table 1)

Trains AWNN MLPs on the authors' data (task names `doublemoon`, `spiral`,
`spiralhard`; see awnn/data/tabular.py) in one profile (`--profile`,
default `authors`), and by default the same runs in the other profile for
contrast (`--contrast none` to skip):

* one hidden layer on DoubleMoon, Spiral and SpiralHard (Fig. 3: the width
  should grow with difficulty), and
* two hidden layers on SpiralHard (Table 1's AWNN row: 100% test accuracy,
  227 +- 32 neurons in total).

Every run: starting rate 0.01, k 0.9, Adam lr 0.01, batch 128, ReLU6 (the
bounded activation the paper recommends, its Fig. 4), sigma_theta the
larger value of the authors' grid (100 on SpiralHard, 10 on the others;
at sigma_theta 1 the width collapses in every variant), split `outer`
(train 72% / validation 8% / test 20%), seed 0, the same epochs for every
task (`--epochs`).  The rest (rate prior, n_obs, renormalisation, ...) is
the profile's.  The width and test accuracy reported are those of the
best-validation epoch, with the profile's tie rule (`authors`: the later
epoch).  One torch thread per run, `--processes` runs at a time, the
longest first.

    python benchmarks/width_adapts.py                  # ~10-15 min on 2 cores
    python benchmarks/width_adapts.py --epochs 100 --contrast none   # a quick look

Progress goes to stderr.  The last stdout line is one JSON object:
`profile`, `doublemoon`, `spiral`, `spiralhard` (1-layer widths at the best
epoch), `doublemoon_test_acc`, `spiral_test_acc`, `spiralhard_test_acc`,
`spiralhard_2layer_width`, `spiralhard_2layer_test_acc`,
`width_grows_with_difficulty`, the per-run details under `runs`, and the
same keys for the contrast profile under `contrast`.  Whatever is measured
is printed as it is; the paper's numbers are under `paper_table1`.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

TASKS = ("doublemoon", "spiral", "spiralhard")
SIGMA_THETA = {"doublemoon": 10.0, "spiral": 10.0, "spiralhard": 100.0}  # the larger value of the authors' grid
# (task, hidden layers) runs, the longest first: SpiralHard has twice the rows
RUNS = (("spiralhard", 2), ("spiralhard", 1), ("spiral", 1), ("doublemoon", 1))
PAPER_TABLE1 = {"doublemoon": 8.1, "spiral": 65.9, "spiralhard": 227.4, "spiralhard_test_acc": 1.0}


def run_one(args: tuple[str, int, str, dict]) -> dict:
    task, layers, profile, overrides = args
    import torch

    torch.set_num_threads(1)
    from awnn.config import TrainConfig
    from awnn.train import train

    values = {"task": task, "model": "awnn", "hidden_layers": layers, "awnn_profile": profile, "sigma_theta": SIGMA_THETA[task], **overrides}
    config = TrainConfig.from_dict(values, source="width_adapts")
    from benchmarks._progress import epoch_printer

    result = train(config, on_epoch=epoch_printer(f"{profile} {task} {layers}L", config.epochs))
    return {
        "profile": profile,
        "task": task,
        "hidden_layers": layers,
        "status": result.status,
        "width": sum(result.widths_at_best),
        "widths_at_best": result.widths_at_best,
        "final_widths": result.widths,
        "test_acc": result.test_acc,
        "best_val_acc": result.best_val_acc,
        "best_epoch": result.best_epoch,
        "train_seconds": round(result.train_seconds, 1),
        "final_rates": [result.history[-1].get(f"rate_l{i}") for i in range(layers)] if result.history else None,
    }


def summarise(profile: str, runs: list[dict]) -> dict:
    by = {(r["task"], r["hidden_layers"]): r for r in runs if r["profile"] == profile}
    out: dict = {"profile": profile}
    for t in TASKS:
        out[t] = by[(t, 1)]["width"]
    for t in TASKS:
        out[f"{t}_test_acc"] = by[(t, 1)]["test_acc"]
    out["spiralhard_2layer_width"] = by[("spiralhard", 2)]["width"]
    out["spiralhard_2layer_test_acc"] = by[("spiralhard", 2)]["test_acc"]
    out["width_grows_with_difficulty"] = out["doublemoon"] < out["spiral"] < out["spiralhard"]
    out["spiralhard_2layer_meets_target"] = out["spiralhard_2layer_test_acc"] >= 0.98 and out["spiralhard_2layer_width"] >= 150
    out["runs"] = [by[k] for k in RUNS]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", choices=["authors", "paper-text"], default="authors")
    p.add_argument("--contrast", choices=["authors", "paper-text", "none"], default=None,
                   help="the profile to run as well for contrast (default: the other one; none: skip)")
    p.add_argument("--epochs", type=int, default=400, help="epochs per run, the same for all (default 400)")
    p.add_argument("--activation", default="relu6")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args(argv)
    contrast = args.contrast if args.contrast is not None else ("paper-text" if args.profile == "authors" else "authors")
    profiles = [args.profile] + ([contrast] if contrast not in ("none", args.profile) else [])

    overrides = {"rate": 0.01, "quantile_k": 0.9, "lr": 0.01, "batch_size": 128, "epochs": args.epochs, "seed": args.seed,
                 "activation": args.activation, "split": "outer", "device": "cpu", "on_max_width": "cap"}
    jobs = [(task, layers, prof, overrides) for task, layers in RUNS for prof in profiles]
    print(f"width_adapts: {len(jobs)} runs of {args.epochs} epochs, profiles {profiles}, {args.processes} processes", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(args.processes) as pool:
        runs = list(pool.imap_unordered(run_one, jobs))
    wall = time.perf_counter() - start

    out = summarise(args.profile, runs)
    if len(profiles) > 1:
        out["contrast"] = summarise(profiles[1], runs)
    out.update({"paper_table1": PAPER_TABLE1, "epochs": args.epochs, "config": {**overrides, "sigma_theta": SIGMA_THETA},
                "wall_seconds": round(wall, 1)})
    for prof in profiles:
        s = out if prof == args.profile else out["contrast"]
        print(f"{prof:>10}: widths DoubleMoon {s['doublemoon']}, Spiral {s['spiral']}, SpiralHard {s['spiralhard']} "
              f"(test acc {s['doublemoon_test_acc']:.3f} / {s['spiral_test_acc']:.3f} / {s['spiralhard_test_acc']:.3f}); "
              f"SpiralHard 2 layers: width {s['spiralhard_2layer_width']}, test acc {s['spiralhard_2layer_test_acc']:.4f}", file=sys.stderr)
    print(json_text(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
