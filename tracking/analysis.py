"""Read a comparison back from MLflow and compute what its search cost.

Everything here reads only what the tracking store holds (runs, params,
metrics, tags; see tracking/callback.py and search/sweep.py for the
contract), so a report can be rebuilt from a tracking server alone:

    data = load_comparison(uri, comparison="spiralhard-20260101-120000-ab12")
    result = analyze(data)            # pandas tables + a JSON-able summary

Definitions (docs/report.md explains them at more length):

* An *arm* is one run of one search strategy (its *family*: fixed, awnn,
  tpe, asha, random).  Deterministic families have one arm named after the
  family; stochastic ones (tpe, asha, random) run `--repeats N` times with
  different seeds, as arms `<family>.r<k>` (just `<family>` when N = 1).
  Every table here has one row per arm, in the column `strategy` (the arm;
  comparisons written before arms existed have arm = family), and `family`
  where useful.
* A *trial* is one (arm, phase, trial key); a *config* is a selection
  trial.  A trial's runs are its MLflow runs: usually one, more when a dead
  driver left it `interrupted` and a resumed comparison ran it again.  An
  interrupted run's compute counts; it is not another config.
* *Device-hours* of a run are its recorded `device_hours` metric (on a CPU
  trial the CPU time its process spent training, every attempt, capped at
  wall time x allocated CPUs; on a GPU trial wall time x the GPU share;
  the wall-based figure is `wall_device_hours`).  A run without it (still running, or left open by a dead driver)
  is estimated from its last `train_seconds` and marked as estimated.
* *Savings* of an arm against the baseline (`fixed`, the full grid, when
  the comparison ran it, else `awnn`): `sum(device_hours of the baseline's
  trials) / sum(device_hours of the arm's trials)`, > 1: the arm is that
  many times cheaper; for the selection phase and for selection +
  re-training, each with a percentile bootstrap interval over trials
  (tracking/savings.py owns the definition, the rounding and the wording).
* *Any-time curve*: the trials of a grid (fixed, awnn) have no natural
  order, so for `n_orders` random orders the trials are run one after
  another; after spending x device-hours the best inner-validation accuracy
  so far is recorded; the curve is its mean (and 10-90% band) over orders.
  The arms of tpe, asha and random have an order, the one their trials ran
  in (by run end time): their curve is that one order.
* *Overhead*: device-seconds per training sample per epoch of each AWNN
  trial divided by that of fixed trials of the most similar width (same
  split, hidden layers and batch size when the grid has them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

# the whole analysis under one name (report.py, tests): the reader, the measure modules, the summary
from .contract import PHASES, SELECTABLE, STATUSES, arm_family, redact_uri  # noqa: F401
from .curves import anytime, cost_to_target, ordering, problems, projection, repeat_table  # noqa: F401
from .reader import (EARLY_STOPPING, GRID_FAMILIES, RUN_COLUMNS, SEARCH_PARAMS, AnalysisError, ComparisonData,  # noqa: F401
                     _run_frame, find_comparison, load_comparison, load_histories, trials_from_runs)
from .caveats import caveats
from .truncation import truncation_summary, truncation_table
from .summary import summarize
from .savings import BASELINES, baseline_of, savings, savings_notes  # noqa: F401
from .tables import cost_table, overhead, strategy_table, width_table

__all__ = [
    "AnalysisError",
    "ComparisonData",
    "Analysis",
    "find_comparison",
    "load_comparison",
    "load_histories",
    "analyze",
    "summarize",
    "cost_table",
    "strategy_table",
    "width_table",
    "savings",
    "overhead",
    "anytime",
    "cost_to_target",
    "projection",
    "problems",
    "repeat_table",
    "savings_notes",
    "ordering",
    "arm_family",
    "baseline_of",
    "BASELINES",
]


# ------------------------------------------------------------------ all
@dataclass
class Analysis:
    data: ComparisonData
    costs: pd.DataFrame
    strategies: pd.DataFrame
    widths: pd.DataFrame
    savings: pd.DataFrame
    overhead: pd.DataFrame
    overhead_summary: dict[str, Any]
    anytime: pd.DataFrame
    target: pd.DataFrame
    target_info: dict[str, Any]
    repeats: pd.DataFrame
    repeats_info: dict[str, Any]
    savings_notes: list[str]
    projection: pd.DataFrame
    projection_info: dict[str, Any]
    problems: list[str]
    settings: dict[str, Any]
    warnings: list[str] = field(default_factory=list)  # tracking/caveats.py: what a reader must know first
    truncation: pd.DataFrame = field(default_factory=pd.DataFrame)  # tracking/truncation.py: per arm and % of neurons kept
    truncation_info: dict[str, Any] = field(default_factory=dict)  # per arm: the largest cut within 1 point

    def summary(self) -> dict[str, Any]:
        return summarize(self)


def _selections(data: ComparisonData, strategies: pd.DataFrame) -> list[tuple]:
    """(arm, selected key, its selection trials as outcomes) for tracking/caveats.py `selection_ties`."""
    trials = data.trials()
    if not len(trials) or not len(strategies):
        return []
    out = []
    for arm, key in zip(strategies["strategy"], strategies["selected_key"]):
        sel = trials[(trials["strategy"] == arm) & (trials["phase"] == "selection")]
        out.append((arm, key, [{"key": t.trial_key, "status": t.status, "best_val_acc": t.best_val_acc, "best_val_loss": t.best_val_loss,
                                "select_metric": (t.config if isinstance(t.config, dict) else {}).get("select_metric")}
                               for t in sel.itertuples()]))
    return out


def analyze(data: ComparisonData, margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500, seed: int = 0) -> Analysis:
    """Every table of the report; the savings are against `baseline_of(data.strategies)` (tracking/savings.py)."""
    ov, ov_sum = overhead(data)
    tg, tg_info = cost_to_target(data, margin=margin, n_orders=n_orders, seed=seed)
    pj, pj_info = projection(data)
    baseline = baseline_of(data.strategies)
    costs, strategies = cost_table(data), strategy_table(data)
    sv = savings(data, baseline, n_boot=n_boot, seed=seed)
    rp, rp_info = repeat_table(data, costs, strategies, sv, tg)
    trunc = truncation_table(data)
    return Analysis(
        data=data, costs=costs, strategies=strategies, widths=width_table(data),
        savings=sv, overhead=ov, overhead_summary=ov_sum,
        anytime=anytime(data, n_orders=n_orders, seed=seed), target=tg, target_info=tg_info, repeats=rp, repeats_info=rp_info,
        savings_notes=savings_notes(data, baseline), projection=pj, projection_info=pj_info, problems=problems(data),
        settings={"baseline": baseline, "target_margin": margin, "n_boot": n_boot, "n_orders": n_orders, "seed": seed},
        warnings=caveats(data.comparison.get("budget"), strategies["test_acc_mean"].tolist() if len(strategies) else [], runs=data.runs,
                         selections=_selections(data, strategies), learned=(data.adaptive_arms(), data.strategies)),
        truncation=trunc, truncation_info=truncation_summary(trunc),
    )
