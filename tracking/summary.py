"""summary.json: its one owner (built by `summarize`, checked by `validate_summary`; keys in docs/report.md)."""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import pandas as pd

from .budget_curve import BudgetRecords, budget_curve, still_moving
from .contract import PHASES, STATUSES
from .curves import ordering
from .execution import execution
from .fmt import json_safe
from .links import comparison_links
from .reader import ComparisonData
from .savings import savings_block
from .verdict import verdict

if TYPE_CHECKING:
    from .analysis import Analysis


SUMMARY_KEYS = {
    "schema": str,
    "comparison": str,
    "experiment": str,
    "task": (str, type(None)),
    "budget": (str, type(None)),
    "protocol": dict,
    "state": str,
    "baseline": (str, type(None)),
    "verdict": dict,
    "strategies": dict,
    "device_hours": dict,
    "gpu_hours": dict,
    "test_acc_mean": dict,
    "test_acc_std": dict,
    "savings": dict,
    "savings_notes": list,
    "arms": list,
    "families": dict,
    "repeats": int,
    "repeat_spread": dict,
    "overhead": dict,
    "target": dict,
    "projection": dict,
    "budget_curve": dict,
    "budget_still_moving": (bool, type(None)),
    "budget_verdict": str,
    "paper_budget_projection": dict,
    "problems": list,
    "warnings": list,
    "truncation": dict,
    "mlflow": dict,
    "settings": dict,
    "execution": dict,
    "files": dict,
}
STRATEGY_KEYS = ("family", "repeat", "order", "configs", "trials", "runs", "status_counts", "device_hours", "gpu_hours", "selected_key", "test_acc_mean", "test_acc_std", "test_runs", "width")


def validate_summary(summary: dict[str, Any]) -> list[str]:
    """Problems with a summary.json (empty when it has every documented key)."""
    errs = []
    for key, typ in SUMMARY_KEYS.items():
        if key not in summary:
            errs.append(f"missing key {key!r}")
        elif not isinstance(summary[key], typ):
            errs.append(f"key {key!r}: expected {typ}, found {type(summary[key]).__name__}")
    for s, block in (summary.get("strategies") or {}).items():
        for key in STRATEGY_KEYS:
            if key not in block:
                errs.append(f"strategies.{s}: missing key {key!r}")
        for key in ("device_hours", "test_acc_mean", "test_acc_std"):
            if s not in (summary.get(key) or {}):
                errs.append(f"{key}: missing strategy {s!r}")
    for arm, block in (summary.get("savings") or {}).items():
        if block.get("baseline") != summary.get("baseline"):
            errs.append(f"savings.{arm}: against {block.get('baseline')!r}, not the baseline {summary.get('baseline')!r}")
        for key in ("selection_ci", "total_ci"):
            if not isinstance(block.get(key), list) or len(block[key]) != 2:
                errs.append(f"savings.{arm}.{key}: expected [low, high]")
    return errs


def _arm_repeat(d: ComparisonData, arm: str) -> int:
    r = d.runs[d.runs["strategy"] == arm]["repeat"] if len(d.runs) else pd.Series(dtype=float)
    r = pd.to_numeric(r, errors="coerce").dropna()
    if len(r):
        return int(r.iloc[0])
    m = re.fullmatch(r".+\.r(\d+)", arm)
    return int(m.group(1)) if m else 0


NOT_READ = "the selection trials' per-epoch records and the comparison run's params were not read (tracking.budget_curve.load_budget_records)"


def _budget(a: Analysis, records: BudgetRecords | None) -> dict[str, Any]:
    """The verdict against the budget and the paper-budget projection (docs/report.md), from the selection
    trials' per-epoch records and the comparison run's params (`records`; None: not read, and said so)."""
    from .paper_projection import paper_budget_projection

    d = a.data
    if records is None:
        return {"budget_curve": {"arms": {}, "note": NOT_READ}, "budget_still_moving": None, "budget_verdict": f"No verdict against the budget: {NOT_READ}.",
                "paper_budget_projection": {"applicable": False, "reason": NOT_READ}}
    st = a.strategies.set_index("strategy") if len(a.strategies) else a.strategies
    dims = {s: st.loc[s, "grid_dims"] for s in st.index}
    curve = budget_curve(d, records, a.settings["baseline"], dims)
    moving, line, reasons = still_moving(curve)
    selected = {s: st.loc[s, "selected_config"] for s in st.index}
    return {"budget_curve": {**curve, "still_moving_reasons": reasons}, "budget_still_moving": moving, "budget_verdict": line,
            "paper_budget_projection": paper_budget_projection(d, records.root_params, selected)}


def summarize(a: Analysis, records: BudgetRecords | None = None) -> dict[str, Any]:
    """The machine-readable summary (summary.json; keys in docs/report.md).  `records`: what the verdict
    against the budget and the paper-budget projection read from MLflow (tracking.budget_curve.load_budget_records)."""
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
    sv = {r["strategy"]: savings_block(r) for _, r in a.savings.iterrows()}
    spread = {}
    for family, info in a.repeats_info.items():
        rows = a.repeats[a.repeats["family"] == family]
        spread[family] = {**info, **{r["metric"]: {"mean": r["mean"], "std": r["std"], "min": r["min"], "max": r["max"], "n": r["n"], "values": r["values"]}
                                     for _, r in rows.iterrows()}}
    out = {
        "schema": "awnn-report/1",
        "comparison": c["id"], "experiment": c["experiment"], "task": c["task"], "budget": c["budget"],
        "protocol": {"name": c.get("protocol", "holdout"), "folds": c.get("folds", 1), "train_seed": c.get("train_seed", 0)}, "state": c["state"],
        "baseline": a.settings["baseline"],
        "verdict": {},  # below: tracking/verdict.py, from the numbers of this summary
        "strategies": per,
        "device_hours": dev, "gpu_hours": gpu,
        "test_acc_mean": {s: per[s]["test_acc_mean"] for s in per}, "test_acc_std": {s: per[s]["test_acc_std"] for s in per},
        "savings": sv,
        "savings_notes": a.savings_notes,
        "arms": d.strategies,
        "families": d.families,
        "repeats": c.get("repeats", 1),
        "repeat_spread": spread,
        "search": c.get("search", {}),
        "overhead": a.overhead_summary,
        "target": {**a.target_info, "strategies": {r["strategy"]: {"order": r["order"], "reached": r["reached"], "hours_mean": r["hours_mean"], "hours_median": r["hours_median"], "grid_hours": r["grid_hours"]} for _, r in a.target.iterrows()}},
        "projection": {**a.projection_info, "rows": a.projection.to_dict("records")},
        **_budget(a, records),
        "wall_seconds": c["wall_seconds"],
        "problems": a.problems,
        "warnings": a.warnings,
        "truncation": a.truncation_info,
        "mlflow": comparison_links(d),
        "settings": a.settings,
        "execution": execution(d),
    }
    out = json_safe(out)
    out["verdict"] = json_safe(verdict(out))
    return out


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def headline_metrics(summary: dict[str, Any]) -> list[tuple[str, float]]:
    """The numbers of summary.json a reader of the MLflow runs table needs,
    as (metric name, value) for the comparison run (tracking.contract:
    ARM_HEADLINE and `savings_metric` per arm), rounded as the report shows
    them: per arm the selection and total device-hours (4 significant
    digits), the selected config's test accuracy as a fraction
    (`test_acc_mean`, `test_acc_std`: 4 decimals) and in % (`test_acc_pct`,
    `test_acc_std_pct`: 2 decimals, as the terminal and the report), its
    runs, its width (learned mean total, or chosen; 1 decimal), its
    selection trials, and its savings against the baseline
    (`<arm>.savings_vs_<baseline>`, `<arm>.total_savings_vs_<baseline>`,
    each with `_lo` / `_hi`: summary.json's `savings`, already rounded to
    3 significant digits); the verdict against the budget
    (`budget_curve.<arm>.f<share>.best_val_acc` / `.selection_device_hours` /
    `.savings_vs_<baseline>`, `budget_still_moving` 1 or 0) and the
    paper-budget projection (`paper_budget.<arm>.device_hours` /
    `.wall_hours`).  Values that are missing or not finite are left out
    (MLflow has no NaN-free None)."""
    from .contract import BUDGET_ARM, BUDGET_STILL_MOVING, PAPER_ARM, arm_metric, budget_metric, paper_metric, savings_metric

    out: list[tuple[str, float]] = []

    def put(name: str, value, how=None) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.append((name, float(how(value) if how else value)))

    hours, frac, pct = _sig, (lambda v: round(v, 4)), (lambda v: round(100 * v, 2))
    baseline = summary.get("baseline")
    for arm, s in summary.get("strategies", {}).items():
        dh = s.get("device_hours") or {}
        put(arm_metric(arm, "selection_device_hours"), dh.get("selection"), hours)
        put(arm_metric(arm, "total_device_hours"), dh.get("total"), hours)
        put(arm_metric(arm, "test_acc_mean"), s.get("test_acc_mean"), frac)
        put(arm_metric(arm, "test_acc_std"), s.get("test_acc_std"), frac)
        put(arm_metric(arm, "test_acc_pct"), s.get("test_acc_mean"), pct)
        put(arm_metric(arm, "test_acc_std_pct"), s.get("test_acc_std"), pct)
        put(arm_metric(arm, "test_runs"), s.get("test_runs"))
        put(arm_metric(arm, "width_total"), (s.get("width") or {}).get("total_mean"), lambda v: round(v, 1))
        put(arm_metric(arm, "trials"), (s.get("trials") or {}).get("selection"))
        sv = (summary.get("savings") or {}).get(arm) or {}
        for kind, key in (("savings", "selection"), ("total_savings", "total")):
            ci = sv.get(f"{key}_ci") or [None, None]
            for bound, value in (("", sv.get(key)), ("_lo", ci[0]), ("_hi", ci[1])):
                put(savings_metric(arm, baseline, kind, bound), value)
    for arm, t in (summary.get("truncation") or {}).items():  # post-hoc truncation: the largest cut within 1 point, in %
        put(arm_metric(arm, "truncation_cut_pct"), t.get("largest_cut_pct"))
    bc = summary.get("budget_curve") or {}
    for arm, rows in (bc.get("arms") or {}).items():  # the verdict against the budget (tracking/budget_curve.py)
        for r in rows:
            for name, how in zip(BUDGET_ARM, (frac, hours)):  # best_val_acc, selection_device_hours
                put(budget_metric(arm, r["fraction"], name), r.get(name), how)
    for arm, rows in (bc.get("savings") or {}).items():
        for r in rows:
            put(budget_metric(arm, r["fraction"], f"savings_vs_{bc.get('baseline')}"), r.get("value"))
    if isinstance(summary.get("budget_still_moving"), bool):
        put(BUDGET_STILL_MOVING, float(summary["budget_still_moving"]))
    for arm, row in ((summary.get("paper_budget_projection") or {}).get("arms") or {}).items():
        for name in PAPER_ARM:
            put(paper_metric(arm, name), row.get(name), hours)
    return out
