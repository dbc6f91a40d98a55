"""How much of a sweep's slot time goes to Ray Tune and tracking instead of training.

Runs `awnn sweep --task spiral --strategy fixed` (60 selection trials + 2
re-training runs) on the local Ray with a short fixed budget, then reads
MLflow back:

    overhead_fraction = 1 - sum(in-trial training seconds) / (wall seconds x slots)

where wall is the time the sweep's phases ran on Ray (from the first trial
request, actor start-up included, to the last result logged; Ray's own
start-up, MLflow's database creation and - since the local Ray's workers are
warmed while the driver sets up (search/tune.py, init_ray) - whatever is left
of that warm-up are excluded and reported apart as `startup_seconds`) and
slots = concurrent trials = CPUs / cpus_per_trial.
`per_trial_overhead_seconds` = (wall x slots - training) / trials.
`end_to_end_overhead_fraction` is the same ratio over the whole command's
wall time (Python and Ray start-up, MLflow set-up and shutdown included):
compare it, not overhead_fraction, across changes to the set-up.

Where the overhead goes (from the trial runs' driver-side start/end times,
their `train_seconds` and the worker process that ran them, `awnn.pid`):

    startup_slot_seconds      per worker process: phase start -> its first
                              trial's start, plus that trial's life minus its
                              training (worker start, import torch, ray.tune,
                              the trainer)
    steady_trial_overhead_s   median over the other trials of (life - training)
                              plus the median gap between a process's trials
    steady_overhead_fraction  overhead_fraction with the start-up slot-seconds
                              taken out of both wall x slots and the overhead

Prints one JSON object as its last line.

Usage:  python benchmarks/sweep_overhead.py [--epochs 100] [--num-cpus 2] [--task spiral]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracking.fmt import json_text

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=100, help="epochs per trial (spiral's paper budget is 1000)")
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--report-interval", type=float, default=None, help="default: the CLI's")
    ap.add_argument("--task", default="spiral", help="whose fixed grid to sweep (spiral: 60 configs; spiralhard: 180)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="awnn-sweep-bench-"))
    budget = work / "bench-budget.yaml"
    budget.write_text(f"epoch_scale: {args.epochs / 1000}\nmin_epochs: {args.epochs}\nmax_epochs: {args.epochs}\nretrain_runs: 2\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "search.cli", "sweep", "--task", args.task, "--strategy", "fixed", "--budget", str(budget),
           "--num-cpus", str(args.num_cpus)]
    if args.report_interval is not None:
        cmd += ["--report-interval", str(args.report_interval)]
    print(f"running: {' '.join(cmd[2:])} in {work}", file=sys.stderr)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=work, env=env, text=True, stdout=subprocess.PIPE, stderr=sys.stderr)
    end_to_end = time.monotonic() - t0
    if p.returncode != 0:
        print(json_text({"error": f"sweep exited {p.returncode}"}))
        sys.exit(1)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"awnn-{args.task}")
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    sweeps = [r for r in runs if r.data.tags.get("awnn.kind") == "sweep"]
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    wall = sum(r.data.metrics["wall_seconds"] for r in sweeps)
    train = sum(r.data.metrics["train_seconds"] for r in trials)
    slots = args.num_cpus  # 1 CPU per trial
    startup, steady, steady_gap = breakdown(sweeps, trials)
    out = {
        "trials": len(trials),
        "epochs_per_trial": args.epochs,
        "slots": slots,
        "wall_seconds": round(wall, 2),
        "train_seconds": round(train, 2),
        "mean_trial_train_seconds": round(train / len(trials), 3),
        "overhead_fraction": round(1 - train / (wall * slots), 4),
        "per_trial_overhead_seconds": round((wall * slots - train) / len(trials), 4),
        "end_to_end_seconds": round(end_to_end, 2),
        "startup_seconds": round(end_to_end - wall, 2),
        "end_to_end_overhead_fraction": round(1 - train / (end_to_end * slots), 4),
        "report_interval": args.report_interval,
        "startup_slot_seconds": round(startup, 2),
        "steady_trial_overhead_seconds": round(steady + steady_gap, 4),
        "steady_overhead_fraction": round(1 - train / (wall * slots - startup), 4),
        "task": args.task,
    }
    print(json_text(out))


def breakdown(sweeps, trials) -> tuple[float, float, float]:
    """(start-up slot-seconds, median life - training of the other trials,
    median gap between consecutive trials of one process); see the docstring."""
    import statistics

    first_phase_start = min(r.info.start_time for r in sweeps) / 1000
    by_pid: dict[str, list] = {}
    for r in sorted(trials, key=lambda r: r.info.start_time):
        by_pid.setdefault(r.data.tags.get("awnn.pid", "?"), []).append(r)
    startup = 0.0
    rest, gaps = [], []
    for runs in by_pid.values():
        first = runs[0]
        life = (first.info.end_time - first.info.start_time) / 1000
        startup += (first.info.start_time / 1000 - first_phase_start) + (life - first.data.metrics["train_seconds"])
        for r in runs[1:]:
            rest.append((r.info.end_time - r.info.start_time) / 1000 - r.data.metrics["train_seconds"])
        gaps += [(b.info.start_time - a.info.end_time) / 1000 for a, b in zip(runs, runs[1:])]
    return startup, statistics.median(rest) if rest else 0.0, statistics.median(gaps) if gaps else 0.0


if __name__ == "__main__":
    main()
