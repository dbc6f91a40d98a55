"""The cost tables (per arm and phase), the selection/strategy and width tables
and AWNN's per-sample overhead: pure functions of a ComparisonData
(definitions in tracking/analysis.py; the savings: tracking/savings.py)."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from .contract import PHASES, SELECTABLE, STATUSES, assessment_summary, fold_of_key
from .reader import ComparisonData

__all__ = ["cost_table", "strategy_table", "width_table", "overhead"]

# params that identify a trial rather than a point of the grid
NON_GRID_PARAMS = {"trial_key", "phase", "grid_index", "seed", "split", "epochs", "patience", "data_seed"}


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
                if ph == "selection" and data.depends_on(s):  # fixedplus: the search it depends on is its selection
                    row = _inherited_row(data, s, data.depends_on(s))
                    rows.append(row)
                    parts.append(row)
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
                "sweep_state": sw["state"].iloc[0] if len(sw) else "missing", "inherited_from": "",
            }
            rows.append(row)
            parts.append(row)
        if parts:
            tot = {"strategy": s, "family": data.family(s), "phase": "total"}
            for k in parts[0]:
                if k in ("strategy", "family", "phase", "sweep_state", "inherited_from"):
                    continue
                vals = [p[k] for p in parts]
                tot[k] = float(np.nansum(vals)) if all(isinstance(v, float) for v in vals) else sum(vals)
            tot["configs"] = parts[0]["configs"] if parts[0]["phase"] == "selection" else 0
            tot["sweep_state"] = "finished" if all(p["sweep_state"] == "finished" for p in parts) else "incomplete"
            tot["inherited_from"] = next((p["inherited_from"] for p in parts if p["inherited_from"]), "")
            rows.append(tot)
    return pd.DataFrame(rows)


def _inherited_row(data: ComparisonData, arm: str, source: str) -> dict[str, Any]:
    """The selection row of an arm without a search of its own (fixedplus):
    no configs, trials or runs of its own; the device- and GPU-hours of every
    run of the arm it depends on (selection and re-training)."""
    r = data.runs[data.runs["strategy"] == source] if len(data.runs) else data.runs
    sw = data.sweeps[data.sweeps["strategy"] == source]
    return {"strategy": arm, "family": data.family(arm), "phase": "selection", "configs": 0, "trials": 0, "trials_declared": math.nan,
            "runs": 0, **{st: 0 for st in STATUSES}, "interrupted_runs": 0,
            "device_hours": float(r["device_hours"].sum()) if len(r) else 0.0, "gpu_hours": float(r["gpu_hours"].sum()) if len(r) else 0.0,
            "compute_seconds": float(r["compute_seconds"].sum()) if len(r) else 0.0,
            "estimated_runs": int(r["cost_estimated"].sum()) if len(r) else 0, "wall_seconds": float(np.nansum(sw["wall_seconds"])) if len(sw) else math.nan,
            "sweep_state": "finished" if len(sw) and (sw["state"] == "finished").all() else "incomplete", "inherited_from": source}


def _configs(data: ComparisonData, arm: str, sel: pd.DataFrame) -> int:
    """Distinct configs among an arm's selection trials: one per trial, but in
    comparisons recorded before 2026-12-08 TPE trained a config it suggested
    twice (two trials, one config: its grid_index; search/tpe.py, "Repeats")."""
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
        if not len(sw):  # no search of its own (fixedplus): its re-training sweep carries the choice
            sw = data.sweeps[(data.sweeps["strategy"] == s) & (data.sweeps["phase"] == "assessment")]
        key = sw["selected_key"].iloc[0] if len(sw) else None
        cfg = sw["selected_config"].iloc[0] if len(sw) else None
        chosen = sel[sel["trial_key"] == key] if key else sel.iloc[0:0]
        ok = ass[_selectable(ass, "test_acc")] if len(ass) else ass
        # (cross-validated: the mean over folds of each fold's mean; the fold is in the trial key)
        summary = assessment_summary(ok["test_acc"].astype(float) if len(ok) else [],
                                     folds=ok["trial_key"].map(fold_of_key).tolist() if len(ok) else None)
        dims = _grid_dims(sel)
        rows.append({
            "strategy": s,
            "family": data.family(s),
            "selected_key": key,
            "selected_config": cfg,
            "selected_summary": _config_summary(cfg, dims) if cfg else "none selected",
            "selected_val_acc": float(chosen["best_val_acc"].iloc[0]) if len(chosen) else math.nan,
            "best_val_acc": float(sel.loc[_selectable(sel, "best_val_acc"), "best_val_acc"].max()) if len(sel) and _selectable(sel, "best_val_acc").any() else math.nan,
            "test_acc_mean": summary["test_acc_mean"],
            "test_acc_std": summary["test_acc_std"],
            "test_runs": summary["runs_ok"],
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
    re-training runs of the widths at the selected epoch; an arm derived from
    another (fixedplus): taken from that arm's learned widths), per layer and total."""
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
            # the widths the trainer recorded, on the same layers as AWNN's (e.g. GIN: the MLP before the
            # convolutions and one per convolution); stores without them: the config's width per hidden layer
            ass = trials[(trials["strategy"] == s["strategy"]) & (trials["phase"] == "assessment")]
            recorded = [w for w in ass.loc[ass["status"].isin(SELECTABLE), "widths"] if isinstance(w, list) and w] if len(ass) else []
            per = [float(v) for v in recorded[0]] if recorded else [float(cfg.get("width", math.nan))] * layers
            source = data.depends_on(s["strategy"])
            kind = f"taken from {source}'s learned widths" if source else "chosen by the grid"
            rows.append({"strategy": s["strategy"], "kind": kind, "layers": len(per), "per_layer": ", ".join(f"{w:g}" for w in per),
                         "per_layer_mean": per, "per_layer_std": [0.0] * len(per),
                         "total_mean": float(sum(per)), "total_std": 0.0, "n": 1})
    return pd.DataFrame(rows)


# --------------------------------------------------------------- overhead
ARCH_KEYS = ("conv_layers", "pooling")  # a model's own depth and pooling (GIN): matched first when a run's config has them


def _arch(run) -> tuple:
    cfg = run.get("config") if isinstance(run.get("config"), dict) else {}
    return tuple((k, cfg[k]) for k in ARCH_KEYS if k in cfg)


def _layers(run) -> float:
    """The number of layers a run's width is spread over: the widths the trainer recorded, else hidden_layers."""
    for col in ("widths", "widths_at_best"):
        w = run.get(col)
        if isinstance(w, list) and w:
            return float(len(w))
    return float(run["hidden_layers"]) if np.isfinite(run["hidden_layers"]) else 1.0


FUSED_MATCH = "; fused fixed runs only"  # the end of an overhead match made against fused fixed runs (see overhead)


def _fused(group) -> bool:
    """Whether a run trained fused (a non-empty `group`: search/fusion.py), from the run table's column."""
    return isinstance(group, str) and group != ""


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
    match says so.  The ratio of the two costs is the overhead.

    An AWNN run trains alone in its trial, so it is matched with fixed runs
    trained alone too (no `group`) where a tier has them: a fused fixed
    run's `train_seconds` is its share of a stacked group's time
    (search/fused_trial.py), cheaper per config by what fusion saves, and a
    mean over both executions measured neither.  Where a tier has only fused
    runs (`awnn compare --strategies fixed,awnn` fuses the whole fixed
    grid) they are used and the match says so: that ratio includes fusion's
    saving, not only AWNN's own work (summary `fused_matches`).

    Layers are the ones the trainer records widths for (GIN: the MLP before
    the convolutions and one per convolution, each `hidden_layers` deep;
    older stores: `hidden_layers`), and models with a depth or pooling of
    their own (GIN's `conv_layers`, `pooling`) are matched on those first."""
    per = data.comparison["gpus_per_trial"] if data.comparison["gpus_per_trial"] > 0 else data.comparison["cpus_per_trial"]
    runs = data.runs
    cols = ["strategy", "phase", "trial_key", "run_id", "hidden_layers", "batch_size", "mean_width", "cost", "fixed_width", "fixed_cost", "fixed_runs", "match", "ratio"]
    ok = runs[runs["status"].isin(SELECTABLE) & (runs["epochs_run"] > 0) & np.isfinite(runs["train_seconds"].astype(float))] if len(runs) else runs
    if not len(ok):
        return pd.DataFrame(columns=cols), {"unit": "device-seconds per epoch", "n": 0, "fused_matches": 0}
    ok = ok.copy()
    per_sample = bool(np.isfinite(ok["n_train"].astype(float)).all() and (ok["n_train"] > 0).all())
    denom = ok["n_train"].astype(float) if per_sample else 1.0
    ok["cost"] = ok["train_seconds"].astype(float) * per / ok["epochs_run"].astype(float) / denom
    unit = "device-seconds per sample per epoch" if per_sample else "device-seconds per epoch"
    adaptive = ok[ok["model"] == "awnn"]
    fixed = ok[ok["model"] != "awnn"].copy()
    fixed["total_width"] = fixed["width"] * [_layers(r) for _, r in fixed.iterrows()]
    fixed["arch"] = [_arch(r) for _, r in fixed.iterrows()]
    fixed["fused"] = [_fused(g) for g in fixed["group"]] if "group" in fixed.columns else False
    hist = data.histories
    wt = hist[hist["key"] == "width_total"].groupby("run_id")["value"].mean() if len(hist) else pd.Series(dtype=float)
    rows = []
    for _, a in adaptive.iterrows():
        layers = _layers(a)
        total = wt.get(a["run_id"], a["final_width_total"])
        mean_w = float(total) / layers if np.isfinite(total) else math.nan
        row = {c: a.get(c) for c in ("strategy", "phase", "trial_key", "run_id", "hidden_layers", "batch_size")}
        row.update({"mean_width": mean_w, "cost": float(a["cost"]), "fixed_width": math.nan, "fixed_cost": math.nan, "fixed_runs": 0, "match": "no fixed runs", "ratio": math.nan})
        pool = fixed[fixed["split"] == a["split"]]
        if not len(pool) or not np.isfinite(mean_w):
            rows.append(row)
            continue
        same = pool[(pool["hidden_layers"] == a["hidden_layers"]) & (pool["batch_size"] == a["batch_size"])]
        arch = _arch(a)
        same_arch = same[same["arch"] == arch]
        # (named only where it matters: some fixed runs of the same layers and batch size differ in depth or pooling)
        cands = ([(f"same split, layers, batch size and {', '.join(k for k, _ in arch)}", same_arch)] if len(same_arch) < len(same) else []) + [
                 ("same split, layers and batch size", same),
                 ("same split and layers; other batch size", pool[pool["hidden_layers"] == a["hidden_layers"]]),
                 ("same split; other layers (matched on total width)", pool)]
        for label, c in cands:
            if len(c):
                break
        alone = c[~c["fused"].astype(bool)]
        if len(alone):
            c = alone  # (trained as the AWNN run was: one config in its trial)
        else:
            label += FUSED_MATCH
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
    measured = np.isfinite(ratios)
    ratios = ratios[measured]
    summary = {
        "unit": unit,
        "n": int(len(ratios)),
        "fused_matches": int(table.loc[measured, "match"].astype(str).str.endswith(FUSED_MATCH).sum()),
        "ratio_median": float(ratios.median()) if len(ratios) else math.nan,
        "ratio_q25": float(ratios.quantile(0.25)) if len(ratios) else math.nan,
        "ratio_q75": float(ratios.quantile(0.75)) if len(ratios) else math.nan,
        "awnn_cost_median": float(table.loc[np.isfinite(table["ratio"].astype(float)), "cost"].median()) if len(ratios) else math.nan,
        "fixed_cost_median": float(table.loc[np.isfinite(table["ratio"].astype(float)), "fixed_cost"].median()) if len(ratios) else math.nan,
        "allocated_devices_per_trial": per,
    }
    return table, summary


