"""Read one comparison back from MLflow into tables (read-only).

The definitions of arm, trial, run and device-hours are in tracking/analysis.py."""
from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import contract as C
from .contract import PHASES, Tag, arm_family, redact_uri, tag_equals

__all__ = ["AnalysisError", "ComparisonData", "find_comparison", "load_comparison", "load_histories", "trials_from_runs", "RUN_COLUMNS", "SEARCH_PARAMS"]

SEARCH_PARAMS = C.SEARCH_OPTIONS  # the comparison run's search-option params


# how stores written before the behaviour tags (awnn.order, awnn.stops_early) are read
GRID_FAMILIES = ("fixed", "awnn")  # whole grids without a natural order
EARLY_STOPPING = ("asha", "awnn-asha")  # families whose scheduler stops trials early on purpose


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

    def _sweep_tag(self, arm: str, column: str) -> str | None:
        """A behaviour tag of the arm's sweep runs (the selection sweep's first), or None."""
        sw = self.sweeps
        if not len(sw) or column not in sw.columns:
            return None
        rows = sw[(sw["strategy"] == arm) & sw[column].notna()]
        if not len(rows):
            return None
        sel = rows[rows["phase"] == "selection"]
        return str((sel if len(sel) else rows)[column].iloc[0])

    def order_of(self, arm: str) -> str:
        """How the analysis orders the arm's selection trials: "random" (a whole
        grid: random orders) or "actual" (as they ran).  From the sweep runs'
        `awnn.order` tag; stores written before it: by family."""
        tag = self._sweep_tag(arm, "order")
        if tag in ("random", "actual"):
            return tag
        return "random" if self.family(arm) in GRID_FAMILIES else "actual"

    def stops_early(self, arm: str) -> bool:
        """Whether the arm's scheduler stops trials on purpose (`awnn.stops_early`
        tag of its sweep runs; stores written before it: by family)."""
        tag = self._sweep_tag(arm, "stops_early")
        if tag in ("true", "false"):
            return tag == "true"
        return self.family(arm) in EARLY_STOPPING

    def depends_on(self, arm: str) -> str | None:
        """The arm whose whole search is part of this arm's cost (`awnn.depends_on`
        tag of its sweep runs: fixedplus -> awnn), when that arm is in the comparison."""
        tag = self._sweep_tag(arm, "depends_on")
        return tag if tag and tag in self.strategies and tag != arm else None

    def adaptive_arms(self) -> list[str]:
        """The arms, in run order, with runs of the adaptive model (`model` awnn): the arms that learn their widths."""
        runs = self.runs
        if not len(runs) or "model" not in runs.columns:
            return []
        return [s for s in self.strategies if ((runs["strategy"] == s) & (runs["model"] == "awnn")).any()]

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
    flt = tag_equals((Tag.KIND, "comparison"))
    roots = _search_all(client, ids, flt, order_by=["attributes.start_time DESC"])
    roots.sort(key=lambda r: (-(r.info.start_time or 0), r.info.run_id))
    if comparison is not None:
        chosen = [r for r in roots if r.data.tags.get(Tag.COMPARISON) == comparison]
        if not chosen:
            known = [r.data.tags.get(Tag.COMPARISON) for r in roots[:5]]
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
    cid = root.data.tags.get(Tag.COMPARISON)
    exp = client.get_experiment(root.info.experiment_id)
    runs = _search_all(client, [root.info.experiment_id], tag_equals((Tag.COMPARISON, cid)))
    tags, params, metrics = root.data.tags, root.data.params, root.data.metrics
    families = [s for s in (tags.get(Tag.STRATEGIES) or params.get("strategies") or "").split(",") if s]
    # arms in run order (older comparisons have no awnn.arms: one arm per strategy, named after it)
    strategies = [s for s in (tags.get(Tag.ARMS) or "").split(",") if s] or list(families)
    family_of = {s: arm_family(s) for s in strategies}
    for r in runs:  # the runs' own tags win: awnn.strategy is the family
        arm = _arm(r.data.tags)
        if arm:
            family_of[arm] = r.data.tags.get(Tag.STRATEGY) or family_of.get(arm) or arm_family(arm)
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
        "task": tags.get(Tag.TASK) or params.get("task"),
        "budget": tags.get(Tag.BUDGET) or budget.get("name"),
        "budget_params": budget,
        # the seed selection trials trained with (re-training run r: + r); 0 where the budget param has none (the default)
        "train_seed": _seed(budget.get("train_seed")),
        # risk assessment: holdout, or cv<k> (k outer folds; stores written before the param: holdout)
        "protocol": params.get(C.Param.PROTOCOL) or "holdout",
        "folds": int(_num(params.get(C.Param.FOLDS), 1.0)),
        "cpu": _json(params.get(C.Param.CPU)) or {},  # grid file -> the config values a CPU budget changed
        "data_summary": params.get(C.Param.DATA_SUMMARY),  # task `table`: rows, features, classes as read; else None
        "data_digest": params.get(C.Param.DATA_DIGEST),  # the data's files (awnn/data/digest.py), 16 hex; None for generated data
        "data_root": params.get(C.Param.DATA_ROOT),
        "state": tags.get(Tag.STATE, "unknown"),
        "run_status": root.info.status,
        "strategies": strategies,
        "families": families,
        "family_of": family_of,
        "repeats": int(_num(tags.get(Tag.REPEATS) or params.get("repeats"), 1.0)),
        "search": {k: C.parse_param(params[k]) for k in SEARCH_PARAMS if k in params},
        "command": tags.get(Tag.COMMAND, ""),
        "cpus_per_trial": _num(params.get("cpus_per_trial"), 1.0),
        "gpus_per_trial": _num(params.get("gpus_per_trial"), 0.0),
        "fuse": int(_num(params.get(C.Param.FUSE), 1.0)),
        # trials flushed float denormals on the CPU (awnn/arith.py); None: not recorded (comparisons before the param)
        "flush_denormal": C.parse_param(params[C.Param.FLUSH_DENORMAL]) if C.Param.FLUSH_DENORMAL in params else None,  # --fuse (comparisons before it: 1, one config per trial)
        "wall_seconds": metrics.get("wall_seconds", math.nan),
        "start_time": root.info.start_time,
        "end_time": root.info.end_time,
    }
    sweeps = _sweep_frame([r for r in runs if r.data.tags.get(Tag.KIND) == "sweep"], strategies)
    trial_runs = _run_frame([r for r in runs if r.data.tags.get(Tag.KIND) == "trial"], strategies, info)
    data = ComparisonData(tracking_uri, info, sweeps, trial_runs,
                          other_comparisons=[{"id": r.data.tags.get(Tag.COMPARISON), "state": r.data.tags.get(Tag.STATE), "start_time": r.info.start_time} for r in others])
    keys = list(history_keys)
    if keys and len(trial_runs):
        adaptive = trial_runs.loc[trial_runs["model"] == "awnn", "run_id"].tolist()
        data.histories = load_histories(tracking_uri, adaptive, keys, max_points=max_points)
        # the truncation curves of the adaptive re-training runs (tracking/truncation.py; step = % of neurons kept)
        retrained = trial_runs.loc[(trial_runs["model"] == "awnn") & (trial_runs["phase"] == "assessment"), "run_id"].tolist()
        trunc = load_histories(tracking_uri, retrained, C.TRUNCATION, max_points=max_points)
        if len(trunc):
            data.histories = pd.concat([data.histories, trunc], ignore_index=True)
    return data


def _arm(tags: dict[str, str]) -> str:
    """A run's arm; runs written before arms existed: their strategy."""
    return tags.get(Tag.ARM) or tags.get(Tag.STRATEGY, "")


def _num(v: Any, default: float = math.nan) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return default
    return x


def _seed(v: Any) -> int:
    """A budget param's train_seed: a whole number >= 0, else 0 (absent: the default)."""
    x = _num(v, 0.0)
    return int(x) if math.isfinite(x) and x >= 0 and x.is_integer() else 0


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
            "strategy": _arm(t), "family": t.get(Tag.STRATEGY) or arm_family(_arm(t)), "repeat": int(_num(t.get(Tag.REPEAT), 0.0)),
            "phase": t.get(Tag.PHASE, ""), "run_id": r.info.run_id,
            "state": t.get(Tag.STATE, "unknown"), "trials_declared": _num(p.get("trials")), "configs_declared": _num(p.get("configs")),
            "epochs": _num(p.get("epochs")), "retrain_runs": _num(p.get("retrain_runs")), "grid_file": p.get("grid_file", ""),
            "grid_digest": p.get("grid_digest", ""), "selected_key": t.get(Tag.SELECTED_KEY) or p.get("selected_key"),
            "selected_config": _json(t.get(Tag.SELECTED_CONFIG)),
            "wall_seconds": m.get("wall_seconds", math.nan), "device_hours": m.get("device_hours", math.nan),
            "start_time": r.info.start_time, "end_time": r.info.end_time,
            "order": t.get(Tag.ORDER), "stops_early": t.get(Tag.STOPS_EARLY), "depends_on": t.get(Tag.DEPENDS_ON),
        })
    cols = ["strategy", "family", "repeat", "phase", "run_id", "state", "trials_declared", "configs_declared", "epochs", "retrain_runs", "grid_file",
            "grid_digest", "selected_key", "selected_config", "wall_seconds", "device_hours", "start_time", "end_time", "order", "stops_early",
            "depends_on"]
    df = pd.DataFrame(rows, columns=cols)
    order = _order(strategies)
    if len(df):
        df = df.assign(_s=df["strategy"].map(lambda s: order.get(s, 99)), _p=df["phase"].map(lambda p: PHASES.index(p) if p in PHASES else 9))
        df = df.sort_values(["_s", "_p", "start_time", "run_id"]).drop(columns=["_s", "_p"]).reset_index(drop=True)
    return df


RUN_COLUMNS = [
    "run_id", "strategy", "phase", "trial_key", "status", "run_status", "model", "hidden_layers", "width", "batch_size", "split",
    "seed", "grid_index", "device_hours", "gpu_hours", "compute_seconds", "cpu_seconds", "wall_device_hours", "train_seconds",
    "epochs_run", "best_val_acc", "best_val_loss", "best_epoch", "test_acc", "final_width_total", "widths", "widths_at_best", "n_train",
    "attempts", "retries", "cost_estimated", "error", "start_time", "end_time", "config", "family", "repeat", "group", "cpu",
]


def _run_frame(runs: list, strategies: list[str], info: dict) -> pd.DataFrame:
    per = info["gpus_per_trial"] if info["gpus_per_trial"] > 0 else info["cpus_per_trial"]
    rows = []
    for r in runs:
        t, p, m = r.data.tags, r.data.params, r.data.metrics
        status = t.get(Tag.STATUS, "running")
        config = {k: C.parse_param(v) for k, v in p.items() if k not in C.TRIAL_PARAMS}
        estimated = "device_hours" not in m
        if estimated:  # no final metrics: open run, or one a dead driver left (see module docstring)
            seconds = m.get("train_seconds", 0.0)
            dev_h, gpu_h, compute = seconds * per / 3600.0, seconds * info["gpus_per_trial"] / 3600.0, seconds
        else:
            dev_h, gpu_h, compute = m["device_hours"], m.get("gpu_hours", 0.0), m.get("compute_seconds", math.nan)
        # (device_hours was wall-based before cpu_seconds was measured: tracking/callback.py "Cost")
        wall_dev_h = m.get(C.Metric.WALL_DEVICE_HOURS, dev_h)
        widths = _json(t.get(Tag.WIDTHS))
        rows.append({
            "run_id": r.info.run_id, "strategy": _arm(t), "family": t.get(Tag.STRATEGY) or arm_family(_arm(t)),
            "repeat": int(_num(t.get(Tag.REPEAT), 0.0)), "phase": t.get(Tag.PHASE) or p.get("phase", ""),
            "trial_key": t.get(Tag.TRIAL_KEY) or p.get("trial_key", ""), "status": status, "run_status": r.info.status,
            "model": p.get("model", ""), "hidden_layers": _num(p.get("hidden_layers")), "width": _num(p.get("width")),
            "batch_size": _num(p.get("batch_size")), "split": p.get("split", ""), "seed": _num(p.get("seed")),
            "grid_index": _num(p.get("grid_index")), "device_hours": float(dev_h), "gpu_hours": float(gpu_h),
            "compute_seconds": float(compute), "cpu_seconds": m.get(C.Metric.CPU_SECONDS, math.nan),
            "wall_device_hours": float(wall_dev_h), "train_seconds": m.get("train_seconds", math.nan),
            "epochs_run": m.get("epochs_run", math.nan), "best_val_acc": m.get("best_val_acc", math.nan),
            "best_val_loss": m.get("best_val_loss", math.nan), "best_epoch": m.get("best_epoch", math.nan),
            "test_acc": m.get("test_acc", math.nan),
            "final_width_total": m.get("final_width_total", float(sum(widths)) if widths else math.nan),
            "widths": widths, "widths_at_best": _json(t.get(Tag.WIDTHS_AT_BEST)),
            "n_train": m.get("n_train", _num(p.get("n_train"))), "attempts": m.get("attempts", math.nan),
            "retries": m.get("retries", math.nan), "cost_estimated": bool(estimated), "error": t.get(Tag.ERROR) or t.get(Tag.LAST_ERROR) or "",
            "start_time": r.info.start_time or 0, "end_time": r.info.end_time, "config": config,
            "group": t.get(Tag.GROUP, ""),  # a fused trial's group (--fuse), else ""
            "cpu": t.get(Tag.CPU, ""),  # the CPU(s) that trained it (awnn/machine.py); "" in stores from before 2026-11-28
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
        cpu_seconds=("cpu_seconds", lambda x: x.sum(min_count=1)), wall_device_hours=("wall_device_hours", "sum"),
        cost_estimated=("cost_estimated", "any"), runs=("run_id", "size"), interrupted_runs=("_live", lambda x: int((~x).sum())),
        _first=("_pos", "min"),
    ).reset_index()
    out = rep.drop(columns=["device_hours", "gpu_hours", "compute_seconds", "cpu_seconds", "wall_device_hours", "cost_estimated", "_live",
                            "_pos"]).merge(agg, on=keys)
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


