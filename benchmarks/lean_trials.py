"""The lean loop (#30): configs per core-hour of an unfused fixed-grid trial's
training in the reference `awnn.train.Trainer` (torch.optim.Adam), in the
Trainer with its lean Adam (awnn/lean_adam.py), and in the lean loop
(`awnn.lean.LeanTrainer`: the stacked trainer with N = 1, which trials use
for every fusable config).

Configs are points of `search/grids/spiralhard-fixed.yaml` (activation relu,
the grid's learning rates in turn: `--configs` per shape) at a few of its
shapes (`--shapes`, hidden_layers x width @ batch), on the inner split
(model selection), `--epochs` epochs each, with `torch.set_num_threads(--threads)`
and float denormals flushed as in a trial (search/trial_common.worker_setup;
`--keep-denormals` keeps them).  Each config is built and trained by both
paths (construction included, the task loaded once), timed on the wall
clock and in process CPU time; every measurement runs `--repeats` times in
interleaved rounds (a round trains each config by each path in turn), and
the fastest counts (the machine may be shared).

    configs_per_core_hour[path] = configs / (sum of their best wall seconds x threads / 3600)
    configs_per_cpu_hour[path]: the same with the process's CPU seconds
    speedup: lean over trainer (configs per core-hour); speedup_cpu: per CPU-hour
    lean_adam_speedup: the Trainer with its lean Adam (trainer_lean_adam: how
        trials run the configs the lean loop does not take) over the reference
    speedup_over_lean_adam: lean over trainer_lean_adam
    ms_per_config: per shape and path, the mean best wall milliseconds of its configs
    max_abs_loss_diff, max_abs_weight_diff: per-epoch train/val losses and final
        weights, lean vs Trainer, over the timed configs (float32, the
        trials' precision: rounding differs by CPU, issue #29);
        *_f64: the same for the first shape's configs in float64 (the
        equivalence: f64_check_passed when both <= 1e-9)

Progress goes to stderr; the last line of stdout is one JSON object.

Usage:  python benchmarks/lean_trials.py [--epochs 10] [--repeats 3] [--threads 1]
                                         [--shapes 1x256@128,2x128@32,1x16@32] [--configs 2] [--keep-denormals]
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.lean import LeanTrainer  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.grid import load_grid  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402
from fused_trials import cpu_model, parse_shape  # noqa: E402  (benchmarks/fused_trials.py)

GRID = ROOT / "search" / "grids" / "spiralhard-fixed.yaml"
# the reference Trainer (torch.optim.Adam), the Trainer as trials run it on a CPU
# for the configs the lean loop does not take (its lean Adam, awnn/lean_adam.py), the lean loop
PATHS = {"trainer": functools.partial(Trainer, lean=False), "trainer_lean_adam": functools.partial(Trainer, lean=True),
         "lean": LeanTrainer}
F64_TOL = 1e-9


def log(msg: str) -> None:
    print(f"[lean_trials] {msg}", file=sys.stderr, flush=True)


def shape_configs(shape: tuple[int, int, int], n: int, epochs: int, threads: int) -> list[TrainConfig]:
    """n configs of the grid at this shape (relu): its learning rates in turn, then the next seed."""
    layers, width, batch = shape
    points = [p for p in load_grid(GRID).configs() if (p["hidden_layers"], p["width"], p["batch_size"], p["activation"]) == (layers, width, batch, "relu")]
    if not points:
        raise SystemExit(f"--shapes: {layers}x{width}@{batch} is not a shape of {GRID.name}")
    extra = {"epochs": epochs, "split": "inner", "device": "cpu", "threads": threads}
    return [TrainConfig.from_dict({**points[i % len(points)], **extra, "seed": i // len(points)}) for i in range(n)]


def train(path: str, config: TrainConfig, task):
    """(wall seconds, CPU seconds, trainer, result): one config built and trained by one path."""
    w, c = time.perf_counter(), time.process_time()
    trainer = PATHS[path](config, task)
    result = trainer.run()
    return time.perf_counter() - w, time.process_time() - c, trainer, result


def weights(trainer) -> dict[str, torch.Tensor]:
    return trainer.weights() if isinstance(trainer, LeanTrainer) else trainer.model.state_dict()


def differences(runs: dict) -> tuple[float, float]:
    """(max |per-epoch loss difference|, max |final weight difference|), lean vs Trainer."""
    (_, ta, ra), (_, tb, rb) = runs["lean"], runs["trainer"]
    loss = max(abs(x[k] - y[k]) for x, y in zip(ra.history, rb.history, strict=True) for k in ("train_loss", "val_loss"))
    wa, wb = weights(ta), weights(tb)
    return loss, max(float((wa[k] - wb[k]).abs().max()) for k in wb)


def per_hour(configs: int, seconds: float, threads: int) -> float:
    return round(configs * 3600.0 / (seconds * threads), 1) if seconds > 0 else float("nan")


def f64_check(task, configs: list[TrainConfig]) -> tuple[float, float]:
    """differences() of these configs trained by both paths in float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task64 = dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})
        out = [differences({p: (None, *train(p, c, task64)[2:]) for p in PATHS}) for c in configs]
    finally:
        torch.set_default_dtype(old)
    return max(d[0] for d in out), max(d[1] for d in out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=10, help="epochs per config")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds of every measurement; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (a trial's: its CPUs)")
    ap.add_argument("--shapes", default="1x256@128,2x128@32,1x16@32", help="hidden_layers x width @ batch, comma-separated")
    ap.add_argument("--configs", type=int, default=2, help="configs per shape (the grid's learning rates in turn)")
    ap.add_argument("--keep-denormals", action="store_true", help="keep float denormals (trials flush them by default)")
    args = ap.parse_args()
    if min(args.epochs, args.repeats, args.threads, args.configs) < 1:
        raise SystemExit("--epochs, --repeats, --threads and --configs must be >= 1")
    shapes = [parse_shape(s.strip()) for s in args.shapes.split(",") if s.strip()]
    worker_setup({"cpus_per_trial": args.threads, "flush_denormal": not args.keep_denormals})  # as a trial's process
    task = load_task("spiralhard")
    configs = {sh: shape_configs(sh, args.configs, args.epochs, args.threads) for sh in shapes}
    log(f"torch {torch.__version__}, {args.threads} thread(s), shapes {args.shapes}, {args.configs} configs each, {args.epochs} epochs")
    for p in PATHS:  # warm-up: first calls, lazy imports
        train(p, shape_configs(shapes[0], 1, 1, args.threads)[0], task)
    best: dict = {}  # (path, shape, i) -> (wall, CPU)
    loss_diff = weight_diff = 0.0
    for r in range(args.repeats):
        for sh in shapes:
            for i, c in enumerate(configs[sh]):
                runs = {}
                for p in (PATHS if r % 2 == 0 else reversed(list(PATHS))):  # alternate which path goes first
                    w, cpu, trainer, result = train(p, c, task)
                    old = best.get((p, sh, i), (float("inf"), float("inf")))
                    best[(p, sh, i)] = (min(old[0], w), min(old[1], cpu))
                    runs[p] = (w, trainer, result)
                if r == 0:
                    d = differences(runs)
                    loss_diff, weight_diff = max(loss_diff, d[0]), max(weight_diff, d[1])
                log(f"round {r + 1}/{args.repeats} {'{}x{}@{}'.format(*sh)} lr {c.lr}: " +
                    ", ".join(f"{p} {runs[p][0] * 1e3:.0f} ms" for p in PATHS))
    n = sum(len(v) for v in configs.values())
    out: dict = {"configs_per_core_hour": {}, "configs_per_cpu_hour": {}, "wall_seconds": {}, "ms_per_config": {}}
    for p in PATHS:
        wall = sum(best[(p, sh, i)][0] for sh in shapes for i in range(len(configs[sh])))
        cpu = sum(best[(p, sh, i)][1] for sh in shapes for i in range(len(configs[sh])))
        out["configs_per_core_hour"][p] = per_hour(n, wall, args.threads)
        out["configs_per_cpu_hour"][p] = per_hour(n, cpu, 1)
        out["wall_seconds"][p] = round(wall, 3)
        for sh in shapes:
            ms = sum(best[(p, sh, i)][0] for i in range(len(configs[sh]))) / len(configs[sh]) * 1e3
            out["ms_per_config"].setdefault("{}x{}@{}".format(*sh), {})[p] = round(ms, 1)
    loss_f64, weight_f64 = f64_check(task, configs[shapes[0]])
    core, cpu = out["configs_per_core_hour"], out["configs_per_cpu_hour"]
    result = {
        **out,
        "speedup": round(core["lean"] / core["trainer"], 2),
        "speedup_cpu": round(cpu["lean"] / cpu["trainer"], 2),
        "speedup_by_shape": {k: round(v["trainer"] / v["lean"], 2) for k, v in out["ms_per_config"].items()},
        "lean_adam_speedup": round(core["trainer_lean_adam"] / core["trainer"], 2),
        "speedup_over_lean_adam": round(core["lean"] / core["trainer_lean_adam"], 2),
        "max_abs_loss_diff": loss_diff,
        "max_abs_weight_diff": weight_diff,
        "max_abs_loss_diff_f64": loss_f64,
        "max_abs_weight_diff_f64": weight_f64,
        "f64_check_passed": max(loss_f64, weight_f64) <= F64_TOL,
        "shapes": ["{}x{}@{}".format(*sh) for sh in shapes],
        "configs": n,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "threads": args.threads,
        "flush_denormal": not args.keep_denormals,
        "split": "inner",
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "kernels": torch.backends.cpu.get_cpu_capability(),
    }
    print(json_text(result), flush=True)


if __name__ == "__main__":
    main()
