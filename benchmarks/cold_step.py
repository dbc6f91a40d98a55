"""What a width move costs the AWNN step that follows it (CPU, issue #30).

`benchmarks/step_overhead.py` splits the AWNN's steps into those that moved a
width and those that did not; a moving step costs its resize *and* a dearer
step after it.  This script asks why the step after a resize is dearer: it
trains SpiralHard's 1-layer `authors` AWNN (as step_overhead.py does), then,
at a fixed width, times the training step (awnn/fast_step.py, no width
update) after three kinds of work done between two steps:

    none     nothing: the step's code stays in the core's caches
    resize   a width move, D <-> D + 1 at every other step (the model's own
             resize, awnn/layers.py `_apply_widths`, the optimiser's reset:
             what Algorithm 1 does at ~30% of steps)
    other    about as long a run of unrelated Python and torch calls (small
             tensor ops, json, re), touching none of the step's tensors

If `other` slows the next step about as much as `resize` does, the cost is
the core's (the step's instructions and branch history evicted by whatever
ran between), not something the resize leaves behind (state, allocations).
Modes run interleaved in rounds; medians of each step's thread CPU time.
On a 2-core Xeon (2026-12-04): the step ~185-190 us after nothing, ~215-230
after a resize or after the unrelated calls alike.

The training steps before (`--train`, each with Algorithm 1's width update
as trials take them) are timed too and split by whether the update moved a
width: what a move adds to the update and to the step after it
(`move_cost_us`), and that as a share of a still step (`move_cost_of_still`,
less sensitive to the machine's speed: this VM's steps vary by 1.5x from run
to run).  2026-12-07, an AMD EPYC, 7 runs each, interleaved: 0.65-0.84 of a
still step (median 0.73) before the moves kept the Adam state's objects
(awnn/optim.py), 0.32-0.89 (median 0.70) after: the checks that change saves
(~10 us under cProfile) are within this VM's noise.

Prints one JSON object as its last line:
    step_us_<mode>           median step after <mode>
    between_us_<mode>        median time of the work done between steps
    penalty_us_<mode>        step_us_<mode> - step_us_none
    width, rounds, steps, torch, cpu
    train_{update,step}_{moving,still}_us, train_moves, train_steps, move_cost_us, move_cost_of_still

Usage:  python benchmarks/cold_step.py [--steps 1000] [--rounds 2] [--train 300]
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.machine import cpu_model  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402

MODES = ("none", "resize", "other")


def _batches(x, y, batch: int, gen: torch.Generator):
    while True:
        perm = torch.randperm(len(y), generator=gen)
        for s in range(0, len(y) - batch + 1, batch):
            idx = perm[s : s + batch]
            yield x[idx], y[idx]


def _unrelated(junk: list[torch.Tensor]) -> None:
    """~100 us of Python and torch calls that touch nothing of the step's."""
    total = 0.0
    for t in junk:
        total += float(t.sum())
        t.mul(1.0001).add_(0.0).clamp_(-9.0, 9.0)
    json.dumps({"a": [1, 2, 3], "b": {"c": "d"}, "t": total})
    re.sub("a", "b", "banana" * 5)
    collections.OrderedDict((i, i) for i in range(30))


def training_split(split: dict) -> dict:
    """The training steps' medians (us), split by whether the width update
    moved a width: the update, and the step after it; `move_cost_us` = what a
    move adds to its update and to the step after it, and its share of a
    still step (update + step): `move_cost_of_still`.  {} without both kinds."""
    if not all(split.values()):
        return {}
    med = {k: statistics.median(v) * 1e6 for k, v in split.items()}
    cost = med["update_moving"] - med["update_still"] + med["step_moving"] - med["step_still"]
    out = {f"train_{k}_us": round(v, 1) for k, v in med.items()}
    out.update({"train_moves": len(split["update_moving"]), "train_steps": len(split["update_moving"]) + len(split["update_still"]),
                "move_cost_us": round(cost, 1), "move_cost_of_still": round(cost / (med["update_still"] + med["step_still"]), 3)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="timed steps per mode and round (default 1000)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three modes (default 2)")
    ap.add_argument("--train", type=int, default=5000, help="training steps first, widths moving, timed (default 5000)")
    args = ap.parse_args()
    worker_setup({"cpus_per_trial": 1})  # as a trial's process: one torch thread, denormals flushed
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", torch.device("cpu"))
    config = {"task": "spiralhard", "split": "inner", "hidden_layers": 1, "activation": "relu", "batch_size": 128, "optimizer": "adam",
              "lr": 0.01, "device": "cpu", "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": "authors"}
    trainer = Trainer(TrainConfig.from_dict(config))
    if trainer._fast is None:
        raise SystemExit("cold_step: the `authors` fast step does not apply here (AWNN_FAST_STEP=0, or an unchecked torch)")
    prior = trainer.rate_prior(1)
    it = _batches(x, y, 128, torch.Generator().manual_seed(0))
    clock = time.thread_time
    split: dict = {"update_moving": [], "update_still": [], "step_moving": [], "step_still": []}
    for _ in range(args.train):  # training as trials do: each step's width update (Algorithm 1), then the step
        batch = next(it)
        before = trainer.model.widths
        t0 = clock()
        trainer.update_widths()
        t1 = clock()
        trainer.train_step(*batch, prior)
        t2 = clock()
        kind = "moving" if trainer.model.widths != before else "still"
        split[f"update_{kind}"].append(t1 - t0)
        split[f"step_{kind}"].append(t2 - t1)
    model = trainer.model
    width = model.widths[0]
    junk = [torch.randn(7, 3) for _ in range(8)]
    steps: dict = {m: [] for m in MODES}
    between: dict = {m: [] for m in MODES}
    fast_before = trainer._fast.steps
    for _ in range(args.rounds):
        for mode in MODES:
            for i in range(args.steps):
                batch = next(it)
                t0 = clock()
                if mode == "resize":
                    model._apply_widths([width + (i % 2)], trainer.optimizer, model.grow_init)
                elif mode == "other":
                    _unrelated(junk)
                t1 = clock()
                trainer.train_step(*batch, prior)
                t2 = clock()
                between[mode].append(t1 - t0)
                steps[mode].append(t2 - t1)
    taken = trainer._fast.steps - fast_before
    if taken != args.rounds * len(MODES) * args.steps:
        raise SystemExit(f"cold_step: only {taken} of the timed steps took the fast step; the figures would mix two paths")
    med = {m: statistics.median(v) * 1e6 for m, v in steps.items()}
    out = {"width": width, "rounds": args.rounds, "steps": args.steps, "torch": torch.__version__, "cpu": cpu_model()}
    out.update(training_split(split))
    for m in MODES:
        out[f"step_us_{m}"] = round(med[m], 1)
        out[f"between_us_{m}"] = round(statistics.median(between[m]) * 1e6, 1)
        out[f"penalty_us_{m}"] = round(med[m] - med["none"], 1)
        print(f"after {m:6s}: step {med[m]:6.1f} us (work between steps {out[f'between_us_{m}']:6.1f} us)", file=sys.stderr)
    print(json_text(out))


if __name__ == "__main__":
    main()
