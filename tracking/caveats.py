"""What a reader must know before trusting a comparison's numbers.

One owner for the warnings that the terminal summary (search/summary.py),
the report (tracking/document.py) and summary.json (`warnings`) all give:
a smoke budget's numbers only show that the pipeline runs; arms that all
reach ~100% test accuracy cannot be told apart by accuracy (only cost
compares them).
"""
from __future__ import annotations

import math
from typing import Iterable

__all__ = ["SATURATED", "caveats"]

SATURATED = 0.995  # every arm's mean test accuracy at or above this: the task does not tell the arms apart


def caveats(budget: str | None, test_acc_means: Iterable[float | None]) -> list[str]:
    """The warnings for a comparison run at `budget` whose arms' mean test
    accuracies are `test_acc_means` (None or NaN for an arm without one)."""
    out = []
    if budget == "smoke":
        out.append("the smoke budget trains 2 epochs a trial: these numbers check that the pipeline runs, they say nothing about the strategies "
                   "(use --budget quick or paper)")
    means = [float(m) for m in test_acc_means if m is not None and math.isfinite(m)]  # arms with a test accuracy
    if len(means) > 1 and all(m >= SATURATED for m in means):
        out.append(f"every arm's test accuracy is {100 * SATURATED:.1f}% or more: the task is saturated, accuracy cannot rank the arms, "
                   "compare their cost only")
    return out
