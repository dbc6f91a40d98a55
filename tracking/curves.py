"""Any-time curves, cost to a target accuracy, the spread over repeats, the
projection to other grid sizes and the list of problems: pure functions of a
ComparisonData (definitions in tracking/analysis.py)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .contract import PHASES, fold_of_key
from .reader import ComparisonData
from .savings import baseline_of
from .tables import _selectable

__all__ = ["ordering", "anytime", "cost_to_target", "repeat_table", "projection", "problems"]


# ------------------------------------------------------- any-time curves
def _orders(n: int, n_orders: int, rng: np.random.Generator) -> np.ndarray:
    return np.argsort(rng.random((n_orders, n)), axis=1)


def _selection_points(data: ComparisonData, strategy: str, actual_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per selection trial of an arm: device-hours (all its runs) and
    inner-validation score (NaN when it cannot be selected: diverged,
    failed, stopped early, ...).  With `actual_order`, in the order the
    trials ran (run end time; trials still open last).  Under a
    cross-validated protocol, fold 0's selection trials only: a search's
    any-time behaviour is that of one fold's selection (the report says so)."""
    t = data.trials()
    t = t[(t["strategy"] == strategy) & (t["phase"] == "selection")] if len(t) else t
    if len(t):
        folds = t["trial_key"].map(fold_of_key)
        if folds.notna().any():
            t = t[folds == 0]
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
    return data.order_of(strategy)


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
def repeat_metrics(baseline: str | None) -> tuple[tuple[str, str], ...]:
    """The measures of the spread across repeats: (key, label); the savings only with a baseline."""
    return (("selection_hours", "selection device-hours"), ("total_hours", "total device-hours"), ("test_acc_mean", "test accuracy mean"),
            *((("savings_vs_" + baseline, f"selection savings vs {baseline}"),) if baseline else ()), ("hours_to_target", "device-hours to target"))


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def repeat_table(data: ComparisonData, costs: pd.DataFrame, strategies: pd.DataFrame, savings_: pd.DataFrame,
                 target: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """For each family with more than one arm (`--repeats N`): the spread
    across its arms (mean, sample std, min, max, n = arms with a value) of
    selection and total device-hours, test accuracy mean, selection savings
    vs the baseline (tracking/savings.py), and device-hours to the target
    (over the arms that reached it); plus how many arms reached the target (k of N)."""
    rows, info = [], {}
    baseline = baseline_of(data.strategies)
    metrics = repeat_metrics(baseline)
    for family, arms in data.families.items():
        if len(arms) < 2:
            continue
        per_arm: dict[str, list[float]] = {m: [] for m, _ in metrics}
        reached = 0
        for arm in arms:
            c = costs[costs["strategy"] == arm].set_index("phase") if len(costs) else pd.DataFrame()
            per_arm["selection_hours"].append(float(c.loc["selection", "device_hours"]) if "selection" in c.index else math.nan)
            per_arm["total_hours"].append(float(c.loc["total", "device_hours"]) if "total" in c.index else math.nan)
            st = strategies[strategies["strategy"] == arm]
            per_arm["test_acc_mean"].append(float(st["test_acc_mean"].iloc[0]) if len(st) else math.nan)
            if baseline:
                sv = savings_[savings_["strategy"] == arm] if len(savings_) else savings_
                per_arm["savings_vs_" + baseline].append(float(sv["selection"].iloc[0]) if len(sv) else math.nan)
            tg = target[target["strategy"] == arm] if len(target) else target
            hit = bool(len(tg)) and float(tg["reached"].iloc[0]) > 0
            reached += int(hit)
            per_arm["hours_to_target"].append(float(tg["hours_mean"].iloc[0]) if hit else math.nan)
        for metric, label in metrics:
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
def projection(data: ComparisonData, fixed: str = "fixed", reference: str = "awnn", max_layers: int | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
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
                if ph == "selection" and data.depends_on(s) and not len(t):
                    continue  # no search of its own by design (fixedplus): its selection is the arm it derives from
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
        n = len(retried)
        out.append(f"{n} trial{'s were' if n > 1 else ' was'} retried after a failure (an error in the trial, or its worker or node lost) and "
                   f"continued from {'their' if n > 1 else 'its'} last checkpoint: {which}; the lost attempts' compute is counted.")
    est = data.runs[data.runs["cost_estimated"]] if len(data.runs) else data.runs
    if len(est):
        out.append(f"{len(est)} runs have no recorded device_hours; their cost is estimated from their last train_seconds.")
    bad = trials[~trials["status"].isin(("ok",))] if len(trials) else trials
    if len(bad):
        by_design = (bad["status"] == "stopped") & (bad["phase"] == "selection") & bad["strategy"].map(data.stops_early)
        bad = bad[~by_design]
    for _, r in bad.iterrows():
        what = {"diverged": "diverged (non-finite loss)", "width_capped": "hit max_width (scored, selectable)",
                "failed": "failed", "stopped": "was stopped early", "interrupted": "was interrupted and not re-run",
                "running": "has no final status"}.get(r["status"], r["status"])
        err = f": {r['error']}" if r["error"] else ""
        out.append(f"{r['strategy']} {r['phase']} trial {r['trial_key']} {what}; its {r['device_hours']:.4g} device-hours are counted{err}")
    return out


