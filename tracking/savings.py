"""Savings: one definition, one direction, one name (issue #32).

The *savings* of an arm are the baseline's device-hours / the arm's:
above 1 the arm is that many times cheaper ("5.84x cheaper"), below 1 it
is dearer ("0.581x, i.e. 1.72x dearer").  The *baseline* is `fixed` (the
full fixed-width grid) when the comparison ran it, else `awnn` (the AWNN
grid, the method under test); a comparison with neither has no savings.
Every screen names the baseline ("vs fixed"): the terminal summary, the
report, summary.json (`baseline`), the comparison run's metric names
(`<arm>.savings_vs_fixed`) and its tag `awnn.savings_baseline`.

Two savings per arm: *selection* (selection trials only) and *total*
(selection + re-training), each with a percentile bootstrap interval over
trials: each arm's trials are resampled with replacement within their
phase (same counts), B times, and the savings recomputed.  A phase of one
trial resamples to itself: where every phase a ratio sums has at most one
trial on both sides, the interval has no width and says nothing, so it is
none (NaN, null in summary.json, "no CI" on the screens; before 2026-12-07 a
one-config comparison's verdict read its zero-width interval as "the whole
95% CI is below 1: dearer"); where one side has one trial, `savings_notes`
says the interval resamples the other side's trials only.  An arm without a
search of its own (fixedplus) counts the whole search of the arm it
derives from in its selection.

Every savings number is shown and stored rounded to DIGITS significant
digits (`rounded`, `fx`), so the terminal, report.md, summary.json and the
MLflow metrics give the same digits.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .contract import PHASES
from .reader import ComparisonData

__all__ = ["BASELINES", "DIGITS", "NO_CI", "baseline_of", "rounded", "fx", "fsavings", "ci_known", "fci", "savings", "savings_notes", "savings_block",
           "SAVINGS_COLUMNS"]

BASELINES = ("fixed", "awnn")  # the first of these the comparison ran is its baseline
DIGITS = 3  # significant digits of every savings number shown or stored
WHAT = {"fixed": "the full fixed-width grid", "awnn": "the AWNN grid, the method under test"}


def baseline_of(arms: Iterable[str]) -> str | None:
    """The comparison's baseline: `fixed` when it ran, else `awnn`, else None (no savings)."""
    arms = list(arms)
    return next((b for b in BASELINES if b in arms), None)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and math.isfinite(float(x))


def rounded(x: Any, digits: int = DIGITS) -> float:
    """`x` to `digits` significant digits (NaN when not a finite number)."""
    return float(f"{float(x):.{digits}g}") if _finite(x) else math.nan


def fx(x: Any) -> str:
    """A savings number as shown everywhere: `5.84x`, `11.3x`, `0.581x`, `1230x` (`n/a` when missing)."""
    if not _finite(x):
        return "n/a"
    v = rounded(x)
    if v == 0:
        return "0x"
    return f"{v:.{max(0, DIGITS - 1 - math.floor(math.log10(abs(v))))}f}x"


NO_CI = "no CI: one trial a phase on each side"


def ci_known(ci: Any) -> bool:
    """`ci` is an interval: two finite numbers (not a missing or a zero-information one, `savings`)."""
    return isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_finite(x) for x in ci)


def fci(ci: Any, sep: str = " to ") -> str:
    """An interval as shown: `5.06x to 5.41x`, or NO_CI."""
    return f"{fx(ci[0])}{sep}{fx(ci[1])}" if ci_known(ci) else NO_CI


def fsavings(x: Any) -> str:
    """A savings number in words: `5.84x cheaper`, `0.581x, i.e. 1.72x dearer`, `1.00x (the same cost)`."""
    if not _finite(x) or rounded(x) <= 0:
        return "n/a"
    v = rounded(x)
    if v > 1:
        return f"{fx(v)} cheaper"
    if v < 1:
        return f"{fx(v)}, i.e. {fx(1 / v)} dearer"
    return f"{fx(v)} (the same cost)"


# ------------------------------------------------------------ per-trial costs
def _phase_costs(runs: pd.DataFrame, arm: str, phase: str) -> np.ndarray:
    """Per-trial device-hours (a trial's runs summed) of one arm and phase."""
    r = runs[(runs["strategy"] == arm) & (runs["phase"] == phase)] if len(runs) else runs
    if not len(r):
        return np.zeros(0)
    return r.groupby("trial_key", sort=True)["device_hours"].sum().to_numpy(dtype=float)


def arm_costs(data: ComparisonData, arm: str, phase: str) -> np.ndarray:
    """Per-trial device-hours of an arm's phase; an arm that depends on another
    (fixedplus) has every trial of that arm in its selection (as cost_table)."""
    own = _phase_costs(data.runs, arm, phase)
    source = data.depends_on(arm) if phase == "selection" else None
    if source is None:
        return own
    return np.concatenate([*(_phase_costs(data.runs, source, ph) for ph in PHASES), own])


SAVINGS_COLUMNS = ["strategy", "family", "baseline", "selection_hours", "baseline_selection_hours", "selection_trials", "baseline_selection_trials",
                   "selection", "selection_lo", "selection_hi", "total_hours", "baseline_total_hours", "total_trials", "baseline_total_trials",
                   "total", "total_lo", "total_hi", "n_boot", "level"]


def savings(data: ComparisonData, baseline: str | None = None, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per arm other than the baseline (`baseline_of(data.strategies)` when
    None): selection and total device-hours of the arm and of the baseline,
    the savings (baseline / arm, unrounded here) and their percentile
    bootstrap intervals (module docstring; numpy `default_rng(seed)`, the
    baseline's phases drawn first, then each arm's in run order).  No
    baseline in the comparison: no rows (`savings_notes` says so)."""
    baseline = baseline if baseline is not None else baseline_of(data.strategies)
    if baseline is None or baseline not in data.strategies:
        return pd.DataFrame(columns=SAVINGS_COLUMNS)
    rng = np.random.default_rng(seed)
    alpha = (1 - level) / 2

    def boot(costs: np.ndarray) -> np.ndarray:
        if len(costs) == 0:
            return np.zeros(n_boot)
        idx = rng.integers(0, len(costs), size=(n_boot, len(costs)))
        return costs[idx].sum(axis=1)

    def ci(x: np.ndarray) -> tuple[float, float]:
        x = x[np.isfinite(x)]
        return (float(np.quantile(x, alpha)), float(np.quantile(x, 1 - alpha))) if len(x) else (math.nan, math.nan)

    def ratio(base: float, mine: float) -> float:
        return base / mine if mine > 0 else math.nan

    base = {ph: arm_costs(data, baseline, ph) for ph in PHASES}
    b_sel, b_ass = boot(base["selection"]), boot(base["assessment"])
    rows = []
    for arm in data.strategies:
        if arm == baseline:
            continue
        mine = {ph: arm_costs(data, arm, ph) for ph in PHASES}
        sel, ass = boot(mine["selection"]), boot(mine["assessment"])
        with np.errstate(divide="ignore", invalid="ignore"):
            r_sel = np.where(sel > 0, b_sel / sel, np.nan)
            r_tot = np.where(sel + ass > 0, (b_sel + b_ass) / (sel + ass), np.nan)
        (lo_s, hi_s), (lo_t, hi_t) = ci(r_sel), ci(r_tot)
        if max(len(base["selection"]), len(mine["selection"])) < 2:  # every resample the same: no interval (module docstring)
            lo_s = hi_s = math.nan
        if max(len(x) for x in (*base.values(), *mine.values())) < 2:
            lo_t = hi_t = math.nan
        h_sel, h_tot = float(mine["selection"].sum()), float(mine["selection"].sum() + mine["assessment"].sum())
        hb_sel, hb_tot = float(base["selection"].sum()), float(base["selection"].sum() + base["assessment"].sum())
        rows.append({
            "strategy": arm, "family": data.family(arm), "baseline": baseline,
            "selection_hours": h_sel, "baseline_selection_hours": hb_sel,
            "selection_trials": len(mine["selection"]), "baseline_selection_trials": len(base["selection"]),
            "selection": ratio(hb_sel, h_sel), "selection_lo": lo_s, "selection_hi": hi_s,
            "total_hours": h_tot, "baseline_total_hours": hb_tot,
            "total_trials": len(mine["selection"]) + len(mine["assessment"]), "baseline_total_trials": len(base["selection"]) + len(base["assessment"]),
            "total": ratio(hb_tot, h_tot), "total_lo": lo_t, "total_hi": hi_t, "n_boot": n_boot, "level": level,
        })
    return pd.DataFrame(rows, columns=SAVINGS_COLUMNS)


def savings_notes(data: ComparisonData, baseline: str | None = None) -> list[str]:
    """What a reader must know about the baseline: which arm it is when it is not `fixed`, or why there are no savings."""
    baseline = baseline if baseline is not None else baseline_of(data.strategies)
    if baseline is None:
        return [f"No savings: they need `fixed` ({WHAT['fixed']}) or `awnn` ({WHAT['awnn']}) as the baseline, and the comparison ran "
                f"neither (arms: {', '.join(data.strategies) or 'none'})."]
    if len(data.strategies) < 2:
        return [f"No savings: the comparison has no arm besides the baseline `{baseline}`."]
    notes = []
    if baseline != BASELINES[0]:
        notes.append(f"The comparison did not run `fixed` ({WHAT['fixed']}): savings are against `{baseline}` ({WHAT.get(baseline, baseline)}).")
    base = len(arm_costs(data, baseline, "selection"))
    for arm in data.strategies:
        mine = len(arm_costs(data, arm, "selection"))
        if arm == baseline or not base or not mine or (base < 2 and mine < 2):
            continue  # (none at all: no savings; one on each side: no interval, NO_CI says so)
        if min(base, mine) < 2:
            one, other = (arm, baseline) if mine < 2 else (baseline, arm)
            notes.append(f"`{one}`'s model selection is one trial: the selection interval of `{arm}` resamples `{other}`'s trials only, "
                         f"taking that one trial's cost as exact (its spread is unknown).")
    return notes


def savings_block(row: pd.Series | dict) -> dict[str, Any]:
    """summary.json's `savings.<arm>`: the arm's savings against the baseline, rounded (DIGITS), with their intervals and hours."""
    r = dict(row)
    return {"baseline": r["baseline"], "selection": rounded(r["selection"]), "selection_ci": [rounded(r["selection_lo"]), rounded(r["selection_hi"])],
            "total": rounded(r["total"]), "total_ci": [rounded(r["total_lo"]), rounded(r["total_hi"])],
            "selection_hours": r["selection_hours"], "baseline_selection_hours": r["baseline_selection_hours"],
            "total_hours": r["total_hours"], "baseline_total_hours": r["baseline_total_hours"],
            "selection_trials": int(r["selection_trials"]), "baseline_selection_trials": int(r["baseline_selection_trials"]),
            "total_trials": int(r["total_trials"]), "baseline_total_trials": int(r["baseline_total_trials"])}
