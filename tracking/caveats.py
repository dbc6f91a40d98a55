"""What a reader must know before trusting a comparison's numbers.

One owner for the warnings that the terminal summary (search/summary.py),
the report (tracking/document.py) and summary.json (`warnings`) all give:
a smoke budget's numbers only show that the pipeline runs; arms that all
reach ~100% test accuracy cannot be told apart by accuracy (only cost
compares them); CPU trials whose CPU time is far below their wall time x
CPUs ran on a loaded machine or waited on I/O (their device-hours are CPU
time: tracking/callback.py "Cost").
"""
from __future__ import annotations

import math
from typing import Iterable

__all__ = ["SATURATED", "CPU_BUSY", "caveats", "cpu_time_caveat", "one_draw_caveat", "selection_ties"]

SATURATED = 0.995  # every arm's mean test accuracy at or above this: the task does not tell the arms apart
CPU_BUSY = 0.5  # a CPU trial that used less than this share of its wall time x CPUs did not have its cores to itself


def caveats(budget: str | None, test_acc_means: Iterable[float | None], runs=None, selections=(), learned=None) -> list[str]:
    """The warnings for a comparison run at `budget` whose arms' mean test
    accuracies are `test_acc_means` (None or NaN for an arm without one),
    whose trial runs are `runs` (tracking/reader.py RUN_COLUMNS; None: not
    checked), whose selections are `selections` (see `selection_ties`) and
    whose arms are `learned`: (arms that learn their widths, all arms), or
    None (not checked; see `one_draw_caveat`)."""
    out = []
    if budget == "smoke":
        out.append("the smoke budget trains 2 epochs a trial: these numbers check that the pipeline runs, they say nothing about the strategies "
                   "(use --budget quick or paper)")
    means = [float(m) for m in test_acc_means if m is not None and math.isfinite(m)]  # arms with a test accuracy
    if len(means) > 1 and all(m >= SATURATED for m in means):
        out.append(f"every arm's test accuracy is {100 * SATURATED:.1f}% or more: the task is saturated, accuracy cannot rank the arms, "
                   "compare their cost only")
    line = cpu_time_caveat(runs) if runs is not None else None
    if line:
        out.append(line)
    if learned is not None and budget != "smoke":
        line = one_draw_caveat(*learned)
        if line:
            out.append(line)
    out.extend(selection_ties(selections))
    return out


def one_draw_caveat(learned_arms: Iterable[str], arms: Iterable[str]) -> str | None:
    """The warning for a comparison in which arms that learn their widths
    (`learned_arms`, e.g. awnn) are compared with others (`arms`: all of
    them): how wide such an arm's trials grow moves with the training seed
    and the CPU model's float rounding, and a few trials that grow wide carry
    much of its cost, so its device-hours and savings are one draw, which the
    bootstrap CIs (over its trials) do not cover.  None when no such arm is
    compared with another."""
    learned, arms = [a for a in learned_arms], list(arms)
    if not learned or len(arms) < 2:
        return None
    names = ", ".join(learned)
    return (f"{names} {'learns its' if len(learned) == 1 else 'learn their'} widths: how wide the trials grow, and so the device-hours "
            "and savings, move with the training seed and with the CPU model's float rounding (a few trials that grow wide carry "
            "much of the cost), so this comparison is one draw; its savings CIs resample its trials, not draws: "
            "`--train-seed S` gives another draw, and `awnn draws` the verdict over the draws (docs/results.md, "
            "'How far a seed moves the standard verdict')")


def _number(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def selection_ties(selections) -> list[str]:
    """A warning per arm whose selected config shares its inner validation
    accuracy with other configs, the validation loss deciding (search/protocol.py
    `select_best`).  `selections`: (arm, selected trial key, its selection
    outcomes: dicts with key, status, best_val_acc, best_val_loss and
    select_metric).  Grids on loss and arms without a choice are skipped; under
    cross-validation the selected key's fold's outcomes count."""
    from .contract import SELECTABLE, fold_of_key

    out = []
    for arm, key, outcomes in selections:
        if not key:
            continue
        fold = fold_of_key(key)
        ok = [o for o in outcomes if o.get("status") in SELECTABLE and math.isfinite(_number(o.get("best_val_acc")))
              and fold_of_key(o.get("key", "")) == fold]
        chosen = next((o for o in ok if o.get("key") == key), None)
        if chosen is None or chosen.get("select_metric") == "loss":
            continue
        acc = _number(chosen["best_val_acc"])
        tied = sorted((o for o in ok if abs(_number(o["best_val_acc"]) - acc) <= 1e-9 and o is not chosen),
                      key=lambda o: (_number(o.get("best_val_loss")) if math.isfinite(_number(o.get("best_val_loss"))) else math.inf))
        if not tied:
            continue
        runner = tied[0]
        loss, next_loss = _number(chosen.get("best_val_loss")), _number(runner.get("best_val_loss"))
        gap = (f"{loss:.4g} against {next_loss:.4g} for {runner['key']}, the next"
               if math.isfinite(loss) and math.isfinite(next_loss) else f"the next: {runner['key']}")
        out.append(f"{arm}: its selected config {key} won a tie: {len(tied) + 1} configs reached {100 * acc:.2f}% inner validation "
                   f"accuracy and the lowest validation loss decided ({gap}); another CPU or training seed may select another, "
                   f"and the arm's re-training cost, width and test accuracy follow that choice")
    return out


def cpu_time_caveat(runs) -> str | None:
    """The warning for the CPU trials (no GPU share) among `runs` (a frame
    with the reader's columns cpu_seconds, wall_device_hours, gpu_hours and
    strategy, phase, trial_key) that used less than CPU_BUSY of the CPU time
    their wall time x CPUs allows; None when there are none.  Trials are
    counted once however many runs they have."""
    import pandas as pd

    need = {"cpu_seconds", "wall_device_hours", "gpu_hours", "strategy", "phase", "trial_key"}
    if not len(runs) or not need <= set(runs.columns):
        return None
    cpu = pd.to_numeric(runs["cpu_seconds"], errors="coerce")
    wall = pd.to_numeric(runs["wall_device_hours"], errors="coerce") * 3600.0  # wall seconds x CPUs
    gpu = pd.to_numeric(runs["gpu_hours"], errors="coerce").fillna(0.0)
    measured = cpu.notna() & (wall > 0) & (gpu <= 0)
    if not measured.any():
        return None
    share = cpu[measured] / wall[measured]
    trial = runs.loc[measured, ["strategy", "phase", "trial_key"]].astype(str).agg("/".join, axis=1)
    low = share < CPU_BUSY
    n_low, n_all = trial[low].nunique(), trial.nunique()
    if not n_low:
        return None
    return (f"{n_low} of {n_all} CPU trials used less than {100 * CPU_BUSY:.0f}% of the CPU time their wall time x CPUs allows "
            f"(median {100 * float(share[low].median()):.0f}%): the machine was loaded or the trials waited on I/O; device-hours use "
            "CPU time (the wall-based figure is the metric wall_device_hours)")
