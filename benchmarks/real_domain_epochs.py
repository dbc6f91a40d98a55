"""Time per epoch of each real domain on this machine, at the CPU (`quick`)
budget's setup and at the paper's, on data written in the real on-disk
formats at the real datasets' sizes (random content: the real files cannot
be downloaded here; an epoch's cost depends on sizes and shapes, not on the
pixel or token values).

For each task and model (the grid's first and last configs, resolved as `awnn train --budget quick` resolves them: the grid's
`cpu` values included), one training epoch set up as a trial's process is
(search/trial_common.worker_setup: torch threads 1, float denormals flushed).  `--paper` also times the paper's setup (no `cpu` values; slow).
From the quick epoch time it projects a quick comparison's duration on 2
cores (every selection and re-training trial of fixed + awnn at the quick
budget's epochs, two trials at a time): a PROJECTION, not a measurement.

Sizes written: MNIST 60,000 + 10,000 IDX images; CIFAR-10 5 x 10,000 +
10,000 pickled batches; NCI1 4,110 graphs of 20..40 nodes with 37 node
labels; REDDIT-BINARY 2,000 graphs of 30..3,782 nodes (log-uniform);
Multi30k 29,000 / 1,014 / 1,000 sentence pairs (short sentences: 3..8
words, real ones average ~12).

Usage:  python benchmarks/real_domain_epochs.py [--tasks mnist,cifar10,nci1,reddit_binary,multi30k] [--paper]
Prints one JSON object as its last line.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

TASKS = ("mnist", "cifar10", "nci1", "reddit_binary", "multi30k")


def write_data(task: str, root: str) -> None:
    import data_helpers as h

    if task == "mnist":
        h.make_mnist(root, n_train=60000, n_test=10000)
    elif task == "cifar10":
        h.make_cifar(root, per_batch=10000, n_test=10000)
    elif task == "nci1":
        h.write_tu(root, "NCI1", n_graphs=4110, nodes=(20, 41))
    elif task == "reddit_binary":
        h.write_social(root, n_graphs=2000, max_nodes=3782)
    elif task == "multi30k":
        h.write_multi30k(root, sizes=(("train", 29000), ("val", 1014), ("test", 1000)))


def epoch_seconds(task: str, model: str, root: str, cpu: bool, last: bool = False) -> dict:
    import torch

    from awnn.config import TrainConfig
    from awnn.train import Trainer
    from search.budget import BUDGETS
    from search.grid import find_grid
    from search.protocol import single_run_config

    from search.trial_common import worker_setup

    worker_setup({"cpus_per_trial": 1, "flush_denormal": True})  # as a trial's process: 1 thread, denormals flushed
    grid = find_grid(task, model)
    budget = BUDGETS["quick"] if cpu else BUDGETS["paper"]
    point = {k: v for k, v in grid.configs()[-1].items() if k in grid.grid} if last else {}
    cfg = single_run_config(grid, budget, {**point, "data_root": root, "threads": 1, "device": "cpu", "split": "inner"})
    quick_epochs = cfg["epochs"]
    cfg.update(epochs=1, patience=0)
    trainer = Trainer(TrainConfig.from_dict(cfg))
    t0 = time.perf_counter()
    result = trainer.run()
    seconds = time.perf_counter() - t0
    return {"epoch_seconds": round(seconds, 2), "config": {k: cfg[k] for k in grid.grid}, "n_train": trainer.n_train, "budget_epochs": quick_epochs,
            "selection_trials": grid.size, "retrain_runs": budget.runs(grid), "width_total": result.summary().get("final_width_total")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--paper", action="store_true", help="also time the paper's setup (no cpu values)")
    args = ap.parse_args()
    out: dict = {"cores_used": 1, "note": "random content in the real formats and sizes; comparison times are projections"}
    for task in args.tasks.split(","):
        with tempfile.TemporaryDirectory() as root:
            t0 = time.perf_counter()
            write_data(task, root)
            row: dict = {"write_seconds": round(time.perf_counter() - t0, 1)}
            for model in ("fixed", "awnn"):
                first, last = epoch_seconds(task, model, root, cpu=True), epoch_seconds(task, model, root, cpu=True, last=True)
                # the grid's first and last configs (smallest and largest dims in the packaged grids): their mean per trial
                row[f"quick_{model}"] = {**first, "epoch_seconds_last_config": last["epoch_seconds"], "last_config": last["config"],
                                         "epoch_seconds_mean": round((first["epoch_seconds"] + last["epoch_seconds"]) / 2, 2)}
                if args.paper:
                    row[f"paper_{model}"] = epoch_seconds(task, model, root, cpu=False)
                print(task, model, json_text(row[f"quick_{model}"]), file=sys.stderr, flush=True)
            # every trial of fixed + awnn at the quick epochs, two at a time on 2 cores (a projection)
            trial_seconds = sum(r["epoch_seconds_mean"] * r["budget_epochs"] * (r["selection_trials"] + r["retrain_runs"])
                                for r in (row["quick_fixed"], row["quick_awnn"]))
            row["quick_comparison_projected_minutes_2_cores"] = round(trial_seconds / 2 / 60, 1)
            out[task] = row
    print(json_text(out))


if __name__ == "__main__":
    main()
