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

import json
import math
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import contract as C
from .contract import PHASES, SELECTABLE, STATUSES, arm_family, redact_uri  # noqa: F401 - part of this module's API

__all__ = [
    "AnalysisError",
    "ComparisonData",
    "Analysis",
    "find_comparison",
    "load_comparison",
    "load_histories",
    "analyze",
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

REFERENCE = "awnn"  # the strategy every other one is measured against (the headline ratio)
REFERENCES = ("awnn", "fixed")  # savings are given against both: AWNN's grid and the full fixed-width grid
GRID_FAMILIES = ("fixed", "awnn")  # whole grids without a natural order: random orders for curves and cost to target
EARLY_STOPPING = ("asha",)  # families whose scheduler stops trials early on purpose (awnn.status=stopped)
SEARCH_PARAMS = ("seed", "repeats", "tpe_trials", "random_trials", "asha_grace_period", "asha_reduction_factor")
# params that identify a trial rather than a point of the grid
NON_GRID_PARAMS = {"trial_key", "phase", "grid_index", "seed", "split", "epochs", "patience", "data_seed"}


class AnalysisError(ValueError):
    """The store does not hold what was asked for (one readable line)."""


# ---------------------------------------------------------------- reading
@dataclass
class ComparisonData:
    """One comparison as MLflow holds it, in tables (see `load_comparison`)."""

    tracking_uri: str
    comparison: dict[str, Any]  # id, experiment, task, budget, state, strategies (the arms), families, family_of, repeats, cpus/gpus per trial, wall_seconds, ...
    sweeps: pd.DataFrame  # one row per sweep run (arm x phase)
    runs: pd.DataFrame  # one row per trial run (interrupted runs included)
    histories: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["run_id", "key", "step", "value"]))
    other_comparisons: list[dict[str, Any]] = field(default_factory=list)

    @property
    def strategies(self) -> list[str]:
        """The arms, in run order."""
        return list(self.comparison["strategies"])

    def family(self, arm: str) -> str:
        return self.comparison.get("family_of", {}).get(arm) or arm_family(arm)

    @property
    def families(self) -> dict[str, list[str]]:
        """family -> its arms, families in the order asked for."""
        out: dict[str, list[str]] = {f: [] for f in self.comparison.get("families", [])}
        for arm in self.strategies:
            out.setdefault(self.family(arm), []).append(arm)
        return {f: arms for f, arms in out.items() if arms}

    def trials(self) -> pd.DataFrame:
        """`runs` folded into trials (see `trials_from_runs`), computed once per `runs` table."""
        cached = getattr(self, "_trials", None)
        if cached is None or cached[0] is not self.runs:
            cached = (self.runs, trials_from_runs(self.runs))
            self._trials = cached
        return cached[1]


def _search_all(client, experiment_ids: list[str], filter_string: str, order_by: list[str] | None = None) -> list:
    out: list = []
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000, order_by=order_by, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return out


def _experiments(client, experiment: str | None) -> list:
    if experiment is not None:
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage == "deleted":
            names = sorted(e.name for e in client.search_experiments() if e.name.startswith("awnn-"))
            raise AnalysisError(f"--experiment {experiment}: no such experiment in the tracking store; found {names or 'none'}")
        return [exp]
    return [e for e in client.search_experiments()]


def find_comparison(tracking_uri: str, comparison: str | None = None, experiment: str | None = None) -> tuple[Any, list[Any]]:
    """The comparison run asked for (by id, else the newest in `experiment`,
    else the newest in the store) and the other comparisons found."""
    client = C.client(tracking_uri)
    exps = _experiments(client, experiment)
    if not exps:
        raise AnalysisError(f"the tracking store {redact_uri(tracking_uri)} holds no experiments")
    ids = [e.experiment_id for e in exps]
    flt = "tags.`awnn.kind` = 'comparison'"
    roots = _search_all(client, ids, flt, order_by=["attributes.start_time DESC"])
    roots.sort(key=lambda r: (-(r.info.start_time or 0), r.info.run_id))
    if comparison is not None:
        chosen = [r for r in roots if r.data.tags.get("awnn.comparison") == comparison]
        if not chosen:
            known = [r.data.tags.get("awnn.comparison") for r in roots[:5]]
            where = f"experiment {experiment}" if experiment else "the tracking store"
            raise AnalysisError(f"--comparison {comparison}: not found in {where}; newest comparisons there: {known or 'none'}")
        root = chosen[0]
    else:
        if not roots:
            where = f"experiment {experiment}" if experiment else f"the tracking store {redact_uri(tracking_uri)}"
            raise AnalysisError(f"{where} holds no comparison (runs tagged awnn.kind=comparison); run `awnn compare` first")
        root = roots[0]
    return root, [r for r in roots if r.info.run_id != root.info.run_id]


def load_comparison(tracking_uri: str, comparison: str | None = None, experiment: str | None = None, history_keys: Iterable[str] = ("width_total",), max_points: int = 1000) -> ComparisonData:
    """Read one comparison: its root run, sweep runs and trial runs (final
    values through one search), plus the per-epoch histories of
    `history_keys` for the runs of AWNN models (for the width plots)."""
    client = C.client(tracking_uri)
    root, others = find_comparison(tracking_uri, comparison, experiment)
    cid = root.data.tags.get("awnn.comparison")
    exp = client.get_experiment(root.info.experiment_id)
    runs = _search_all(client, [root.info.experiment_id], f"tags.`awnn.comparison` = '{cid}'")
    tags, params, metrics = root.data.tags, root.data.params, root.data.metrics
    families = [s for s in (tags.get("awnn.strategies") or params.get("strategies") or "").split(",") if s]
    # arms in run order (older comparisons have no awnn.arms: one arm per strategy, named after it)
    strategies = [s for s in (tags.get("awnn.arms") or "").split(",") if s] or list(families)
    family_of = {s: arm_family(s) for s in strategies}
    for r in runs:  # the runs' own tags win: awnn.strategy is the family
        arm = _arm(r.data.tags)
        if arm:
            family_of[arm] = r.data.tags.get("awnn.strategy") or family_of.get(arm) or arm_family(arm)
    strategies += sorted(s for s in family_of if s not in strategies)
    families += [f for f in dict.fromkeys(family_of[s] for s in strategies) if f not in families]
    try:
        budget = json.loads(params.get("budget", "{}"))
    except json.JSONDecodeError:
        budget = {"name": params.get("budget")}
    info = {
        "id": cid,
        "run_id": root.info.run_id,
        "experiment": exp.name,
        "experiment_id": root.info.experiment_id,
        "task": tags.get("awnn.task") or params.get("task"),
        "budget": tags.get("awnn.budget") or budget.get("name"),
        "budget_params": budget,
        "state": tags.get("awnn.state", "unknown"),
        "run_status": root.info.status,
        "strategies": strategies,
        "families": families,
        "family_of": family_of,
        "repeats": int(_num(tags.get("awnn.repeats") or params.get("repeats"), 1.0)),
        "search": {k: C.parse_param(params[k]) for k in SEARCH_PARAMS if k in params},
        "command": tags.get("awnn.command", ""),
        "cpus_per_trial": _num(params.get("cpus_per_trial"), 1.0),
        "gpus_per_trial": _num(params.get("gpus_per_trial"), 0.0),
        "wall_seconds": metrics.get("wall_seconds", math.nan),
        "start_time": root.info.start_time,
        "end_time": root.info.end_time,
    }
    sweeps = _sweep_frame([r for r in runs if r.data.tags.get("awnn.kind") == "sweep"], strategies)
    trial_runs = _run_frame([r for r in runs if r.data.tags.get("awnn.kind") == "trial"], strategies, info)
    data = ComparisonData(tracking_uri, info, sweeps, trial_runs,
                          other_comparisons=[{"id": r.data.tags.get("awnn.comparison"), "state": r.data.tags.get("awnn.state"), "start_time": r.info.start_time} for r in others])
    keys = list(history_keys)
    if keys and len(trial_runs):
        adaptive = trial_runs.loc[trial_runs["model"] == "awnn", "run_id"].tolist()
        data.histories = load_histories(tracking_uri, adaptive, keys, max_points=max_points)
    return data


def _arm(tags: dict[str, str]) -> str:
    """A run's arm; runs written before arms existed: their strategy."""
    return tags.get("awnn.arm") or tags.get("awnn.strategy", "")


def _num(v: Any, default: float = math.nan) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return default
    return x


def _json(v: str | None) -> Any:
    if not v:
        return None
    try:
        return json.loads(v)
    except (TypeError, json.JSONDecodeError):
        return None


def _order(strategies: list[str]) -> dict[str, int]:
    return {s: i for i, s in enumerate(strategies)}


def _sweep_frame(runs: list, strategies: list[str]) -> pd.DataFrame:
    rows = []
    for r in runs:
        t, p, m = r.data.tags, r.data.params, r.data.metrics
        rows.append({
            "strategy": _arm(t), "family": t.get("awnn.strategy") or arm_family(_arm(t)), "repeat": int(_num(t.get("awnn.repeat"), 0.0)),
            "phase": t.get("awnn.phase", ""), "run_id": r.info.run_id,
            "state": t.get("awnn.state", "unknown"), "trials_declared": _num(p.get("trials")), "configs_declared": _num(p.get("configs")),
            "epochs": _num(p.get("epochs")), "retrain_runs": _num(p.get("retrain_runs")), "grid_file": p.get("grid_file", ""),
            "grid_digest": p.get("grid_digest", ""), "selected_key": t.get("awnn.selected_key") or p.get("selected_key"),
            "selected_config": _json(t.get("awnn.selected_config")),
            "wall_seconds": m.get("wall_seconds", math.nan), "device_hours": m.get("device_hours", math.nan),
            "start_time": r.info.start_time, "end_time": r.info.end_time,
        })
    cols = ["strategy", "family", "repeat", "phase", "run_id", "state", "trials_declared", "configs_declared", "epochs", "retrain_runs", "grid_file",
            "grid_digest", "selected_key", "selected_config", "wall_seconds", "device_hours", "start_time", "end_time"]
    df = pd.DataFrame(rows, columns=cols)
    order = _order(strategies)
    if len(df):
        df = df.assign(_s=df["strategy"].map(lambda s: order.get(s, 99)), _p=df["phase"].map(lambda p: PHASES.index(p) if p in PHASES else 9))
        df = df.sort_values(["_s", "_p", "start_time", "run_id"]).drop(columns=["_s", "_p"]).reset_index(drop=True)
    return df


RUN_COLUMNS = [
    "run_id", "strategy", "phase", "trial_key", "status", "run_status", "model", "hidden_layers", "width", "batch_size", "split",
    "seed", "grid_index", "device_hours", "gpu_hours", "compute_seconds", "train_seconds", "epochs_run", "best_val_acc",
    "best_val_loss", "best_epoch", "test_acc", "final_width_total", "widths", "widths_at_best", "n_train", "attempts", "retries",
    "cost_estimated", "error", "start_time", "end_time", "config", "family", "repeat",
]


def _run_frame(runs: list, strategies: list[str], info: dict) -> pd.DataFrame:
    per = info["gpus_per_trial"] if info["gpus_per_trial"] > 0 else info["cpus_per_trial"]
    rows = []
    for r in runs:
        t, p, m = r.data.tags, r.data.params, r.data.metrics
        status = t.get("awnn.status", "running")
        config = {k: C.parse_param(v) for k, v in p.items() if k not in ("trial_key", "phase", "grid_index")}
        estimated = "device_hours" not in m
        if estimated:  # no final metrics: open run, or one a dead driver left (see module docstring)
            seconds = m.get("train_seconds", 0.0)
            dev_h, gpu_h, compute = seconds * per / 3600.0, seconds * info["gpus_per_trial"] / 3600.0, seconds
        else:
            dev_h, gpu_h, compute = m["device_hours"], m.get("gpu_hours", 0.0), m.get("compute_seconds", math.nan)
        widths = _json(t.get("awnn.widths"))
        rows.append({
            "run_id": r.info.run_id, "strategy": _arm(t), "family": t.get("awnn.strategy") or arm_family(_arm(t)),
            "repeat": int(_num(t.get("awnn.repeat"), 0.0)), "phase": t.get("awnn.phase") or p.get("phase", ""),
            "trial_key": t.get("awnn.trial_key") or p.get("trial_key", ""), "status": status, "run_status": r.info.status,
            "model": p.get("model", ""), "hidden_layers": _num(p.get("hidden_layers")), "width": _num(p.get("width")),
            "batch_size": _num(p.get("batch_size")), "split": p.get("split", ""), "seed": _num(p.get("seed")),
            "grid_index": _num(p.get("grid_index")), "device_hours": float(dev_h), "gpu_hours": float(gpu_h),
            "compute_seconds": float(compute), "train_seconds": m.get("train_seconds", math.nan),
            "epochs_run": m.get("epochs_run", math.nan), "best_val_acc": m.get("best_val_acc", math.nan),
            "best_val_loss": m.get("best_val_loss", math.nan), "best_epoch": m.get("best_epoch", math.nan),
            "test_acc": m.get("test_acc", math.nan),
            "final_width_total": m.get("final_width_total", float(sum(widths)) if widths else math.nan),
            "widths": widths, "widths_at_best": _json(t.get("awnn.widths_at_best")),
            "n_train": m.get("n_train", _num(p.get("n_train"))), "attempts": m.get("attempts", math.nan),
            "retries": m.get("retries", math.nan), "cost_estimated": bool(estimated), "error": t.get("awnn.error") or t.get("awnn.last_error") or "",
            "start_time": r.info.start_time or 0, "end_time": r.info.end_time, "config": config,
        })
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    if len(df):
        order = _order(strategies)
        df = df.assign(_s=df["strategy"].map(lambda s: order.get(s, 99)), _p=df["phase"].map(lambda p: PHASES.index(p) if p in PHASES else 9))
        df = df.sort_values(["_s", "_p", "trial_key", "start_time", "run_id"]).drop(columns=["_s", "_p"]).reset_index(drop=True)
    return df


def trials_from_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (strategy, phase, trial key): the values of its last
    non-interrupted run, the summed cost of all its runs, and `runs` /
    `interrupted_runs` counts.  A trial with only interrupted runs keeps the
    status `interrupted`.  Rows keep the order of the runs."""
    if not len(runs):
        return runs.assign(runs=pd.Series(dtype=int), interrupted_runs=pd.Series(dtype=int))
    keys = ["strategy", "phase", "trial_key"]
    r = runs.assign(_live=runs["status"] != "interrupted", _pos=np.arange(len(runs)))
    # the representative: the last live run of each trial (live rows sort after interrupted ones)
    rep = r.sort_values(["_live", "_pos"], kind="stable").groupby(keys, sort=False).tail(1)
    agg = r.groupby(keys, sort=False).agg(
        device_hours=("device_hours", "sum"), gpu_hours=("gpu_hours", "sum"), compute_seconds=("compute_seconds", "sum"),
        cost_estimated=("cost_estimated", "any"), runs=("run_id", "size"), interrupted_runs=("_live", lambda x: int((~x).sum())),
        _first=("_pos", "min"),
    ).reset_index()
    out = rep.drop(columns=["device_hours", "gpu_hours", "compute_seconds", "cost_estimated", "_live", "_pos"]).merge(agg, on=keys)
    out = out.sort_values("_first", kind="stable").drop(columns="_first").reset_index(drop=True)
    out["cost_estimated"] = out["cost_estimated"].astype(bool)
    return out[[*runs.columns, "runs", "interrupted_runs"]]


# -------------------------------------------------------------- histories
def load_histories(tracking_uri: str, run_ids: list[str], keys: Iterable[str], max_points: int = 1000) -> pd.DataFrame:
    """Per-epoch values of `keys` for `run_ids`, at most `max_points` per run
    (evenly spaced, first and last kept), as a long table run_id, key, step, value.

    Reading histories one run at a time (MlflowClient.get_metric_history) costs
    one query or HTTP call per run and key; instead this uses MLflow's bulk
    interval read: on a database store one query per 100 runs
    (SqlAlchemyStore.get_metric_history_bulk_interval), on a tracking server
    its `metrics/get-history-bulk-interval` endpoint (100 runs per call).  Any
    other store falls back to per-run reads on a few threads."""
    cols = ["run_id", "key", "step", "value"]
    run_ids = sorted(set(run_ids))
    if not run_ids:
        return pd.DataFrame(columns=cols)
    client = C.client(tracking_uri)
    store = client._tracking_client.store
    max_points = int(max(1, min(max_points, 2500)))
    rows: list[tuple] = []
    chunks = [run_ids[i : i + 100] for i in range(0, len(run_ids), 100)]
    kind = type(store).__name__
    for key in keys:
        if kind == "SqlAlchemyStore":
            for chunk in chunks:
                for mr in store.get_metric_history_bulk_interval(chunk, key, max_points, None, None):
                    rows.append((mr.run_id, key, int(mr.step), float(mr.value)))
        elif kind == "RestStore":
            rows.extend(_rest_bulk(store, chunks, key, max_points))
        else:  # pragma: no cover - file stores and plug-ins
            def one(rid: str, key: str = key) -> list[tuple]:
                return [(rid, key, int(m.step), float(m.value)) for m in client.get_metric_history(rid, key)]

            with ThreadPoolExecutor(max_workers=8) as pool:
                for part in pool.map(one, run_ids):
                    rows.extend(part)
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["key", "run_id", "step"]).reset_index(drop=True)


def _rest_bulk(store, chunks: list[list[str]], key: str, max_points: int) -> list[tuple]:
    from mlflow.utils.rest_utils import http_request

    rows = []
    for chunk in chunks:
        params = [("run_ids", rid) for rid in chunk] + [("metric_key", key), ("max_results", str(max_points))]
        resp = http_request(store.get_host_creds(), "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval", "GET", params=params)
        if resp.status_code != 200:
            raise AnalysisError(f"the MLflow server answered {resp.status_code} to a metric-history read: {resp.text[:200]}")
        for m in resp.json().get("metrics", []):
            rows.append((m["run_id"], key, int(m.get("step", 0)), float(m["value"])))
    return rows


# ------------------------------------------------------------- the tables
def _selectable(df: pd.DataFrame, score: str) -> pd.Series:
    return df["status"].isin(SELECTABLE) & np.isfinite(pd.to_numeric(df[score], errors="coerce").astype(float))


def cost_table(data: ComparisonData) -> pd.DataFrame:
    """Per arm and phase: configs, trials by status, runs, device-hours,
    GPU-hours, compute and sweep wall-clock (plus a `total` row per arm).
    Trials ASHA stopped early are counted (`stopped`) and their partial
    device-hours are in every total."""
    trials = data.trials()
    rows = []
    for s in data.strategies:
        parts = []
        for ph in PHASES:
            t = trials[(trials["strategy"] == s) & (trials["phase"] == ph)] if len(trials) else trials
            r = data.runs[(data.runs["strategy"] == s) & (data.runs["phase"] == ph)] if len(data.runs) else data.runs
            sw = data.sweeps[(data.sweeps["strategy"] == s) & (data.sweeps["phase"] == ph)]
            if not len(t) and not len(sw):
                continue
            counts = {st: int((t["status"] == st).sum()) for st in STATUSES}
            row = {
                "strategy": s, "family": data.family(s), "phase": ph,
                "configs": _configs(data, s, t) if ph == "selection" else (1 if len(t) else 0),
                "trials": int(len(t)), "trials_declared": float(sw["trials_declared"].iloc[0]) if len(sw) else math.nan,
                "runs": int(len(r)), **counts, "interrupted_runs": int((r["status"] == "interrupted").sum()) if len(r) else 0,
                "device_hours": float(r["device_hours"].sum()) if len(r) else 0.0,
                "gpu_hours": float(r["gpu_hours"].sum()) if len(r) else 0.0,
                "compute_seconds": float(r["compute_seconds"].sum()) if len(r) else 0.0,
                "estimated_runs": int(r["cost_estimated"].sum()) if len(r) else 0,
                "wall_seconds": float(sw["wall_seconds"].iloc[0]) if len(sw) else math.nan,
                "sweep_state": sw["state"].iloc[0] if len(sw) else "missing",
            }
            rows.append(row)
            parts.append(row)
        if parts:
            tot = {"strategy": s, "family": data.family(s), "phase": "total"}
            for k in parts[0]:
                if k in ("strategy", "family", "phase", "sweep_state"):
                    continue
                vals = [p[k] for p in parts]
                tot[k] = float(np.nansum(vals)) if all(isinstance(v, float) for v in vals) else sum(vals)
            tot["configs"] = parts[0]["configs"] if parts[0]["phase"] == "selection" else 0
            tot["sweep_state"] = "finished" if all(p["sweep_state"] == "finished" for p in parts) else "incomplete"
            rows.append(tot)
    return pd.DataFrame(rows)


def _configs(data: ComparisonData, arm: str, sel: pd.DataFrame) -> int:
    """Distinct configs among an arm's selection trials: one per trial, but
    TPE may suggest a config twice (two trials, one config: its grid_index)."""
    if data.family(arm) == "tpe" and len(sel):
        idx = pd.to_numeric(sel["grid_index"], errors="coerce")
        if idx.notna().all():
            return int(idx.nunique())
    return int(len(sel))


def _grid_dims(sel: pd.DataFrame) -> dict[str, list]:
    """The config keys that vary across a strategy's selection trials, with their values."""
    if not len(sel):
        return {}
    configs = pd.DataFrame(list(sel["config"]))
    dims = {}
    for col in configs.columns:
        if col in NON_GRID_PARAMS:
            continue
        vals = configs[col].dropna().unique().tolist()
        if len(vals) > 1:
            dims[col] = sorted(vals, key=lambda v: (str(type(v)), v))
    return dims


def strategy_table(data: ComparisonData) -> pd.DataFrame:
    """Per strategy: the selected config, its inner-validation score and the
    test accuracy mean / sample std (ddof=1) over the re-training runs."""
    trials = data.trials()
    rows = []
    for s in data.strategies:
        sel = trials[(trials["strategy"] == s) & (trials["phase"] == "selection")] if len(trials) else trials
        ass = trials[(trials["strategy"] == s) & (trials["phase"] == "assessment")] if len(trials) else trials
        sw = data.sweeps[(data.sweeps["strategy"] == s) & (data.sweeps["phase"] == "selection")]
        key = sw["selected_key"].iloc[0] if len(sw) else None
        cfg = sw["selected_config"].iloc[0] if len(sw) else None
        chosen = sel[sel["trial_key"] == key] if key else sel.iloc[0:0]
        ok = ass[_selectable(ass, "test_acc")] if len(ass) else ass
        accs = ok["test_acc"].astype(float).to_numpy() if len(ok) else np.array([])
        dims = _grid_dims(sel)
        rows.append({
            "strategy": s,
            "family": data.family(s),
            "selected_key": key,
            "selected_config": cfg,
            "selected_summary": _config_summary(cfg, dims) if cfg else "none selected",
            "selected_val_acc": float(chosen["best_val_acc"].iloc[0]) if len(chosen) else math.nan,
            "best_val_acc": float(sel.loc[_selectable(sel, "best_val_acc"), "best_val_acc"].max()) if len(sel) and _selectable(sel, "best_val_acc").any() else math.nan,
            "test_acc_mean": float(accs.mean()) if len(accs) else math.nan,
            "test_acc_std": float(accs.std(ddof=1)) if len(accs) > 1 else (0.0 if len(accs) else math.nan),
            "test_runs": int(len(accs)),
            "retrain_runs": int(len(ass)),
            "grid_dims": dims,
        })
    return pd.DataFrame(rows)


def _config_summary(cfg: dict, dims: dict[str, list]) -> str:
    keys = ["model", "hidden_layers"] + (["width"] if cfg.get("model") != "awnn" else []) + [k for k in dims if k not in ("model", "hidden_layers", "width")]
    return ", ".join(f"{k}={cfg[k]}" for k in keys if k in cfg)


def width_table(data: ComparisonData) -> pd.DataFrame:
    """Table 1 of the paper: per strategy, the width of the selected config
    (fixed: chosen by the grid; AWNN: learned, as mean and std over the
    re-training runs of the widths at the selected epoch), per layer and total."""
    trials = data.trials()
    st = strategy_table(data)
    rows = []
    for _, s in st.iterrows():
        cfg = s["selected_config"]
        if not cfg:
            rows.append({"strategy": s["strategy"], "kind": "none", "layers": math.nan, "per_layer": "", "total_mean": math.nan, "total_std": math.nan, "n": 0})
            continue
        layers = int(cfg.get("hidden_layers", 1))
        if cfg.get("model") == "awnn":
            ass = trials[(trials["strategy"] == s["strategy"]) & (trials["phase"] == "assessment")]
            ws = [w for w in ass.loc[ass["status"].isin(SELECTABLE), "widths_at_best"] if isinstance(w, list) and w]
            kind = "learned (re-training runs, at the selected epoch)"
            if not ws:  # no re-training run finished: the selected selection trial's width
                sel = trials[(trials["strategy"] == s["strategy"]) & (trials["trial_key"] == s["selected_key"])]
                ws = [w for w in sel["widths_at_best"] if isinstance(w, list) and w]
                kind = "learned (selection trial)"
            if not ws:
                rows.append({"strategy": s["strategy"], "kind": "learned (not recorded)", "layers": layers, "per_layer": "", "total_mean": math.nan, "total_std": math.nan, "n": 0})
                continue
            arr = np.array([w + [np.nan] * (max(map(len, ws)) - len(w)) for w in ws], dtype=float)
            with warnings.catch_warnings():  # a layer only some runs have: its std is NaN, said as n/a
                warnings.simplefilter("ignore", RuntimeWarning)
                per_mean, tot = np.nanmean(arr, axis=0), np.nansum(arr, axis=1)
                per_std = np.nanstd(arr, axis=0, ddof=1) if len(arr) > 1 else np.zeros(arr.shape[1])
            rows.append({"strategy": s["strategy"], "kind": kind, "layers": arr.shape[1],
                         "per_layer": ", ".join(f"{m:.1f} ({sd:.1f})" for m, sd in zip(per_mean, per_std)),
                         "per_layer_mean": per_mean.tolist(), "per_layer_std": per_std.tolist(),
                         "total_mean": float(tot.mean()), "total_std": float(tot.std(ddof=1)) if len(tot) > 1 else 0.0, "n": len(ws)})
        else:
            w = float(cfg.get("width", math.nan))
            rows.append({"strategy": s["strategy"], "kind": "chosen by the grid", "layers": layers, "per_layer": ", ".join([f"{w:g}"] * layers),
                         "per_layer_mean": [w] * layers, "per_layer_std": [0.0] * layers,
                         "total_mean": w * layers, "total_std": 0.0, "n": 1})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- savings
def _phase_costs(runs: pd.DataFrame, strategy: str, phase: str) -> np.ndarray:
    """Per-trial device-hours (a trial's runs summed) of one strategy and phase."""
    r = runs[(runs["strategy"] == strategy) & (runs["phase"] == phase)]
    if not len(r):
        return np.zeros(0)
    return r.groupby("trial_key", sort=True)["device_hours"].sum().to_numpy(dtype=float)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


SAVINGS_COLUMNS = ["strategy", "family", "reference", "selection_hours", "reference_selection_hours", "selection_trials", "reference_selection_trials",
                   "selection_ratio", "selection_lo", "selection_hi", "total_hours", "reference_total_hours", "total_trials", "reference_total_trials",
                   "total_ratio", "total_lo", "total_hi", "n_boot", "level"]


def savings(data: ComparisonData, references: Iterable[str] = REFERENCES, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per reference present in the comparison (`awnn`, then `fixed`) and per
    other arm: selection and total (selection + re-training) device-hours,
    the ratio to the reference's, and percentile bootstrap intervals (module
    docstring).  The first reference draws from `default_rng(seed)`, the
    k-th (k >= 1) from `default_rng([seed, k])`, so adding a reference leaves
    the intervals against the first unchanged.  A reference missing from the
    comparison gives no rows (`savings_notes` says so)."""
    rows = []
    alpha = (1 - level) / 2
    for k, reference in enumerate(dict.fromkeys(references)):
        if reference not in data.strategies:
            continue
        rng = np.random.default_rng(seed if k == 0 else [seed, k])
        ref = {ph: _phase_costs(data.runs, reference, ph) for ph in PHASES}

        def boot(costs: np.ndarray) -> np.ndarray:
            if len(costs) == 0:
                return np.zeros(n_boot)
            idx = rng.integers(0, len(costs), size=(n_boot, len(costs)))
            return costs[idx].sum(axis=1)

        def ci(x: np.ndarray) -> tuple[float, float]:
            x = x[np.isfinite(x)]
            if not len(x):
                return math.nan, math.nan
            return float(np.quantile(x, alpha)), float(np.quantile(x, 1 - alpha))

        ref_sel, ref_ass = boot(ref["selection"]), boot(ref["assessment"])
        for s in data.strategies:
            if s == reference:
                continue
            mine = {ph: _phase_costs(data.runs, s, ph) for ph in PHASES}
            sel, ass = boot(mine["selection"]), boot(mine["assessment"])
            with np.errstate(divide="ignore", invalid="ignore"):
                r_sel = np.where(ref_sel > 0, sel / ref_sel, np.nan)
                r_tot = np.where(ref_sel + ref_ass > 0, (sel + ass) / (ref_sel + ref_ass), np.nan)
            lo_s, hi_s = ci(r_sel)
            lo_t, hi_t = ci(r_tot)
            rows.append({
                "strategy": s, "family": data.family(s), "reference": reference,
                "selection_hours": float(mine["selection"].sum()), "reference_selection_hours": float(ref["selection"].sum()),
                "selection_trials": len(mine["selection"]), "reference_selection_trials": len(ref["selection"]),
                "selection_ratio": _ratio(mine["selection"].sum(), ref["selection"].sum()), "selection_lo": lo_s, "selection_hi": hi_s,
                "total_hours": float(mine["selection"].sum() + mine["assessment"].sum()),
                "reference_total_hours": float(ref["selection"].sum() + ref["assessment"].sum()),
                "total_trials": len(mine["selection"]) + len(mine["assessment"]), "reference_total_trials": len(ref["selection"]) + len(ref["assessment"]),
                "total_ratio": _ratio(mine["selection"].sum() + mine["assessment"].sum(), ref["selection"].sum() + ref["assessment"].sum()),
                "total_lo": lo_t, "total_hi": hi_t, "n_boot": n_boot, "level": level,
            })
    return pd.DataFrame(rows, columns=SAVINGS_COLUMNS)


def savings_notes(data: ComparisonData, references: Iterable[str] = REFERENCES) -> list[str]:
    """One line per reference the comparison lacks (its savings rows are absent)."""
    what = {"awnn": "the AWNN grid", "fixed": "the full fixed-width grid"}
    out = []
    for reference in dict.fromkeys(references):
        if reference not in data.strategies:
            out.append(f"No savings against `{reference}` ({what.get(reference, reference)}): the comparison did not run it "
                       f"(strategies: {', '.join(data.strategies) or 'none'}).")
        elif len(data.strategies) < 2:
            out.append(f"No savings against `{reference}`: the comparison has no other strategy.")
    return out


# --------------------------------------------------------------- overhead
def overhead(data: ComparisonData) -> tuple[pd.DataFrame, dict[str, Any]]:
    """AWNN's cost per training sample per epoch relative to fixed-width
    trials of similar width, measured on the comparison's own runs.

    A run's cost per epoch is `train_seconds x allocated devices / epochs_run`
    (training time only: evaluation and lost attempts are excluded), divided
    by the training samples per epoch when the run records `n_train`.  Each
    AWNN run (model=awnn, status ok or width_capped) is matched with the
    fixed runs on the same split with the same hidden layers and batch size
    whose width is closest (in log scale) to the AWNN run's mean learned
    width per layer over its epochs; when the comparison has none with the
    same batch size (or hidden layers), that condition is dropped and the
    match says so.  The ratio of the two costs is the overhead."""
    per = data.comparison["gpus_per_trial"] if data.comparison["gpus_per_trial"] > 0 else data.comparison["cpus_per_trial"]
    runs = data.runs
    cols = ["strategy", "phase", "trial_key", "run_id", "hidden_layers", "batch_size", "mean_width", "cost", "fixed_width", "fixed_cost", "fixed_runs", "match", "ratio"]
    ok = runs[runs["status"].isin(SELECTABLE) & (runs["epochs_run"] > 0) & np.isfinite(runs["train_seconds"].astype(float))] if len(runs) else runs
    if not len(ok):
        return pd.DataFrame(columns=cols), {"unit": "device-seconds per epoch", "n": 0}
    ok = ok.copy()
    per_sample = bool(np.isfinite(ok["n_train"].astype(float)).all() and (ok["n_train"] > 0).all())
    denom = ok["n_train"].astype(float) if per_sample else 1.0
    ok["cost"] = ok["train_seconds"].astype(float) * per / ok["epochs_run"].astype(float) / denom
    unit = "device-seconds per sample per epoch" if per_sample else "device-seconds per epoch"
    adaptive = ok[ok["model"] == "awnn"]
    fixed = ok[ok["model"] != "awnn"].copy()
    fixed["total_width"] = fixed["width"] * fixed["hidden_layers"]
    hist = data.histories
    wt = hist[hist["key"] == "width_total"].groupby("run_id")["value"].mean() if len(hist) else pd.Series(dtype=float)
    rows = []
    for _, a in adaptive.iterrows():
        layers = a["hidden_layers"] if np.isfinite(a["hidden_layers"]) else 1.0
        total = wt.get(a["run_id"], a["final_width_total"])
        mean_w = float(total) / layers if np.isfinite(total) else math.nan
        row = {c: a.get(c) for c in ("strategy", "phase", "trial_key", "run_id", "hidden_layers", "batch_size")}
        row.update({"mean_width": mean_w, "cost": float(a["cost"]), "fixed_width": math.nan, "fixed_cost": math.nan, "fixed_runs": 0, "match": "no fixed runs", "ratio": math.nan})
        pool = fixed[fixed["split"] == a["split"]]
        if not len(pool) or not np.isfinite(mean_w):
            rows.append(row)
            continue
        cands = [("same split, layers and batch size", pool[(pool["hidden_layers"] == a["hidden_layers"]) & (pool["batch_size"] == a["batch_size"])]),
                 ("same split and layers; other batch size", pool[pool["hidden_layers"] == a["hidden_layers"]]),
                 ("same split; other layers (matched on total width)", pool)]
        for label, c in cands:
            if len(c):
                break
        by_total = label.startswith("same split; other layers")
        target = mean_w * layers if by_total else mean_w
        widths = c["total_width"] if by_total else c["width"]
        dist = (np.log(widths.astype(float).clip(lower=1)) - math.log(max(target, 1.0))).abs()
        nearest = c[dist == dist.min()]
        row.update({"fixed_width": float((nearest["total_width"] if by_total else nearest["width"]).iloc[0]),
                    "fixed_cost": float(nearest["cost"].mean()), "fixed_runs": int(len(nearest)), "match": label})
        row["ratio"] = row["cost"] / row["fixed_cost"] if row["fixed_cost"] > 0 else math.nan
        rows.append(row)
    table = pd.DataFrame(rows, columns=cols)
    ratios = table["ratio"].astype(float)
    ratios = ratios[np.isfinite(ratios)]
    summary = {
        "unit": unit,
        "n": int(len(ratios)),
        "ratio_median": float(ratios.median()) if len(ratios) else math.nan,
        "ratio_q25": float(ratios.quantile(0.25)) if len(ratios) else math.nan,
        "ratio_q75": float(ratios.quantile(0.75)) if len(ratios) else math.nan,
        "awnn_cost_median": float(table.loc[np.isfinite(table["ratio"].astype(float)), "cost"].median()) if len(ratios) else math.nan,
        "fixed_cost_median": float(table.loc[np.isfinite(table["ratio"].astype(float)), "fixed_cost"].median()) if len(ratios) else math.nan,
        "allocated_devices_per_trial": per,
    }
    return table, summary


# ------------------------------------------------------- any-time curves
def _orders(n: int, n_orders: int, rng: np.random.Generator) -> np.ndarray:
    return np.argsort(rng.random((n_orders, n)), axis=1)


def _selection_points(data: ComparisonData, strategy: str, actual_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per selection trial of an arm: device-hours (all its runs) and
    inner-validation score (NaN when it cannot be selected: diverged,
    failed, stopped early, ...).  With `actual_order`, in the order the
    trials ran (run end time; trials still open last)."""
    t = data.trials()
    t = t[(t["strategy"] == strategy) & (t["phase"] == "selection")] if len(t) else t
    if not len(t):
        return np.zeros(0), np.zeros(0)
    if actual_order:
        end = pd.to_numeric(t["end_time"], errors="coerce").fillna(np.inf)
        t = t.assign(_end=end).sort_values(["_end", "start_time", "trial_key"], kind="stable")
    score = np.where(_selectable(t, "best_val_acc"), t["best_val_acc"].astype(float), np.nan)
    return t["device_hours"].to_numpy(dtype=float), score


def ordering(data: ComparisonData, strategy: str) -> str:
    """`random` for the arms of a grid (fixed, awnn: no natural order),
    `actual` for the others (tpe, asha, random: the order their trials ran)."""
    return "random" if data.family(strategy) in GRID_FAMILIES else "actual"


ANYTIME_COLUMNS = ["strategy", "family", "order", "device_hours", "mean", "q10", "q90", "orders_scored", "full_grid"]


def anytime(data: ComparisonData, n_orders: int = 500, points: int = 200, seed: int = 0) -> pd.DataFrame:
    """Best inner-validation accuracy found after x device-hours.

    Grid arms (fixed, awnn): mean and 10%/90% quantiles over `n_orders`
    random orders of the arm's selection trials; NaN where some order has
    not yet found a scored trial; x runs over `points` geometrically spaced
    budgets from the cheapest trial to the whole grid (costs span orders of
    magnitude).  Other arms (tpe, asha, random): the order the trials ran,
    one point per trial at its cumulative device-hours (mean = q10 = q90;
    NaN until a scored trial ended).  Stopped, diverged and failed trials
    add their cost and find nothing."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in data.strategies:
        order_kind = ordering(data, s)
        cost, score = _selection_points(data, s, actual_order=order_kind == "actual")
        if not len(cost):
            continue
        total = float(cost.sum())
        base = {"strategy": s, "family": data.family(s), "order": order_kind}
        if order_kind == "actual":
            cum = np.cumsum(cost)
            best = np.fmax.accumulate(np.where(np.isnan(score), -np.inf, score))
            for i, (x, b) in enumerate(zip(cum, best)):
                done = bool(np.isfinite(b))
                rows.append({**base, "device_hours": float(x), "mean": float(b) if done else math.nan, "q10": float(b) if done else math.nan,
                             "q90": float(b) if done else math.nan, "orders_scored": float(done), "full_grid": i == len(cum) - 1})
            continue
        positive = cost[cost > 0]
        xs = np.unique(np.append(np.geomspace(positive.min(), total, points), total)) if total > 0 else np.zeros(1)
        order = _orders(len(cost), n_orders, rng)
        cum = np.cumsum(cost[order], axis=1)  # (orders, trials)
        best = np.fmax.accumulate(np.where(np.isnan(score[order]), -np.inf, score[order]), axis=1)
        for x in xs:
            # the running best at the last trial finished within budget x (-1: none yet)
            k = (cum <= x * (1 + 1e-12)).sum(axis=1) - 1
            vals = np.where(k >= 0, best[np.arange(n_orders), np.clip(k, 0, None)], -np.inf)
            done = bool(np.isfinite(vals).all())
            rows.append({**base, "device_hours": float(x), "mean": float(vals.mean()) if done else math.nan,
                         "q10": float(np.quantile(vals, 0.1)) if done else math.nan, "q90": float(np.quantile(vals, 0.9)) if done else math.nan,
                         "orders_scored": float(np.isfinite(vals).mean()), "full_grid": bool(x >= total * (1 - 1e-12))})
    return pd.DataFrame(rows, columns=ANYTIME_COLUMNS)


def cost_to_target(data: ComparisonData, margin: float = 0.01, n_orders: int = 500, seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Device-hours each arm spends until its best inner-validation accuracy
    is within `margin` of the best any arm found.  Grid arms (fixed, awnn):
    in random orders of their selection trials (mean and median over orders;
    `reached` is the fraction of orders that get there, 0 when the grid never
    does).  Other arms: in the order their trials ran (`reached` is 1 or 0,
    mean = median = that order's cost)."""
    rng = np.random.default_rng(seed + 1)
    kinds = {s: ordering(data, s) for s in data.strategies}
    pts = {s: _selection_points(data, s, actual_order=kinds[s] == "actual") for s in data.strategies}
    finite = [np.nanmax(sc) for _, sc in pts.values() if len(sc) and np.isfinite(sc).any()]
    best = max(finite) if finite else math.nan
    target = best - margin if finite else math.nan
    rows = []
    for s, (cost, score) in pts.items():
        row = {"strategy": s, "family": data.family(s), "order": kinds[s], "target": target, "reached": 0.0, "hours_mean": math.nan,
               "hours_median": math.nan, "grid_hours": float(cost.sum()),
               "best_val_acc": float(np.nanmax(score)) if len(score) and np.isfinite(score).any() else math.nan, "trials": int(len(cost))}
        if len(cost) and np.isfinite(target):
            order = _orders(len(cost), n_orders, rng) if kinds[s] == "random" else np.arange(len(cost))[None, :]
            n = len(order)
            cum = np.cumsum(cost[order], axis=1)
            hit = np.nan_to_num(score[order], nan=-np.inf) >= target - 1e-12
            reached = hit.any(axis=1)
            first = hit.argmax(axis=1)
            hours = cum[np.arange(n), first][reached]
            row.update({"reached": float(reached.mean()), "hours_mean": float(hours.mean()) if len(hours) else math.nan,
                        "hours_median": float(np.median(hours)) if len(hours) else math.nan})
        rows.append(row)
    cols = ["strategy", "family", "order", "target", "reached", "hours_mean", "hours_median", "grid_hours", "best_val_acc", "trials"]
    return pd.DataFrame(rows, columns=cols), {"best_val_acc": best, "margin": margin, "target": target, "n_orders": n_orders}


# ----------------------------------------------------------------- repeats
REPEAT_METRICS = (
    ("selection_hours", "selection device-hours"),
    ("total_hours", "total device-hours"),
    ("test_acc_mean", "test accuracy mean"),
    ("savings_vs_awnn", "selection savings vs awnn"),
    ("savings_vs_fixed", "selection savings vs fixed"),
    ("hours_to_target", "device-hours to target"),
)


def repeat_table(data: ComparisonData, costs: pd.DataFrame, strategies: pd.DataFrame, savings_: pd.DataFrame,
                 target: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """For each family with more than one arm (`--repeats N`): the spread
    across its arms (mean, sample std, min, max, n = arms with a value) of
    selection and total device-hours, test accuracy mean, selection savings
    ratio vs awnn and vs fixed, and device-hours to the target (over the arms
    that reached it); plus how many arms reached the target (k of N)."""
    rows, info = [], {}
    for family, arms in data.families.items():
        if len(arms) < 2:
            continue
        per_arm: dict[str, list[float]] = {m: [] for m, _ in REPEAT_METRICS}
        reached = 0
        for arm in arms:
            c = costs[costs["strategy"] == arm].set_index("phase") if len(costs) else pd.DataFrame()
            per_arm["selection_hours"].append(float(c.loc["selection", "device_hours"]) if "selection" in c.index else math.nan)
            per_arm["total_hours"].append(float(c.loc["total", "device_hours"]) if "total" in c.index else math.nan)
            st = strategies[strategies["strategy"] == arm]
            per_arm["test_acc_mean"].append(float(st["test_acc_mean"].iloc[0]) if len(st) else math.nan)
            for ref in ("awnn", "fixed"):
                sv = savings_[(savings_["strategy"] == arm) & (savings_["reference"] == ref)] if len(savings_) else savings_
                per_arm[f"savings_vs_{ref}"].append(float(sv["selection_ratio"].iloc[0]) if len(sv) else math.nan)
            tg = target[target["strategy"] == arm] if len(target) else target
            hit = bool(len(tg)) and float(tg["reached"].iloc[0]) > 0
            reached += int(hit)
            per_arm["hours_to_target"].append(float(tg["hours_mean"].iloc[0]) if hit else math.nan)
        for metric, label in REPEAT_METRICS:
            v = np.array(per_arm[metric], dtype=float)
            v = v[np.isfinite(v)]
            rows.append({"family": family, "metric": metric, "label": label, "arms": len(arms), "n": int(len(v)),
                         "mean": float(v.mean()) if len(v) else math.nan, "std": float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                         "min": float(v.min()) if len(v) else math.nan, "max": float(v.max()) if len(v) else math.nan,
                         "values": [float(x) for x in per_arm[metric]]})
        info[family] = {"arms": list(arms), "n": len(arms), "reached_target": reached}
    cols = ["family", "metric", "label", "arms", "n", "mean", "std", "min", "max", "values"]
    return pd.DataFrame(rows, columns=cols), info


# ------------------------------------------------------------- projection
def projection(data: ComparisonData, fixed: str = "fixed", reference: str = REFERENCE, max_layers: int | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """PROJECTION, not a measurement: the selection cost of a fixed grid in
    which each of L hidden layers gets its own width (W^L width combinations
    times the grid's other dimensions) next to the AWNN grid's, from the
    measured mean device-hours per selection trial.

    Per-trial cost at L layers: the measured mean over the trials with that
    many hidden layers; for an L not in the grid, a least-squares line in L
    through the measured means (constant with one measured L)."""
    info: dict[str, Any] = {"applicable": False}
    if fixed not in data.strategies or reference not in data.strategies:
        info["reason"] = f"needs strategies {fixed!r} and {reference!r}"
        return pd.DataFrame(), info
    t = data.trials()
    f = t[(t["strategy"] == fixed) & (t["phase"] == "selection")]
    a = t[(t["strategy"] == reference) & (t["phase"] == "selection")]
    widths = sorted(v for v in f["width"].dropna().unique())
    if not len(f) or not len(a) or not widths:
        info["reason"] = "no selection trials with a width"
        return pd.DataFrame(), info
    f_layers = sorted(int(v) for v in f["hidden_layers"].dropna().unique())
    a_layers = sorted(int(v) for v in a["hidden_layers"].dropna().unique())
    w = len(widths)
    other_f = len(f) / (w * len(f_layers))  # configs per (width, layers) pair: the grid's other dimensions
    other_a = len(a) / len(a_layers)  # AWNN configs per number of layers
    top = max_layers or max(4, max(f_layers + a_layers))

    def per_trial(df: pd.DataFrame) -> tuple[dict[int, float], Any]:
        means = df.groupby("hidden_layers")["device_hours"].mean()
        measured = {int(k): float(v) for k, v in means.items()}
        if len(measured) >= 2:
            slope, icpt = np.polyfit(list(measured), list(measured.values()), 1)
            floor = min(measured.values())
            return measured, lambda L: max(floor, float(icpt + slope * L))
        only = next(iter(measured.values()))
        return measured, lambda L: only

    mf, ff = per_trial(f)
    ma, fa = per_trial(a)
    rows = []
    for L in range(1, top + 1):
        cf = mf.get(L, ff(L))
        ca = ma.get(L, fa(L))
        n_f = other_f * w ** L
        rows.append({"layers": L, "fixed_configs_shared_width": other_f * w, "fixed_configs_per_layer_width": n_f,
                     "fixed_hours_per_trial": cf, "fixed_per_trial_measured": L in mf, "fixed_hours": n_f * cf,
                     "awnn_configs": other_a, "awnn_hours_per_trial": ca, "awnn_per_trial_measured": L in ma, "awnn_hours": other_a * ca,
                     "ratio": _ratio(n_f * cf, other_a * ca)})
    info.update({"applicable": True, "width_values": [float(x) for x in widths], "W": w, "fixed_layers": f_layers, "awnn_layers": a_layers,
                 "fixed_other_configs": other_f, "awnn_configs_per_layers": other_a})
    return pd.DataFrame(rows), info


# --------------------------------------------------------------- problems
def problems(data: ComparisonData) -> list[str]:
    """What a reader must know before trusting the numbers: unfinished
    comparison or sweeps, missing sweeps or trials, trials that did not end
    ok, estimated costs, other comparisons in the same experiment.  Trials
    that ASHA stopped early are its normal working, not a problem: the cost
    table counts them (see `early_stopped`)."""
    out = []
    c = data.comparison
    if c["state"] != "finished":
        out.append(f"The comparison has not finished (awnn.state={c['state']}): the numbers cover the runs recorded so far.")
    trials = data.trials()
    for s in data.strategies:
        for ph in PHASES:
            sw = data.sweeps[(data.sweeps["strategy"] == s) & (data.sweeps["phase"] == ph)]
            t = trials[(trials["strategy"] == s) & (trials["phase"] == ph)] if len(trials) else trials
            if not len(sw):
                if ph == "selection" or len(t):
                    out.append(f"{s} {ph}: no sweep run in MLflow.")
                else:
                    sel = data.sweeps[(data.sweeps["strategy"] == s) & (data.sweeps["phase"] == "selection")]
                    why = "no selection trial could be selected" if len(sel) and not sel["selected_key"].iloc[0] else "it was never started"
                    out.append(f"{s} re-training (assessment): missing; {why}, so {s} has no test accuracy.")
                continue
            declared = sw["trials_declared"].iloc[0]
            if np.isfinite(declared) and len(t) < declared:
                k = int(declared) - len(t)
                out.append(f"{s} {ph}: the sweep declares {int(declared)} trials but MLflow holds {len(t)}; {k} trial{'s are' if k > 1 else ' is'} missing from every number below.")
            if sw["state"].iloc[0] != "finished":
                out.append(f"{s} {ph}: the sweep run is not finished (awnn.state={sw['state'].iloc[0]}).")
    inter = data.runs[data.runs["status"] == "interrupted"] if len(data.runs) else data.runs
    if len(inter):
        out.append(f"{len(inter)} runs were interrupted (a driver died) and re-run; their compute is counted, they are not extra configs.")
    retried = data.runs[data.runs["retries"].fillna(0) > 0] if len(data.runs) else data.runs
    if len(retried):
        which = ", ".join(f"{r.strategy} {r.phase} {r.trial_key} ({int(r.retries)}x)" for r in retried.itertuples())
        out.append(f"{len(retried)} trials were retried after a failure (a worker or node died) and continued from their last checkpoint: {which}; the lost attempts' compute is counted.")
    est = data.runs[data.runs["cost_estimated"]] if len(data.runs) else data.runs
    if len(est):
        out.append(f"{len(est)} runs have no recorded device_hours; their cost is estimated from their last train_seconds.")
    bad = trials[~trials["status"].isin(("ok",))] if len(trials) else trials
    if len(bad):
        by_design = (bad["status"] == "stopped") & (bad["phase"] == "selection") & bad["strategy"].map(lambda s: data.family(s) in EARLY_STOPPING)
        bad = bad[~by_design]
    for _, r in bad.iterrows():
        what = {"diverged": "diverged (non-finite loss)", "width_capped": "hit max_width (scored, selectable)",
                "failed": "failed", "stopped": "was stopped early", "interrupted": "was interrupted and not re-run",
                "running": "has no final status"}.get(r["status"], r["status"])
        err = f": {r['error']}" if r["error"] else ""
        out.append(f"{r['strategy']} {r['phase']} trial {r['trial_key']} {what}; its {r['device_hours']:.4g} device-hours are counted{err}")
    return out


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
