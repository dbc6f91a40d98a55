"""AWNN trials end to end (issue #30): the training time of SpiralHard AWNN
grid configs with the Trainer's straight-line `authors` step
(awnn/fast_step.py) and with its general written-out step (awnn/train_step.py,
the product step before it; AWNN_FAST_STEP=0 selects it in trials), whole
epochs with their width updates, resizes and validation.

Configs: `search/grids/spiralhard-awnn.yaml`'s fixed keys (batch 128, lr 0.01,
rate 0.01, k 0.9, the `authors` profile) at sigma_theta 100 and relu, for
each `--layers`, on the inner split (model selection), `--epochs` epochs,
one torch thread and denormals flushed as in a trial
(search/trial_common.worker_setup).  Each config trains with both steps in
interleaved rounds, `--repeats` times; the fastest `train_seconds` counts
(the machine may be shared).  The two runs are the same run up to rounding
(tests/awnn/test_fast_step.py: float64 trajectories to 1e-9); in float32 a
rounding can tip a width update, after which the runs differ as two seeds
would, so the JSON reports both runs' widths and validation accuracies
next to the times.

Prints one JSON object as its last line: per config, seconds per epoch of
each step, `speedup` (general / fast), final widths and best validation
accuracies, and the mean speedup.

Usage:  python benchmarks/awnn_trials.py [--epochs 40] [--layers 1,2,4] [--repeats 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402

BASE = {"task": "spiralhard", "model": "awnn", "split": "inner", "optimizer": "adam", "batch_size": 128, "lr": 0.01,
        "quantile_k": 0.9, "rate": 0.01, "sigma_theta": 100.0, "activation": "relu", "awnn_profile": "authors", "device": "cpu"}


def run(config: TrainConfig, task, fast: bool) -> Trainer:
    Trainer.fast_step = fast
    try:
        t = Trainer(config, task)
    finally:
        Trainer.fast_step = True
    if fast and t._fast is None:
        raise SystemExit(f"the fast step does not apply to {config}")
    t.run()
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--layers", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    flushed = worker_setup({"cpus_per_trial": 1})
    task = load_task("spiralhard")
    out: dict = {"epochs": args.epochs, "flush_denormal": flushed, "configs": {}}
    for layers in (int(v) for v in args.layers.split(",")):
        config = TrainConfig.from_dict({**BASE, "hidden_layers": layers, "epochs": args.epochs})
        best: dict[str, float] = {}
        last: dict[str, Trainer] = {}
        for r in range(args.repeats):
            for name in (("fast", "general") if r % 2 == 0 else ("general", "fast")):
                t = run(config, task, name == "fast")
                best[name] = min(best.get(name, float("inf")), t.train_seconds)
                last[name] = t
                print(f"{layers} layers, {name}: {t.train_seconds:.2f} s, widths {t.model.widths}", file=sys.stderr)
        out["configs"][f"{layers}_layers"] = {
            "fast_s_per_epoch": round(best["fast"] / args.epochs, 4),
            "general_s_per_epoch": round(best["general"] / args.epochs, 4),
            "speedup": round(best["general"] / best["fast"], 3),
            "fast_steps": last["fast"]._fast.steps,
            "widths": {k: t.model.widths for k, t in last.items()},
            "best_val_acc": {k: round(t.best["val_acc"], 4) for k, t in last.items()},
        }
    out["mean_speedup"] = round(statistics.fmean(c["speedup"] for c in out["configs"].values()), 3)
    print(json_text(out))


if __name__ == "__main__":
    main()
