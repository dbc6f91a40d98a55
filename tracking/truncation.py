"""Post-hoc truncation of the AWNN re-trained models (paper section 5.4, Fig. 6 left), read from MLflow.

Every re-training run of an adaptive MLP measures, in its trial, the curve
of its kept model (the selected epoch's) on the outer test part: for 100%,
90%, ..., 10% of each adaptive layer's neurons kept, the test accuracy,
the total width, the parameter count and the inference time per sample
(metrics `trunc_test_acc`, `trunc_width_total`, `trunc_params`,
`trunc_infer_us`, step = % kept; search/trial.py, awnn.train.truncation_curve).
This module aggregates them per arm over its re-training runs and finds the
largest cut that keeps the mean test accuracy within `TOLERANCE` of the
untruncated model's; the report and summary.json show both.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .contract import SELECTABLE, TRUNCATION, Metric
from .reader import ComparisonData

__all__ = ["TOLERANCE", "truncation_table", "curve_rows", "truncation_summary"]

TOLERANCE = 0.01  # the largest cut keeps the mean test accuracy within 1 point of the full model's
MEANS = {"width_total_mean": Metric.TRUNC_WIDTH_TOTAL, "params_mean": Metric.TRUNC_PARAMS, "infer_us_mean": Metric.TRUNC_INFER_US}
COLUMNS = ["strategy", "kept_pct", "n", "acc_mean", "acc_std", "acc_min", "acc_max", "width_total_mean", "params_mean", "infer_us_mean"]


def truncation_table(data: ComparisonData) -> pd.DataFrame:
    """Per arm with truncation curves and per % kept: the runs measured, test
    accuracy mean / sample std / min / max, and the means of total width,
    parameters and inference time per sample (from the runs' trunc_* metrics)."""
    h, runs = data.histories, data.runs
    if not len(h) or not len(runs) or not h["key"].isin(TRUNCATION).any():
        return pd.DataFrame(columns=COLUMNS)
    ok = runs[(runs["phase"] == "assessment") & runs["status"].isin(SELECTABLE)][["run_id", "strategy"]]
    t = h[h["key"].isin(TRUNCATION)].merge(ok, on="run_id")
    curves: dict[str, list[list[dict[str, float]]]] = {}
    for (arm, _), g in t.groupby(["strategy", "run_id"], sort=False):
        wide = g.pivot_table(index="step", columns="key", values="value")
        curves.setdefault(str(arm), []).append([{"fraction": step / 100, **{k: float(row[k]) for k in wide.columns}}
                                                for step, row in wide.iterrows()])
    rows = [r for arm in data.strategies for r in curve_rows(arm, curves.get(arm, []))]
    return pd.DataFrame(rows, columns=COLUMNS)


def curve_rows(arm: str, curves: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The table's rows of one arm from its runs' curves (each a list of
    {"fraction", and the tracking.contract.TRUNCATION metrics}: search/trial.py
    writes them so from awnn.train.truncation_curve): per % kept, from 100% down."""
    by_pct: dict[int, list[dict[str, Any]]] = {}
    for curve in curves:
        for point in curve:
            by_pct.setdefault(int(round(100 * point["fraction"])), []).append(point)
    rows = []
    for pct in sorted(by_pct, reverse=True):
        pts = by_pct[pct]
        acc = pd.Series([p.get(Metric.TRUNC_TEST_ACC) for p in pts], dtype=float).dropna()
        mean = {column: float(pd.Series([p.get(name) for p in pts], dtype=float).mean()) for column, name in MEANS.items()}
        rows.append({"strategy": arm, "kept_pct": pct, "n": int(len(acc)), "acc_mean": float(acc.mean()) if len(acc) else math.nan,
                     "acc_std": float(acc.std(ddof=1)) if len(acc) > 1 else math.nan,
                     "acc_min": float(acc.min()) if len(acc) else math.nan, "acc_max": float(acc.max()) if len(acc) else math.nan, **mean})
    return rows


def truncation_summary(table: pd.DataFrame, tolerance: float = TOLERANCE) -> dict[str, dict[str, Any]]:
    """Per arm: the full model's mean test accuracy, width, parameters and
    inference time, and the largest cut (100 - % kept) whose mean test
    accuracy stays within `tolerance` of it, with its accuracy, width,
    parameters and inference time (0 when no cut does)."""
    out: dict[str, dict[str, Any]] = {}
    for arm, g in table.groupby("strategy", sort=False):
        g = g.sort_values("kept_pct", ascending=False)
        full = g[g["kept_pct"] == 100]
        if not len(full) or not math.isfinite(full["acc_mean"].iloc[0]):
            continue
        f = full.iloc[0]
        within = g[g["acc_mean"] >= f["acc_mean"] - tolerance - 1e-12]
        best = within.sort_values("kept_pct").iloc[0] if len(within) else f
        out[str(arm)] = {
            "runs": int(f["n"]), "tolerance": tolerance, "full_acc": f["acc_mean"], "full_width_total": f["width_total_mean"],
            "full_params": f["params_mean"], "full_infer_us": f["infer_us_mean"],
            "largest_cut_pct": int(100 - best["kept_pct"]), "kept_pct": int(best["kept_pct"]), "acc_at_cut": best["acc_mean"],
            "width_total_at_cut": best["width_total_mean"], "params_at_cut": best["params_mean"], "infer_us_at_cut": best["infer_us_mean"],
            "curve": g[["kept_pct", "n", "acc_mean", "acc_std", "acc_min", "acc_max", "width_total_mean", "params_mean",
                        "infer_us_mean"]].to_dict("records"),
        }
    return out
