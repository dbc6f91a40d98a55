"""Fused trials (#20): configs per core-hour when N same-shape configs of the
SpiralHard fixed grid train as one stacked model (awnn/stacked.py; the idea
is HFTA's, Wang et al., MLSys 2021), against N = 1 and the plain Trainer.

Configs are points of `search/grids/spiralhard-fixed.yaml` (activation relu,
the grid's learning rates in turn, seeds 0, 1, ... so that N configs all
differ), at a few of its shapes (`--shapes`, hidden_layers x width @ batch),
on the inner split (model selection), `--epochs` epochs each, with
`torch.set_num_threads(--threads)`.  For every N in `--sizes`, each shape's
N configs are trained as one group (`StackedTrainer`: building the stack,
training, validation every epoch) and timed on the wall clock; every
measurement runs `--repeats` times, in interleaved rounds, and the fastest
counts (the machine may be shared).

    configs_per_core_hour[N] = (N x shapes) / (sum over shapes of the group's
        wall seconds x threads / 3600): configs trained to `--epochs` epochs
        per hour of one core (one core per thread; the process's CPU time is
        reported too, as `configs_per_cpu_hour`, less sensitive to other
        load on a shared machine)
    trainer_configs_per_core_hour: the same for one config per shape trained
        by `awnn.train.Trainer` (the reference path, one model per process)
    speedup_<max>_vs_1: configs_per_core_hour at the largest N over N = 1;
        speedup_vs_trainer: over the Trainer
    max_abs_loss_diff: the largest |difference| of a per-epoch train or
        validation loss between fused and sequential (Trainer) training of
        `--check-configs` configs on the same seeds (`--check-epochs`
        epochs, the first shape), and max_abs_weight_diff of their final
        weights, in float32 (the precision trials run in): the two paths sum
        in other orders, whose rounding depends on the CPU's kernels, and
        Adam can grow a rounding-size gradient difference on a near-dead
        unit into a full step, so these vary by CPU (~1e-6 on an AVX-512
        Xeon, ~1e-3 on an AVX2 EPYC; issue #29)
    max_abs_loss_diff_f64, max_abs_weight_diff_f64: the same check in
        float64, where rounding cannot grow to a visible size over a few
        epochs: the equivalence itself (f64_check_passed: both <= 1e-9)
    ms_per_config: per shape and N (and "trainer"), the wall milliseconds / N
    wall_seconds: per N (and "trainer"), summed over the shapes

Denormals: once a unit dies (zero gradients), its Adam moments decay into
float32 denormals, and arithmetic on denormals is many times slower on x86;
after ~4 epochs at lr 0.1 most of a 2x128 stack's first moments are
denormal and an epoch takes ~2x longer, fused or not.  `--flush-denormal`
shows the effect (on every path alike; runs with it are no longer the bit
for bit arithmetic of runs without it).

Progress goes to stderr; the last line of stdout is one JSON object.

Usage:  python benchmarks/fused_trials.py [--epochs 10] [--threads 1] [--sizes 1,8,32] [--repeats 2]
                                          [--shapes 1x256@128,2x128@32,1x16@32,4x24@128] [--flush-denormal]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.stacked import StackedTrainer  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.grid import load_grid  # noqa: E402

GRID = ROOT / "search" / "grids" / "spiralhard-fixed.yaml"


def log(msg: str) -> None:
    print(f"[fused_trials] {msg}", file=sys.stderr, flush=True)


def parse_shape(text: str) -> tuple[int, int, int]:
    """'2x128@32' -> (hidden_layers 2, width 128, batch 32)."""
    try:
        layers, rest = text.split("x")
        width, batch = rest.split("@")
        return int(layers), int(width), int(batch)
    except ValueError:
        raise SystemExit(f"--shapes: expected entries like 2x128@32 (hidden_layers x width @ batch), found {text!r}") from None


DEVICE = "cpu"  # --device: every config of the run trains there


def grid_configs(shape: tuple[int, int, int], n: int, epochs: int, threads: int) -> list[TrainConfig]:
    """n configs of the grid at this shape (relu), learning rates in turn, distinct seeds."""
    grid = load_grid(GRID)
    layers, width, batch = shape
    points = [p for p in grid.configs() if (p["hidden_layers"], p["width"], p["batch_size"], p["activation"]) == (layers, width, batch, "relu")]
    if not points:
        raise SystemExit(f"--shapes: {layers}x{width}@{batch} is not a shape of {GRID.name}")
    extra = {"epochs": epochs, "split": "inner", "device": DEVICE, "threads": threads}
    return [TrainConfig.from_dict({**points[i % len(points)], **extra, "seed": i // len(points)}) for i in range(n)]


def timed(fn) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds, result) of fn() (on CUDA, up to the last kernel's end)."""
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    sync()
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    sync()
    return time.perf_counter() - w, time.process_time() - c, out


def per_hour(configs: int, seconds: float, threads: int) -> float:
    return round(configs * 3600.0 / (seconds * threads), 1) if seconds > 0 else float("nan")


def run_once(task, shape, n: int, epochs: int, threads: int, trainer: bool) -> tuple[float, float]:
    """(wall, CPU seconds) of n configs of `shape` fused, or of one config by the Trainer."""
    configs = grid_configs(shape, n, epochs, threads)
    w, c, _ = timed(lambda: Trainer(configs[0], task).run() if trainer else StackedTrainer(configs, task).run())
    log(f"{'Trainer' if trainer else f'N={n}'} shape {shape}: {w:.2f}s wall, {c:.2f}s CPU ({w / n * 1e3:.0f} ms per config)")
    return w, c


def best_times(task, shapes, sizes, epochs: int, threads: int, repeats: int) -> dict:
    """{(n or 'trainer', shape): (min wall, min CPU seconds) over `repeats` rounds}; the rounds
    run every measurement once in turn, so that load from elsewhere hits all of them alike."""
    best: dict = {}
    for r in range(repeats):
        log(f"round {r + 1}/{repeats}")
        for key, n, shape in [(n, n, sh) for n in sizes for sh in shapes] + [("trainer", 1, sh) for sh in shapes]:
            w, c = run_once(task, shape, n, epochs, threads, key == "trainer")
            old = best.get((key, shape), (float("inf"), float("inf")))
            best[(key, shape)] = (min(old[0], w), min(old[1], c))
    return best


def summarise(best: dict, shapes, sizes, threads: int) -> dict:
    out: dict = {"configs_per_core_hour": {}, "configs_per_cpu_hour": {}, "wall_seconds": {}, "ms_per_config": {}}
    for key in [*sizes, "trainer"]:
        n = 1 if key == "trainer" else key
        wall = sum(best[(key, sh)][0] for sh in shapes)
        cpu = sum(best[(key, sh)][1] for sh in shapes)
        out["configs_per_core_hour"][str(key)] = per_hour(n * len(shapes), wall, threads)
        out["configs_per_cpu_hour"][str(key)] = per_hour(n * len(shapes), cpu, 1)
        out["wall_seconds"][str(key)] = round(wall, 2)
        for sh in shapes:
            out["ms_per_config"].setdefault("{}x{}@{}".format(*sh), {})[str(key)] = round(best[(key, sh)][0] / n * 1e3, 1)
    return out


def loss_check(task, shape, n: int, epochs: int, threads: int) -> tuple[float, float]:
    """(max |loss difference| per epoch, max |final weight difference|): fused vs Trainer."""
    configs = grid_configs(shape, n, epochs, threads)
    fused = StackedTrainer(configs, task)
    results = fused.run()
    loss_diff = weight_diff = 0.0
    for i, c in enumerate(configs):
        trainer = Trainer(c, task)
        ref = trainer.run()
        for mine, theirs in zip(results[i].history, ref.history, strict=True):
            loss_diff = max(loss_diff, *(abs(mine[k] - theirs[k]) for k in ("train_loss", "val_loss")))
        mine_w, ref_w = fused.state_dict(i), trainer.model.state_dict()
        weight_diff = max(weight_diff, *(float((mine_w[k].cpu() - ref_w[k].cpu()).abs().max()) for k in ref_w))
    log(f"check: {n} configs of {shape}, {epochs} epochs: max |loss diff| {loss_diff:.2e}, max |weight diff| {weight_diff:.2e}")
    return loss_diff, weight_diff


F64_TOL = 1e-9


def loss_check_f64(task, shape, n: int, epochs: int, threads: int) -> tuple[float, float]:
    """loss_check with the task, the models and the optimisers in float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return loss_check(dataclasses.replace(task, x=task.x.to(torch.float64), _cache={}), shape, n, epochs, threads)
    finally:
        torch.set_default_dtype(old)


from awnn.machine import cpu_model  # noqa: E402  (re-exported: benchmarks/lean_trials.py imports it from here)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=10, help="epochs per config in the timed runs")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where every config trains; on cuda the rates are per GPU-hour (one GPU, one process)")
    ap.add_argument("--sizes", default="1,8,32", help="configs per fused group, comma-separated")
    ap.add_argument("--shapes", default="1x256@128,2x128@32,1x16@32,4x24@128", help="hidden_layers x width @ batch, comma-separated")
    ap.add_argument("--repeats", type=int, default=2, help="rounds of every measurement; the fastest round counts")
    ap.add_argument("--check-configs", type=int, default=4, help="configs of the fused-vs-Trainer loss check")
    ap.add_argument("--check-epochs", type=int, default=2)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True) for every path (fused and Trainer): faster once Adam's moments of dead "
                         "units decay into denormals, but no longer the Trainer's exact arithmetic")
    args = ap.parse_args()
    if min(args.epochs, args.threads, args.repeats, args.check_configs, args.check_epochs) < 1:
        raise SystemExit("--epochs, --threads, --repeats, --check-configs and --check-epochs must be >= 1")
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(f"--sizes: expected comma-separated integers, found {args.sizes!r}") from None
    if not sizes or sizes[0] < 1:
        raise SystemExit("--sizes: expected integers >= 1")
    shapes = [parse_shape(s.strip()) for s in args.shapes.split(",") if s.strip()]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible to torch")
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    if args.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("--flush-denormal: this CPU cannot flush denormals")
    task = load_task("spiralhard")
    log(f"torch {torch.__version__}, {args.threads} thread(s), shapes {shapes}, sizes {sizes}, {args.epochs} epochs")
    StackedTrainer(grid_configs(shapes[0], 2, 1, args.threads), task).run()  # warm-up: first calls, lazy imports
    Trainer(grid_configs(shapes[0], 1, 1, args.threads)[0], task).run()
    unit = 1 if DEVICE == "cuda" else args.threads  # configs per GPU-hour on CUDA, per core-hour on the CPU
    fused = summarise(best_times(task, shapes, sizes, args.epochs, args.threads, args.repeats), shapes, sizes, unit)
    trainer_core, trainer_cpu = fused["configs_per_core_hour"].pop("trainer"), fused["configs_per_cpu_hour"].pop("trainer")
    fused["wall_seconds"]["trainer"] = fused["wall_seconds"].pop("trainer")
    loss_diff, weight_diff = loss_check(task, shapes[0], args.check_configs, args.check_epochs, args.threads)
    loss_f64, weight_f64 = loss_check_f64(task, shapes[0], args.check_configs, args.check_epochs, args.threads)
    per_core = fused["configs_per_core_hour"]
    top, one = per_core[str(sizes[-1])], per_core.get("1")
    result = {
        "configs_per_core_hour": per_core,
        "configs_per_cpu_hour": fused["configs_per_cpu_hour"],
        "wall_seconds": fused["wall_seconds"],
        "ms_per_config": fused["ms_per_config"],
        f"speedup_{sizes[-1]}_vs_1": round(top / one, 2) if one else None,
        "trainer_configs_per_core_hour": trainer_core,
        "trainer_configs_per_cpu_hour": trainer_cpu,
        "speedup_vs_trainer": round(top / trainer_core, 2),
        "max_abs_loss_diff": loss_diff,
        "max_abs_weight_diff": weight_diff,
        "max_abs_loss_diff_f64": loss_f64,
        "max_abs_weight_diff_f64": weight_f64,
        "f64_check_passed": max(loss_f64, weight_f64) <= F64_TOL,
        "check_configs": args.check_configs,
        "check_epochs": args.check_epochs,
        "shapes": [f"{l}x{w}@{b}" for l, w, b in shapes],
        "sizes": sizes,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "threads": args.threads,
        "flush_denormal": args.flush_denormal,
        "split": "inner",
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "device": DEVICE,
        "rate_unit": "configs per GPU-hour (configs_per_core_hour holds it)" if DEVICE == "cuda" else "configs per core-hour",
        "gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else None,
        "cuda": torch.version.cuda if DEVICE == "cuda" else None,
    }
    print(json_text(result), flush=True)


if __name__ == "__main__":
    main()
