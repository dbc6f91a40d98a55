"""PROJECTION, not a measurement: what the `paper` budget would cost each arm
(device-hours and wall time), from this comparison's measured cost per
trial-epoch and the paper budget's sizes, so a user sees it before launching
it (summary.json `paper_budget_projection`; docs/report.md).

The driver records what the paper budget would run (comparison-run param
`paper_budget`, per family: selection `trials` (every fold's), `epochs` a
trial and `epochs_by_hidden_layers`, `retrain_runs` (R), `folds`,
`patience`) and the cluster it ran on (`cluster_cpus`, `cluster_gpus`), so
tracking/ need not import search/.

* Selection: a measured selection trial t that was given e_t epochs here
  (its config's `epochs`) and cost h_t would be given E(t) epochs (the
  paper's epochs for its hidden layers) and cost h_t x E(t) / e_t: the same
  cost per epoch, and the same share of its epochs trained (ASHA's stops,
  early stopping, divergence).  The arm's paper selection is the mean of
  these x the paper's selection trials.
* Re-training: R x folds runs x the mean over the arm's measured re-training
  runs of h / e (the selection trials' when it has none) x the selected
  config's paper epochs.
* An arm without a search of its own (fixedplus) has as selection the whole
  projected search of the arm it depends on.
* Wall time: device-hours / the devices the trials kept busy: the cluster's
  (floor(cluster devices / devices per trial) trials at a time), or, when
  the cluster size was not recorded, this comparison's measured concurrency
  (its device-hours / its wall-clock hours).
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .contract import Param
from .reader import ComparisonData

__all__ = ["paper_budget_projection", "paper_epochs"]


def paper_epochs(spec: dict[str, Any], hidden_layers: Any) -> float:
    """The paper budget's epochs for a config with `hidden_layers` (the grid's `epochs_by_hidden_layers`, else its `epochs`)."""
    by = spec.get("epochs_by_hidden_layers") or {}
    try:
        key = str(int(float(hidden_layers)))
    except (TypeError, ValueError):
        key = ""
    return float(by.get(key, spec.get("epochs", math.nan)))


def _per_given_epoch(r) -> float:
    """A trial's device-hours / the epochs it was given (config `epochs`, else epochs_run); NaN without either."""
    cfg = r["config"] if isinstance(r["config"], dict) else {}
    given = next((float(v) for v in (cfg.get("epochs"), r["epochs_run"]) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0), 0.0)
    h = float(r["device_hours"])
    return h / given if given > 0 and math.isfinite(h) else math.nan


def _rate(rows) -> float:
    """Measured device-hours per trial-epoch: sum of device-hours / sum of epochs_run (trials that ran an epoch)."""
    ok = rows[(rows["epochs_run"].astype(float) > 0) & np.isfinite(rows["device_hours"].astype(float))] if len(rows) else rows
    epochs = float(ok["epochs_run"].astype(float).sum()) if len(ok) else 0.0
    return float(ok["device_hours"].astype(float).sum()) / epochs if epochs > 0 else math.nan


def _devices(data: ComparisonData, params: dict[str, str]) -> tuple[float, str]:
    """(devices the trials keep busy at once, how that was found)."""
    c = data.comparison
    gpu = float(c.get("gpus_per_trial") or 0) > 0
    per = float(c["gpus_per_trial"] if gpu else c.get("cpus_per_trial") or 1.0)
    unit = "GPU" if gpu else "CPU core"
    try:
        cluster = float(params.get(Param.CLUSTER_GPUS if gpu else Param.CLUSTER_CPUS, "nan"))
    except ValueError:
        cluster = math.nan
    if math.isfinite(cluster) and cluster >= per > 0:
        slots = int(cluster // per)
        return slots * per, f"the {cluster:g} {unit}s this comparison's Ray cluster had, {slots} trials at a time ({per:g} {unit} each), every one kept busy"
    runs = data.runs
    total = float(runs["device_hours"].sum()) if len(runs) else 0.0
    wall_h = float(c.get("wall_seconds") or math.nan) / 3600.0
    if total > 0 and math.isfinite(wall_h) and wall_h > 0:
        return total / wall_h, (f"this comparison's measured concurrency ({total / wall_h:.3g} {unit}s busy on average: its device-hours / its "
                                "wall-clock; the cluster's size was not recorded)")
    return math.nan, "unknown: neither the cluster's size nor the comparison's wall-clock was recorded"


def paper_budget_projection(data: ComparisonData, params: dict[str, str], selected: dict[str, dict | None]) -> dict[str, Any]:
    """summary.json's `paper_budget_projection`: `applicable` (and `reason`), the
    `basis` of the wall time, per arm the paper's sizes, the measured cost per
    trial-epoch and the projected device-hours and wall hours, the `total`
    and `caveats`.  `selected`: arm -> its selected config (for its re-training epochs)."""
    try:
        spec = json.loads(params.get(Param.PAPER_BUDGET) or "null")
    except json.JSONDecodeError:
        spec = None
    if not isinstance(spec, dict) or not spec:
        return {"applicable": False, "reason": "the comparison run has no `paper_budget` param (comparisons recorded before it)"}
    devices, basis = _devices(data, params)
    t = data.trials()
    arms: dict[str, dict[str, Any]] = {}
    for arm in data.strategies:
        p = spec.get(data.family(arm))
        if not isinstance(p, dict):
            continue
        mine = t[t["strategy"] == arm] if len(t) else t
        sel = mine[mine["phase"] == "selection"] if len(mine) else mine
        ass = mine[mine["phase"] == "assessment"] if len(mine) else mine
        per_trial = [v for v in (_per_given_epoch(r) * paper_epochs(p, r["hidden_layers"]) for _, r in sel.iterrows()) if math.isfinite(v)]
        trials = int(p.get("trials") or 0)
        sel_h = float(np.mean(per_trial)) * trials if per_trial else math.nan
        cfg = selected.get(arm) or {}
        r_ass, ass_basis = [v for v in map(_per_given_epoch, (r for _, r in ass.iterrows())) if math.isfinite(v)], "its re-training runs"
        if not r_ass:
            r_ass = [v for v in map(_per_given_epoch, (r for _, r in sel.iterrows())) if math.isfinite(v)]
            ass_basis = "its selection trials (no re-training run measured)"
        runs = int(p.get("retrain_runs") or 0) * int(p.get("folds") or 1)
        ret_epochs = paper_epochs(p, cfg.get("hidden_layers"))
        r_ass = float(np.mean(r_ass)) if r_ass else math.nan
        arms[arm] = {
            "family": data.family(arm), "selection_trials": trials, "epochs": p.get("epochs"),
            "epochs_by_hidden_layers": p.get("epochs_by_hidden_layers") or {}, "retrain_runs": runs, "retrain_epochs": ret_epochs,
            "folds": int(p.get("folds") or 1), "patience": int(p.get("patience") or 0),
            "measured_trials": int(len(sel)), "selection_hours_per_epoch": _rate(sel), "retrain_hours_per_given_epoch": r_ass, "retrain_basis": ass_basis,
            "selection_device_hours": sel_h, "retrain_device_hours": runs * ret_epochs * r_ass if runs else 0.0, "depends_on": data.depends_on(arm),
        }
    for arm, row in arms.items():  # fixedplus: the search it depends on is its selection
        src = row["depends_on"]
        if src in arms and not row["measured_trials"]:
            row["selection_device_hours"] = arms[src]["selection_device_hours"] + arms[src]["retrain_device_hours"]
    for row in arms.values():
        row["device_hours"] = row["selection_device_hours"] + row["retrain_device_hours"]
        row["wall_hours"] = row["device_hours"] / devices if devices > 0 else math.nan
    # the comparison's total: a derived arm (fixedplus) adds only its re-training to the search it re-uses
    own = [r["retrain_device_hours"] if r["depends_on"] in arms and not r["measured_trials"] else r["device_hours"] for r in arms.values()]
    total = float(np.sum(own)) if own else math.nan
    caveats = ["each trial is assumed to train the same share of its epochs as here (ASHA's stops, early stopping and divergence kept as measured)"
               + ("; the paper's patience may stop trials at another share" if any(r["patience"] for r in arms.values()) else "")]
    if data.comparison.get("cpu"):
        caveats.append("the cost per epoch was measured with the CPU budget's smaller setup (" + "; ".join(
            f"{g}: {', '.join(f'{k}={v}' for k, v in vals.items())}" for g, vals in data.comparison["cpu"].items())
                       + "); the paper's setup costs more per epoch")
    caveats.append("the cost per epoch of AWNN depends on the widths it learns, which a longer run may change")
    return {"applicable": bool(arms), "reason": "" if arms else "no arm of the comparison has a paper-budget entry",
            "measured_budget": data.comparison.get("budget"), "devices": devices, "basis": basis, "arms": arms,
            "total": {"device_hours": total, "wall_hours": total / devices if devices > 0 else math.nan}, "caveats": caveats}
