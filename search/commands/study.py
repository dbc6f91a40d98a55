"""awnn study: check one of the AWNN paper's claims with ordinary sweeps.

    awnn study table1    [--profiles authors,paper-text] [--budget B] [run flags]
    awnn study fig3      ...
    awnn study fig4      ...
    awnn study profiles  ...
    awnn study compression ...

Each claim is a set of AWNN sweeps (selection on the inner split, then R
re-training runs of the selected config; `awnn sweep --strategy awnn`),
run on Ray and logged to MLflow like any sweep, one per task and profile:

* table1: the AWNN rows of Table 1 on DoubleMoon, Spiral and SpiralHard:
  test accuracy and learned width (total, at the best-validation epoch) of
  the selected config, mean over the R runs.  Paper: 100.0 / 99.8 / 100.0 %,
  8.1 / 65.9 / 227.4 neurons.
* fig3: the same sweeps; the claim is that the width grows with the task's
  difficulty, DoubleMoon < Spiral < SpiralHard.
* fig4: SpiralHard, ReLU6, one hidden layer, sigma_theta 100: a grid of
  starting rates {0.005, 0.01, 0.05} x batch sizes {32, 128}; the claim is
  that the widths converge (we call them converged when the largest final
  width is at most 1.5x the smallest).
* profiles: table1 under both profiles, side by side.
* compression: the paper's online compression (section 5.3, Fig. 5): on
  SpiralHard (1 hidden layer, ReLU6, weight_prior uninformative), the
  config keys compress_start_epoch / compress_end_epoch /
  compress_rate_mean / compress_std_start / compress_std_end put
  p(rate) = N(0.05, s) on the rates from the paper's epoch 1000 and anneal
  s from 1.0 to 0.1 by its epoch 2500 (of Table 3's 5000 for SpiralHard; both scaled
  with the budget's epochs: quick 6 -> 15 of 60).  Two one-config sweeps, with and
  without it (compress_start_epoch 0); the claim is that the width shrinks
  (paper: ~800 -> ~300) at no test-accuracy loss (we say it holds when the
  width at the selected epoch is at least 50% below the uncompressed runs'
  and the test accuracy at most 1 point lower).  Its own module:
  search/commands/study_compression.py.

The grids are the packaged AWNN grids (fig4: its own), with `awnn_profile`
set in their `fixed` section; they are written to `--grid-dir`'s study
copies under `<storage>/study-grids/`.  Prints one table and, last, one
JSON line.  Exit 1 when a sweep ends without a usable result.
"""
from __future__ import annotations

from . import comma_list, command_parser

import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from tracking.contract import SELECTABLE
from tracking.files import write_atomic
from tracking.fmt import json_text

from .common import add_run_flags, check_run_flags, options_from, say_unused_flags, settings_from, table_options, unwritten_line

CLAIMS = ("table1", "fig3", "fig4", "profiles", "compression")
TASKS = ("doublemoon", "spiral", "spiralhard")
PAPER_TABLE1 = {"doublemoon": (100.0, 8.1), "spiral": (99.8, 65.9), "spiralhard": (100.0, 227.4)}
FIG4_CONVERGED_RATIO = 1.5
FIG4_GRID = {
    "task": "spiralhard",
    "strategy": "awnn",
    "description": "paper Fig. 4: SpiralHard widths from different starting rates and batch sizes under ReLU6",
    "epochs": 5000,
    "retrain_runs": 1,
    "fixed": {"model": "awnn", "optimizer": "adam", "hidden_layers": 1, "activation": "relu6", "lr": 0.01, "quantile_k": 0.9, "sigma_theta": 100.0},
    "grid": {"rate": [0.005, 0.01, 0.05], "batch_size": [32, 128]},
}


def add_parser(sub) -> None:
    p = command_parser(sub, "study", "check a claim of the AWNN paper (table1, fig3, fig4, profiles, compression) with AWNN sweeps",
                       "Run the AWNN sweeps a claim of the paper rests on and print a verdict per profile, and one "
                       "JSON line with the rows.  compression (section 5.3, Fig. 5): SpiralHard, 1 hidden layer, ReLU6, "
                       "weight_prior uninformative, with and without an annealed rate prior (config keys "
                       "compress_start_epoch, compress_end_epoch, compress_rate_mean, compress_std_start, compress_std_end): "
                       "N(0.05, s) from the paper's epoch 1000, s 1.0 -> 0.1 by its epoch 2500 of 5000, scaled with the "
                       "budget's epochs (quick: 6 -> 15 of 60).",
                       ["awnn study table1 --budget quick", "awnn study fig3 --budget smoke", "awnn study profiles --budget quick",
                        "awnn study compression --budget quick --num-cpus 2"])
    p.add_argument("claim", choices=CLAIMS, help="table1: Table 1's AWNN rows; fig3: width grows with difficulty; "
                                                 "fig4: widths converge across starting rates and batch sizes; profiles: table1 in both profiles; "
                                                 "compression: an annealed rate prior shrinks the width at no accuracy loss")
    p.add_argument("--profiles", default=None, help="comma-separated awnn_profile values (default: authors; profiles: authors,paper-text)")
    add_run_flags(p, task=False)
    p.set_defaults(func=run)


def _grid_file(directory: Path, source: dict[str, Any], profile: str) -> dict[str, Any]:
    grid = {**source, "fixed": {**(source.get("fixed") or {}), "awnn_profile": profile}}
    grid["description"] = f"{source.get('description', '')} [awnn study, profile {profile}]".strip()
    write_atomic(directory / f"{grid['task']}-awnn.yaml", yaml.safe_dump(grid, sort_keys=False))
    return grid


def claim_tasks(claim: str) -> list[str]:
    """The tasks the study of `claim` runs."""
    if claim == "compression":
        from .study_compression import TASK

        return [TASK]
    return [FIG4_GRID["task"]] if claim == "fig4" else list(TASKS)


def _study_grids(claim: str, profile: str, root: Path, grid_dir: str | None) -> tuple[Path, list[str]]:
    """A folder of AWNN grid files with `awnn_profile: profile`, and its tasks."""
    from ..grid import find_grid, grid_folder

    directory = root / f"{claim}-{profile}"
    directory.mkdir(parents=True, exist_ok=True)
    if claim == "fig4":
        _grid_file(directory, FIG4_GRID, profile)
        return directory, ["spiralhard"]
    source_dir = grid_folder(grid_dir)
    for task in TASKS:
        find_grid(task, "awnn", source_dir)  # there and valid, or a GridError naming the file
        _grid_file(directory, yaml.safe_load((source_dir / f"{task}-awnn.yaml").read_text()), profile)
    return directory, list(TASKS)


def _mean(values: list[float]) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.fmean(values) if values else math.nan


def _row(task: str, profile: str, result) -> dict[str, Any]:
    """Test accuracy and learned width of an AWNN sweep's re-training runs."""
    runs = [o for o in (result.assessment.outcomes if result.assessment else []) if o.get("status") in SELECTABLE]
    widths = [float(sum(o["widths_at_best"])) for o in runs if o.get("widths_at_best")]
    selection = [
        {"config": {k: o["config"].get(k) for k in ("rate", "batch_size", "hidden_layers", "activation", "sigma_theta")},
         "final_widths": o.get("widths"), "widths_at_best": o.get("widths_at_best"), "best_val_acc": o.get("best_val_acc"), "status": o.get("status")}
        for o in result.selection.outcomes
    ]
    cfg = (result.selected or {}).get("config") or {}
    return {
        "task": task,
        "profile": profile,
        "selected": {k: cfg.get(k) for k in ("hidden_layers", "activation", "sigma_theta", "rate", "batch_size")},
        "test_acc_mean": result.summary.get("test_acc_mean", math.nan),
        "test_acc_std": result.summary.get("test_acc_std", math.nan),
        "runs": len(runs),
        "width_mean": _mean(widths),
        "width_std": statistics.stdev(widths) if len(widths) > 1 else (0.0 if widths else math.nan),
        "selection": selection,
    }


def _verdicts(claim: str, rows: list[dict[str, Any]], profiles: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for profile in profiles:
        mine = {r["task"]: r for r in rows if r["profile"] == profile}
        if claim in ("table1", "profiles"):
            out[profile] = {
                t: {"test_acc_within_1pt": (100.0 * mine[t]["test_acc_mean"]) >= PAPER_TABLE1[t][0] - 1.0,
                    "width_within_paper_2std": _within(mine[t]["width_mean"], t)}
                for t in TASKS if t in mine
            }
        elif claim == "fig3":
            w = [mine[t]["width_mean"] for t in TASKS]
            out[profile] = {"width_grows_with_difficulty": bool(w[0] < w[1] < w[2])}
        else:  # fig4: final widths of the selection trials
            finals = [sum(s["final_widths"]) for s in mine["spiralhard"]["selection"] if s.get("final_widths")]
            ratio = max(finals) / min(finals) if finals and min(finals) > 0 else math.inf
            out[profile] = {"final_widths": finals, "max_over_min": ratio, "widths_converge": ratio <= FIG4_CONVERGED_RATIO}
    return out


PAPER_WIDTH_STD = {"doublemoon": 2.8, "spiral": 8.7, "spiralhard": 32.4}


def _within(width: float, task: str) -> bool:
    return math.isfinite(width) and abs(width - PAPER_TABLE1[task][1]) <= 2 * PAPER_WIDTH_STD[task]


def _print_table(claim: str, rows: list[dict[str, Any]], verdicts: dict[str, Any], out=None) -> None:
    out = out if out is not None else sys.stdout  # (at call time: the stream the CLI guards, search/signals.py)
    print(f"\nawnn study {claim}", file=out)
    header = f"{'profile':<11} {'task':<11} {'selected (layers, act, sigma)':<30} {'test acc %':>16} {'width':>14} {'paper':>16}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in rows:
        s = r["selected"]
        acc, width = PAPER_TABLE1.get(r["task"], (math.nan, math.nan))
        print(f"{r['profile']:<11} {r['task']:<11} {str((s['hidden_layers'], s['activation'], s['sigma_theta'])):<30} "
              f"{100 * r['test_acc_mean']:>8.2f} +- {100 * r['test_acc_std']:<5.2f} {r['width_mean']:>7.1f} +- {r['width_std']:<5.1f} "
              f"{acc:>6.1f}% {width:>6.1f}", file=out)
        if claim == "fig4":
            for sel in r["selection"]:
                print(f"    rate {sel['config']['rate']}, batch {sel['config']['batch_size']}: final widths {sel['final_widths']}, "
                      f"inner val acc {sel['best_val_acc']}", file=out)
    for profile, v in verdicts.items():
        print(f"{profile}: {json_text(v)}", file=out)


def run(args) -> int:
    from ..budget import resolve_budget
    from ..errors import OptionError
    from ..sweep import Comparison

    from awnn.config import PROFILES

    default = "authors,paper-text" if args.claim == "profiles" else "authors"
    profiles = comma_list("--profiles", args.profiles or default)
    bad = [p for p in profiles if p not in PROFILES]
    if bad or not profiles:
        raise OptionError(f"--profiles: expected a comma-separated list of {list(PROFILES)}, found {args.profiles!r}")
    if args.task is not None:  # (it was "not used" until 2026-12-07: a study ran all its tasks while the user asked for one)
        tasks = ", ".join(claim_tasks(args.claim))
        raise OptionError(f"--task {args.task}: a study runs its own tasks ({args.claim}: {tasks}); leave --task out, or run AWNN on one "
                          f"task with `awnn sweep --task {args.task} --strategy awnn`")
    check_run_flags(args)  # --cpus-per-trial 0, nan, ...: one line naming the flag, before anything starts
    resolve_budget(args.budget)  # (a budget file's error before the notes below; each sweep reads it again)
    say_unused_flags(args, ["awnn"], claim_tasks(args.claim), "a study")
    settings = settings_from(args)
    storage = settings.storage_path()
    root = (Path(storage) if "://" not in storage else Path.cwd() / "awnn-results") / "study-grids"
    if args.claim == "compression":
        from .study_compression import run_compression

        return run_compression(args, profiles, settings, root)
    rows, failed, comparisons = [], False, []
    for profile in profiles:
        directory, tasks = _study_grids(args.claim, profile, root, args.grid_dir)
        for task in tasks:
            comparison = Comparison(task, ["awnn"], args.budget, settings, tracking_uri=args.tracking_uri, resume=args.resume,
                                    grid_dir=str(directory), kind="sweep", options=options_from(args), data_root=args.data_root, table_options=table_options(args),
                                    protocol=args.protocol, train_seed=args.train_seed)
            result = comparison.run()[0]
            comparisons.append(comparison)
            failed |= result.selected is None
            rows.append(_row(task, profile, result))
            print(f"study {args.claim}: {profile} {task} done (sweep {comparison.id})", file=sys.stderr, flush=True)
    verdicts = _verdicts(args.claim, rows, profiles)
    _print_table(args.claim, rows, verdicts)
    print(json_text({"claim": args.claim, "budget": args.budget, "profiles": profiles, "rows": rows, "verdicts": verdicts}))
    lacking = unwritten_line("study", comparisons)  # (the rows above come from the drivers' results, not from MLflow)
    if lacking:
        print(lacking, file=sys.stderr)
    return 1 if failed or lacking else 0
