"""What an AWNN trial costs per epoch against a fixed-grid trial of its width
(issue #30): whole trials, as the comparison's device-hours see them.

`benchmarks/step_overhead.py` times single steps (the issue's step ratio: the
median AWNN step, width update included, over the median step of a fixed MLP
of its width in the lean loop).  A trial's cost is more than its median step:
the steps that move a width (a fifth to a third of them, each ~1.5x a still
step), the epochs' validation passes, the data order, the records.  Here each
arm trains whole:

    AWNN    a SpiralHard AWNN grid config (search/grids/spiralhard-awnn.yaml's
            fixed keys: batch 128, lr 0.01, rate 0.01, k 0.9; sigma_theta 100;
            the `authors` profile) in awnn.train.Trainer, as its trial trains
            it (the straight-line step and the C pass where they apply)
    fixed   a fixed MLP of the same depth, activation, batch and lr at the
            AWNN run's mean width per hidden layer over its epochs (rounded),
            in the lean loop (awnn/lean.py), as an unfused fixed-grid trial
            trains it; on a CPU the fixed grid's trials are fused by default,
            which makes a fixed config cheaper still (docs/design.md, "Fused
            trials"), so this is the comparison most favourable to AWNN

on the inner split (model selection), `--epochs` epochs each, one torch
thread, float denormals flushed (search/trial_common.worker_setup).  Each
arm's time is its trial's `train_seconds` (training and validation, the wall
time its device-hours are made of, one thread on an otherwise idle core);
rounds alternate the arms' order, and the fastest of `--repeats` counts.

Prints one JSON object as its last line, per config (`<layers>_layers_<activation>`):
awnn_s_per_epoch, fixed_s_per_epoch (each over the epochs its run ran: an
AWNN run that reaches `max_width` stops there, status `width_capped`), ratio
(AWNN / fixed), mean_width and final_widths of the AWNN run, the fixed
width trained, epochs_run, status and best validation accuracies of both
runs; `ratios` lists every config's ratio.

Usage:  python benchmarks/trial_ratio.py [--epochs 150] [--layers 1] [--activations relu6,relu] [--repeats 2]
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
from awnn.lean import LeanTrainer, make_trainer  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402

SHARED = {"task": "spiralhard", "split": "inner", "optimizer": "adam", "batch_size": 128, "lr": 0.01, "device": "cpu"}
AWNN = {**SHARED, "model": "awnn", "quantile_k": 0.9, "rate": 0.01, "sigma_theta": 100.0, "awnn_profile": "authors"}


def mean_width(history: list[dict], layers: int) -> float:
    """The AWNN run's mean width per hidden layer over its epochs (each epoch's width at its end)."""
    return statistics.fmean(r["width_total"] / layers for r in history)


def per_epoch(trainer) -> float:
    """A finished run's training seconds per epoch it ran."""
    return trainer.train_seconds / max(1, len(trainer.history))


def fixed_config(layers: int, activation: str, width: int, epochs: int) -> TrainConfig:
    return TrainConfig.from_dict({**SHARED, "model": "fixed", "hidden_layers": layers, "activation": activation, "width": width,
                                  "epochs": epochs})


def measure(layers: int, activation: str, epochs: int, repeats: int, task) -> dict:
    awnn_config = TrainConfig.from_dict({**AWNN, "hidden_layers": layers, "activation": activation, "epochs": epochs})
    awnn_best = fixed_best = float("inf")  # seconds per epoch (a run may end early: max_width, a divergence)
    awnn_run = fixed_run = None
    width = None
    for r in range(repeats):
        for arm in (("awnn", "fixed") if r % 2 == 0 else ("fixed", "awnn")):
            if arm == "awnn":
                t = Trainer(awnn_config, task)
                t.run()
                awnn_best, awnn_run = min(awnn_best, per_epoch(t)), t
                if width is None:  # (the first AWNN run sets the fixed arm's width: every run of it is the same run)
                    width = max(1, round(mean_width(t.history, layers)))
            else:
                if width is None:  # (round 0 runs AWNN first)
                    raise AssertionError("unreachable: the fixed arm's width comes from an AWNN run")
                t = make_trainer(fixed_config(layers, activation, width, epochs), task)
                if not isinstance(t, LeanTrainer):
                    raise SystemExit(f"the lean loop does not take the fixed config ({layers} x {width}, {activation})")
                t.run()
                fixed_best, fixed_run = min(fixed_best, per_epoch(t)), t
            print(f"{layers} layers, {activation}, {arm}: {t.train_seconds:.2f} s, {len(t.history)} epochs, {t.status}", file=sys.stderr)
    return {
        "awnn_s_per_epoch": round(awnn_best, 5),
        "fixed_s_per_epoch": round(fixed_best, 5),
        "ratio": round(awnn_best / fixed_best, 3),
        "mean_width": round(mean_width(awnn_run.history, layers), 1),
        "final_widths": list(awnn_run.model.widths),
        "fixed_width": width,
        "epochs_run": {"awnn": len(awnn_run.history), "fixed": len(fixed_run.history)},
        "status": {"awnn": awnn_run.status, "fixed": fixed_run.status},
        "best_val_acc": {"awnn": round(awnn_run.best["val_acc"], 4), "fixed": round(fixed_run.best["val_acc"], 4)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=150, help="epochs of each trial (150: the standard budget's)")
    ap.add_argument("--layers", default="1", help="hidden layers, comma-separated")
    ap.add_argument("--activations", default="relu6,relu", help="comma-separated")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.epochs < 1 or args.repeats < 1:
        raise SystemExit("--epochs and --repeats must be at least 1")
    flushed = worker_setup({"cpus_per_trial": 1})
    task = load_task("spiralhard")
    out: dict = {"epochs": args.epochs, "repeats": args.repeats, "flush_denormal": flushed, "configs": {}}
    for layers in (int(v) for v in args.layers.split(",")):
        for activation in (a.strip() for a in args.activations.split(",") if a.strip()):
            out["configs"][f"{layers}_layers_{activation}"] = measure(layers, activation, args.epochs, args.repeats, task)
    out["ratios"] = [c["ratio"] for c in out["configs"].values()]
    print(json_text(out))


if __name__ == "__main__":
    main()
