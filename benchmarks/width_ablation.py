"""Which choices make the learned width collapse?  (issue #14)

One-hidden-layer AWNN on SpiralHard (ReLU6, starting rate 0.01, k 0.9,
Adam lr 0.01, batch 128, seed 0, split outer), the same epochs for every
run, over: the data (`spiralhard`, the authors' 10,000 points of radius
~12.6, or `spiralhard-v0`, this project's earlier 5,000 of radius ~1) x
sigma_theta {1, 100} x the profile (`paper-text`, `authors`, and
`paper-text` with only `renormalise_importances` switched on).

    python benchmarks/width_ablation.py [--epochs 300] [--processes 2]

Progress on stderr; one line per run and, last, one JSON object with the
width (total, at the best-validation epoch), the final width and the test
accuracy of every run under `runs`.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

VARIANTS = {
    "paper-text": {"awnn_profile": "paper-text"},
    "paper-text+renorm": {"awnn_profile": "paper-text", "renormalise_importances": True},
    "authors": {"awnn_profile": "authors"},
}


def run_one(job: tuple[str, float, str, int]) -> dict:
    task, sigma, variant, epochs = job
    import torch

    torch.set_num_threads(1)
    from awnn.config import TrainConfig
    from awnn.train import train

    cfg = TrainConfig.from_dict({"task": task, "model": "awnn", "hidden_layers": 1, "activation": "relu6", "rate": 0.01, "quantile_k": 0.9,
                                 "lr": 0.01, "batch_size": 128, "epochs": epochs, "sigma_theta": sigma, "split": "outer", "device": "cpu",
                                 "on_max_width": "cap", **VARIANTS[variant]}, source="width_ablation")
    t0 = time.perf_counter()
    r = train(cfg)
    out = {"task": task, "sigma_theta": sigma, "variant": variant, "width_at_best": sum(r.widths_at_best), "final_width": sum(r.widths),
           "test_acc": r.test_acc, "best_epoch": r.best_epoch, "status": r.status, "seconds": round(time.perf_counter() - t0, 1)}
    print(json_text(out), file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--processes", type=int, default=2)
    args = p.parse_args(argv)
    jobs = [(task, sigma, v, args.epochs) for task in ("spiralhard", "spiralhard-v0") for sigma in (1.0, 100.0) for v in VARIANTS]
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(args.processes) as pool:
        runs = list(pool.imap(run_one, jobs))
    print(json_text({"epochs": args.epochs, "runs": runs, "wall_seconds": round(time.perf_counter() - start, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
