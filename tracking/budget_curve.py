"""The verdict against the budget (issue #30): what each arm would have
selected, how well, and at what selection cost, had every selection trial
stopped after 1/8, 1/4, 1/2 or all of its epochs - rebuilt from the
per-epoch records MLflow holds for each selection trial run (`val_acc`,
`val_loss`, `train_seconds`; docs/report.md "Verdict against the budget").

* A trial with E epochs (its config's `epochs`: the budget's) stopped at
  the share f of them stops at epoch c = max(1, ceil(f x E)).  Before its
  last epoch it was still training, so its state at c is that of its records
  up to c; at or after its last epoch it is its final metrics and status
  (only `ok` and `width_capped` trials can be selected, as in the search).
* Its best epoch up to c follows the trainer's rule (awnn/train.py): the
  highest val_acc; equal accuracy moves it to the lower val_loss, or to the
  later epoch under `best_epoch_ties=later`; `select_metric=loss`: the
  lowest val_loss first.
* Each arm selects as search/protocol.select_best does (reimplemented here:
  tracking never imports search): the highest best val_acc, ties by the
  lower best val_loss, then the grid index (`select_metric=loss`: loss
  first).  Under a cross-validated protocol, fold 0's trials (as the
  any-time curves); the cost sums every fold.
* Device-hours at the cut: the trial's device-hours x train_seconds at c /
  train_seconds at its last epoch (the per-epoch training-time records); a
  trial without them: x c / epochs_run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .contract import SELECTABLE, Metric, fold_of_key
from .reader import ComparisonData, load_histories
from .savings import fx, rounded

__all__ = ["FRACTIONS", "MOVING_RATIO_CHANGE", "MOVING_ACC_GAIN", "HISTORY_KEYS", "BudgetRecords", "readable_store", "load_budget_records", "budget_curve", "still_moving"]

FRACTIONS = (0.125, 0.25, 0.5, 1.0)  # shares of each trial's epochs
MOVING_RATIO_CHANGE = 0.10  # an arm's savings "move" when full / half differs from 1 by more than this
MOVING_ACC_GAIN = 0.01  # an arm's selection "moves" when its best inner-validation accuracy rises by more (1 point: the verdict's tolerance)
HISTORY_KEYS = (Metric.VAL_ACC, Metric.VAL_LOSS, Metric.TRAIN_SECONDS)
CURVE_POINTS = 200  # at most this many epochs per arm in summary.json's curve (every epoch below it)
MAX_HISTORY_POINTS = 2500  # MLflow's bulk read returns at most this many evenly spaced epochs per run


@dataclass
class BudgetRecords:
    """What the budget curve and the paper-budget projection read beyond a ComparisonData."""

    histories: pd.DataFrame  # run_id, key, step, value of HISTORY_KEYS for every selection run
    root_params: dict[str, str] = field(default_factory=dict)  # the comparison run's params
    reason: str = ""  # why nothing could be read (empty when read)


def readable_store(uri: str) -> bool:
    """A store worth opening: not a SQLite file that does not exist (opening one would create it)."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):]).is_file()
    return "://" in uri


def load_budget_records(data: ComparisonData) -> BudgetRecords:
    """The per-epoch records of the comparison's selection runs (every run of a
    trial: a resumed trial's records are spread over its runs) and its run's
    params, read from the store `data` was loaded from (tracking.report.write_report
    passes them to tracking.summary.summarize)."""
    cols = ["run_id", "key", "step", "value"]
    runs = data.runs[data.runs["phase"] == "selection"] if len(data.runs) else data.runs
    if not readable_store(data.tracking_uri):
        return BudgetRecords(pd.DataFrame(columns=cols), reason="the tracking store cannot be read")
    from .contract import client

    params = dict(client(data.tracking_uri).get_run(data.comparison["run_id"]).data.params)
    hist = load_histories(data.tracking_uri, runs["run_id"].tolist(), HISTORY_KEYS, max_points=MAX_HISTORY_POINTS) if len(runs) else pd.DataFrame(columns=cols)
    return BudgetRecords(hist, params)


# ------------------------------------------------------------ one trial
@dataclass
class _Trial:
    key: str
    index: float  # grid index (inf when unknown)
    fold: int | None
    status: str
    by_loss: bool  # select_metric=loss
    epochs: float  # E: the epochs the budget gave it
    last: int  # its last epoch (epochs_run); 0: none
    device_hours: float
    final_acc: float
    final_loss: float
    config: dict
    steps: np.ndarray  # epochs with a val_acc record, increasing
    best_acc: np.ndarray  # the trainer's best val_acc up to each of `steps` (NaN: no best epoch yet)
    best_loss: np.ndarray  # val_loss at that best epoch
    ts_steps: np.ndarray  # epochs with a train_seconds record
    ts: np.ndarray  # cumulative training seconds at them

    def at(self, cut: int) -> tuple[float, float, bool, float]:
        """(best val acc, its val loss, selectable, share of its device-hours) had it stopped after epoch `cut`."""
        if self.last <= 0 or cut >= self.last:
            ok = self.status in SELECTABLE and math.isfinite(self.final_acc)
            return self.final_acc, self.final_loss, ok, 1.0
        i = int(np.searchsorted(self.steps, cut, side="right")) - 1
        acc, loss = (float(self.best_acc[i]), float(self.best_loss[i])) if i >= 0 else (math.nan, math.nan)
        j = int(np.searchsorted(self.ts_steps, cut, side="right")) - 1
        total = float(self.ts[-1]) if len(self.ts) and self.ts_steps[-1] >= self.last else 0.0
        share = float(self.ts[j]) / total if j >= 0 and total > 0 else cut / self.last  # no record up to the cut: by epochs
        return acc, loss, math.isfinite(acc), min(max(share, 0.0), 1.0)


def _running_best(acc: np.ndarray, loss: np.ndarray, by_loss: bool, later: bool) -> tuple[np.ndarray, np.ndarray]:
    """The trainer's best epoch after each epoch (awnn/train.py `_end_epoch`): its val_acc and val_loss."""
    b_acc, b_loss, found = -1.0, math.inf, False
    out_a, out_l = np.full(len(acc), np.nan), np.full(len(acc), np.nan)
    for i, (a, l) in enumerate(zip(acc.tolist(), loss.tolist())):
        if by_loss:
            better = l < b_loss or (l == b_loss and (later or a > b_acc))
        else:
            better = a > b_acc or (a == b_acc and (later or l < b_loss))
        if better:
            b_acc, b_loss, found = a, l, True
        if found:
            out_a[i], out_l[i] = max(b_acc, 0.0), b_loss
    return out_a, out_l


def _series(h: dict[str, np.ndarray], key: str) -> tuple[np.ndarray, np.ndarray]:
    """One value per epoch of `key` in a trial's records `h` (arrays key, step, value, o: the run's order):
    the latest run's, and of its values at that epoch the largest (a run's final train_seconds shares its last step)."""
    m = h["key"] == key
    if not m.any():
        return np.zeros(0, dtype=int), np.zeros(0)
    step, o, v = h["step"][m], h["o"][m], h["value"][m]
    i = np.lexsort((v, o, step))  # by epoch, then run, then value
    step, v = step[i], v[i]
    last = np.append(step[1:] != step[:-1], True)
    return step[last].astype(int), v[last]


def _num(x: Any, default: float = math.nan) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _trials(data: ComparisonData, arm: str, by_run: dict[str, dict[str, np.ndarray]], sweep_epochs: float) -> list[_Trial]:
    """The arm's selection trials with their per-epoch records (`by_run`: run id -> arrays key, step, value)."""
    t = data.trials()
    sel = t[(t["strategy"] == arm) & (t["phase"] == "selection")] if len(t) else t
    runs = data.runs[(data.runs["strategy"] == arm) & (data.runs["phase"] == "selection")] if len(data.runs) else data.runs
    run_ids = {k: g.sort_values("start_time", kind="stable")["run_id"].tolist() for k, g in runs.groupby("trial_key", sort=False)} if len(runs) else {}
    out = []
    for _, r in sel.iterrows():
        # every run's records, `o` its order: a later run's record of an epoch replaces an earlier run's
        parts = [(by_run[rid], i) for i, rid in enumerate(run_ids.get(r["trial_key"], [])) if rid in by_run]
        h = {c: np.concatenate([p[c] for p, _ in parts]) if parts else np.zeros(0) for c in ("key", "step", "value")}
        h["o"] = np.concatenate([np.full(len(p["step"]), i) for p, i in parts]) if parts else np.zeros(0)
        cfg = r["config"] if isinstance(r["config"], dict) else {}
        by_loss, later = cfg.get("select_metric") == "loss", cfg.get("best_epoch_ties") == "later"
        steps, acc = _series(h, Metric.VAL_ACC)
        l_steps, loss = _series(h, Metric.VAL_LOSS)
        loss = pd.Series(loss, index=l_steps).reindex(steps).to_numpy(dtype=float) if len(steps) else loss
        best_acc, best_loss = _running_best(acc, loss, by_loss, later)
        ts_steps, ts = _series(h, Metric.TRAIN_SECONDS)
        last = _num(r["epochs_run"], float(steps[-1]) if len(steps) else 0.0)
        out.append(_Trial(
            key=str(r["trial_key"]), index=_num(r["grid_index"], math.inf), fold=fold_of_key(r["trial_key"]), status=str(r["status"]),
            by_loss=by_loss, epochs=_num(cfg.get("epochs"), _num(sweep_epochs, last)), last=int(last), device_hours=_num(r["device_hours"], 0.0),
            final_acc=_num(r["best_val_acc"]), final_loss=_num(r["best_val_loss"], math.inf), config=cfg, steps=steps, best_acc=best_acc,
            best_loss=best_loss, ts_steps=ts_steps, ts=ts))
    return out


def _select(states: list[tuple[_Trial, float, float, bool]]) -> tuple[_Trial, float] | None:
    """The selected trial and its best val acc (search/protocol.select_best's rule), or None."""
    def rank(s):
        t, acc, loss, _ = s
        loss = loss if math.isfinite(loss) else math.inf
        return (loss, -acc, t.index, t.key) if t.by_loss else (-acc, loss, t.index, t.key)

    ok = [s for s in states if s[3]]
    if not ok:
        return None
    best = min(ok, key=rank)
    return best[0], best[1]


def _at_cut(trials: list[_Trial], scored: list[_Trial], cut_of) -> tuple[tuple[_Trial, float] | None, float]:
    """(selected trial and its best val acc, selection device-hours) with each trial stopped at cut_of(trial)."""
    states, hours = [], 0.0
    scored_keys = {id(t) for t in scored}
    for t in trials:
        acc, loss, ok, share = t.at(cut_of(t))
        hours += t.device_hours * share
        if id(t) in scored_keys:
            states.append((t, acc, loss, ok))
    return _select(states), hours


# ------------------------------------------------------------ the curve
def budget_curve(data: ComparisonData, records: BudgetRecords, baseline: str | None,
                 dims: dict[str, dict[str, list]] | None = None) -> dict[str, Any]:
    """summary.json's `budget_curve`: per arm with selection trials of its own,
    one row per share of the epochs (`fraction`, `epochs`, `selected_key`,
    `selected_config` (the grid's varying keys, `dims`), `best_val_acc`,
    `selection_device_hours`), and its `curve` (best val acc after e epochs);
    `savings` per other arm and share against the `baseline`, as everywhere
    (tracking/savings.py: the baseline's selection device-hours / the arm's,
    rounded)."""
    dims = dims or {}
    out: dict[str, Any] = {"fractions": list(FRACTIONS), "arms": {}, "curve": {}, "baseline": baseline,
                           "savings": {}, "cv_fold0": [], "note": records.reason}
    hist = records.histories
    by_run = {str(rid): {"key": g["key"].to_numpy(dtype=object), "step": g["step"].to_numpy(dtype=np.int64), "value": g["value"].to_numpy(dtype=float)}
              for rid, g in hist.groupby("run_id", sort=False)} if len(hist) else {}
    without = 0
    for arm in data.strategies:
        sw = data.sweeps[(data.sweeps["strategy"] == arm) & (data.sweeps["phase"] == "selection")] if len(data.sweeps) else data.sweeps
        trials = _trials(data, arm, by_run, float(sw["epochs"].iloc[0]) if len(sw) and "epochs" in sw else math.nan)
        if not trials:
            continue
        without += sum(1 for t in trials if not len(t.steps) and t.last > 0)
        folds = {t.fold for t in trials}
        scored = [t for t in trials if t.fold in (None, 0)] if folds - {None} else trials
        e_max = int(max(max(t.epochs, t.last) for t in trials))
        rows = []
        for f in FRACTIONS:
            chosen, hours = _at_cut(trials, scored, lambda t, f=f: max(1, math.ceil(f * t.epochs - 1e-9)))
            t, acc = chosen if chosen else (None, math.nan)
            rows.append({"fraction": f, "epochs": max(1, math.ceil(f * e_max - 1e-9)), "selected_key": t.key if t else None,
                         "selected_config": {k: t.config.get(k) for k in dims.get(arm, {}) if k in t.config} if t else None,
                         "best_val_acc": acc, "selection_device_hours": hours})
        out["arms"][arm] = rows
        pts = range(1, e_max + 1) if e_max <= CURVE_POINTS else sorted({*np.linspace(1, e_max, CURVE_POINTS).round().astype(int).tolist(),
                                                                          *(r["epochs"] for r in rows)})
        curve = [(e, _at_cut(trials, scored, lambda t, e=e: e)[0]) for e in pts]
        out["curve"][arm] = {"epochs": [e for e, _ in curve], "best_val_acc": [c[1] if c else math.nan for _, c in curve]}
        out["cv_fold0"] += [arm] if folds - {None} else []
    if without:
        out["note"] = (out["note"] + "; " if out["note"] else "") + f"{without} selection trials have no per-epoch records (counted only at their end)"
    if baseline in out["arms"]:
        for arm, rows in out["arms"].items():
            if arm != baseline:
                out["savings"][arm] = [{"fraction": a["fraction"], "value": rounded(b["selection_device_hours"] / a["selection_device_hours"])
                                        if a["selection_device_hours"] > 0 else math.nan} for a, b in zip(rows, out["arms"][baseline])]
    return out


def _ranks(rows: dict[str, dict]) -> dict[str, int]:
    """Rank of each arm by best val acc (1 = best; equal accuracy, equal rank; none: last)."""
    acc = {arm: _num(r["best_val_acc"], -math.inf) for arm, r in rows.items()}
    return {arm: 1 + sum(1 for b in acc.values() if b > a) for arm, a in acc.items()}


def _order(rows: dict[str, dict]) -> str:
    """The arms from best to worst, tied arms joined by '=' ("fixed = asha > awnn"): two
    rankings that differ only in a tie read differently."""
    ranks = _ranks(rows)
    groups = [[arm for arm in rows if ranks[arm] == r] for r in sorted(set(ranks.values()))]
    return " > ".join(" = ".join(g) for g in groups)


def still_moving(curve: dict[str, Any], half: float = 0.5, full: float = 1.0) -> tuple[bool | None, str, list[str]]:
    """(still moving?, the report's one line, the reasons) between `half` and
    `full` of the epochs: moving when an arm's selected config changes to one
    with a better best inner-validation accuracy (a change among configs tied
    at the same accuracy, re-broken by validation loss, as when the task
    saturates at 100%, is not), or its selected config's best
    inner-validation accuracy rises by more than MOVING_ACC_GAIN (the same
    config still learning: SpiralHard's AWNN at 75 of 150 epochs), the arms'
    ranking by best inner-validation accuracy changes, or an arm's savings
    against the baseline change by more than MOVING_RATIO_CHANGE (relative)."""
    at = {f: {arm: next(r for r in rows if r["fraction"] == f) for arm, rows in curve["arms"].items()} for f in (half, full)}
    if not at[full]:
        return None, "No verdict against the budget: no arm has selection trials with per-epoch records.", []
    reasons = []
    for arm in at[full]:
        a, b = at[half][arm]["selected_key"], at[full][arm]["selected_key"]
        acc_a, acc_b = _num(at[half][arm]["best_val_acc"]), _num(at[full][arm]["best_val_acc"])
        tie = math.isfinite(acc_a) and math.isfinite(acc_b) and acc_b <= acc_a
        if a != b and not tie:
            reasons.append(f"{arm}'s selected config changed ({a or 'none'} -> {b or 'none'})")
        elif math.isfinite(acc_a) and math.isfinite(acc_b) and acc_b - acc_a > MOVING_ACC_GAIN:
            reasons.append(f"{arm}'s best inner-validation accuracy rose {100 * (acc_b - acc_a):.1f} points "
                           f"({100 * acc_a:.2f}% -> {100 * acc_b:.2f}%)")
    if len(at[full]) > 1 and _ranks(at[half]) != _ranks(at[full]):
        reasons.append(f"the arms' ranking by best inner-validation accuracy changed ({_order(at[half])} -> {_order(at[full])})")
    baseline = curve.get("baseline")
    for arm, rows in (curve.get("savings") or {}).items():
        ratio = {r["fraction"]: _num(r["value"]) for r in rows}
        change = abs(ratio[full] / ratio[half] - 1) if ratio.get(half, 0) > 0 and math.isfinite(ratio.get(full, math.nan)) else math.nan
        if math.isfinite(change) and change > MOVING_RATIO_CHANGE:
            reasons.append(f"{arm}'s savings vs {baseline} moved by {100 * change:.0f}% ({fx(ratio[half])} -> {fx(ratio[full])})")
    e_half = ", ".join(f"{arm} {at[half][arm]['epochs']}" for arm in at[half])
    e_full = ", ".join(f"{arm} {at[full][arm]['epochs']}" for arm in at[full])
    span = f"between half the epochs ({e_half} a trial) and all of them ({e_full})"
    if reasons:
        return True, f"Still moving: {span}, " + "; ".join(reasons) + ": a larger budget may change the verdict.", reasons
    moved = (f", and no arm's savings vs {baseline} moved by more than {100 * MOVING_RATIO_CHANGE:.0f}%" if curve.get("savings") else "")
    return False, (f"Stable between half and full budget: {span}, no arm's selection improved by more than "
                   f"{100 * MOVING_ACC_GAIN:.0f} point, the arms' ranking by best inner-validation accuracy held{moved}."), []
