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
* *Device-hours* of a run are its recorded `device_hours` metric (training
  time of every attempt x allocated CPUs, or x the GPU share on GPU
  trials).  A run without it (still running, or left open by a dead driver)
  is estimated from its last `train_seconds` and marked as estimated.
* *Savings ratio* of an arm S against a reference R (`awnn`, and `fixed`,
  the full grid): `sum(device_hours of S's trials) / sum(device_hours of R's
  trials)`, for the selection phase and for selection + re-training.  Its
  confidence interval is a percentile bootstrap over trials: each arm's
  trials are resampled with replacement within their phase (same counts), B
  times.
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

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# the whole analysis under one name (report.py, tests): the reader, the measure modules, the summary
from .contract import PHASES, SELECTABLE, STATUSES, arm_family, redact_uri  # noqa: F401
from .curves import anytime, cost_to_target, ordering, problems, projection, repeat_table  # noqa: F401
from .reader import (RUN_COLUMNS, SEARCH_PARAMS, AnalysisError, ComparisonData, _run_frame, find_comparison,  # noqa: F401
                     load_comparison, load_histories, trials_from_runs)
from .tables import (EARLY_STOPPING, GRID_FAMILIES, REFERENCE, REFERENCES, cost_table, overhead, savings, savings_notes,  # noqa: F401
                     strategy_table, width_table)

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
    "REFERENCE",
    "REFERENCES",
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

    def summary(self) -> dict[str, Any]:
        return summarize(self)


def analyze(data: ComparisonData, reference: str = REFERENCE, margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500, seed: int = 0) -> Analysis:
    ov, ov_sum = overhead(data)
    tg, tg_info = cost_to_target(data, margin=margin, n_orders=n_orders, seed=seed)
    pj, pj_info = projection(data, reference=reference)
    refs = tuple(dict.fromkeys((reference, *REFERENCES)))
    costs, strategies = cost_table(data), strategy_table(data)
    sv = savings(data, references=refs, n_boot=n_boot, seed=seed)
    rp, rp_info = repeat_table(data, costs, strategies, sv, tg)
    return Analysis(
        data=data, costs=costs, strategies=strategies, widths=width_table(data),
        savings=sv, overhead=ov, overhead_summary=ov_sum,
        anytime=anytime(data, n_orders=n_orders, seed=seed), target=tg, target_info=tg_info, repeats=rp, repeats_info=rp_info,
        savings_notes=savings_notes(data, refs), projection=pj, projection_info=pj_info, problems=problems(data),
        settings={"reference": reference, "references": list(refs), "target_margin": margin, "n_boot": n_boot, "n_orders": n_orders, "seed": seed},
    )


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _arm_repeat(d: ComparisonData, arm: str) -> int:
    r = d.runs[d.runs["strategy"] == arm]["repeat"] if len(d.runs) else pd.Series(dtype=float)
    r = pd.to_numeric(r, errors="coerce").dropna()
    if len(r):
        return int(r.iloc[0])
    m = re.fullmatch(r".+\.r(\d+)", arm)
    return int(m.group(1)) if m else 0


def summarize(a: Analysis) -> dict[str, Any]:
    """The machine-readable summary (summary.json; keys in docs/report.md)."""
    d = a.data
    c = d.comparison
    costs = a.costs
    per: dict[str, Any] = {}
    dev: dict[str, Any] = {}
    gpu: dict[str, Any] = {}
    for s in d.strategies:
        rows = costs[costs["strategy"] == s] if len(costs) else costs
        ph = {r["phase"]: r for _, r in rows.iterrows()}
        dev[s] = {p: float(ph[p]["device_hours"]) if p in ph else 0.0 for p in (*PHASES, "total")}
        gpu[s] = {p: float(ph[p]["gpu_hours"]) if p in ph else 0.0 for p in (*PHASES, "total")}
        st = a.strategies[a.strategies["strategy"] == s].iloc[0]
        wd = a.widths[a.widths["strategy"] == s].iloc[0]
        per[s] = {
            "family": d.family(s), "repeat": _arm_repeat(d, s), "order": ordering(d, s),
            "configs": int(ph["selection"]["configs"]) if "selection" in ph else 0,
            "trials": {p: int(ph[p]["trials"]) for p in PHASES if p in ph},
            "runs": {p: int(ph[p]["runs"]) for p in PHASES if p in ph},
            "status_counts": {p: {k: int(ph[p][k]) for k in STATUSES if int(ph[p][k])} for p in PHASES if p in ph},
            "device_hours": dev[s], "gpu_hours": gpu[s],
            "wall_seconds": {p: float(ph[p]["wall_seconds"]) for p in PHASES if p in ph},
            "selected_key": st["selected_key"], "selected_config": st["selected_config"],
            "selected_val_acc": st["selected_val_acc"], "best_val_acc": st["best_val_acc"],
            "test_acc_mean": st["test_acc_mean"], "test_acc_std": st["test_acc_std"], "test_runs": int(st["test_runs"]),
            "width": {"kind": wd["kind"], "per_layer_mean": wd.get("per_layer_mean"), "per_layer_std": wd.get("per_layer_std"),
                      "total_mean": wd["total_mean"], "total_std": wd["total_std"], "n": int(wd["n"])},
        }
    by_ref: dict[str, dict[str, Any]] = {}
    for _, r in a.savings.iterrows():
        by_ref.setdefault(r["reference"], {})[r["strategy"]] = {
            "reference": r["reference"], "selection": r["selection_ratio"], "selection_ci": [r["selection_lo"], r["selection_hi"]],
            "total": r["total_ratio"], "total_ci": [r["total_lo"], r["total_hi"]],
            "selection_hours": r["selection_hours"], "reference_selection_hours": r["reference_selection_hours"],
            "total_hours": r["total_hours"], "reference_total_hours": r["reference_total_hours"]}
    sv = by_ref.get(a.settings["reference"], {})
    head = sv.get("fixed") or (next(iter(sv.values())) if sv else None)
    spread = {}
    for family, info in a.repeats_info.items():
        rows = a.repeats[a.repeats["family"] == family]
        spread[family] = {**info, **{r["metric"]: {"mean": r["mean"], "std": r["std"], "min": r["min"], "max": r["max"], "n": r["n"], "values": r["values"]}
                                     for _, r in rows.iterrows()}}
    out = {
        "schema": "awnn-report/1",
        "comparison": c["id"], "experiment": c["experiment"], "task": c["task"], "budget": c["budget"], "state": c["state"],
        "reference": a.settings["reference"],
        "strategies": per,
        "device_hours": dev, "gpu_hours": gpu,
        "test_acc_mean": {s: per[s]["test_acc_mean"] for s in per}, "test_acc_std": {s: per[s]["test_acc_std"] for s in per},
        "savings_ratio": head["selection"] if head else None,
        "savings_ratio_ci": head["selection_ci"] if head else [None, None],
        "savings_ratio_total": head["total"] if head else None,
        "savings_ratio_total_ci": head["total_ci"] if head else [None, None],
        "savings": sv,
        "savings_by_reference": {ref: by_ref.get(ref, {}) for ref in a.settings["references"]},
        "savings_notes": a.savings_notes,
        "arms": d.strategies,
        "families": d.families,
        "repeats": c.get("repeats", 1),
        "repeat_spread": spread,
        "search": c.get("search", {}),
        "overhead": a.overhead_summary,
        "target": {**a.target_info, "strategies": {r["strategy"]: {"order": r["order"], "reached": r["reached"], "hours_mean": r["hours_mean"], "hours_median": r["hours_median"], "grid_hours": r["grid_hours"]} for _, r in a.target.iterrows()}},
        "projection": {**a.projection_info, "rows": a.projection.to_dict("records")},
        "wall_seconds": c["wall_seconds"],
        "problems": a.problems,
        "settings": a.settings,
    }
    return _clean(out)
