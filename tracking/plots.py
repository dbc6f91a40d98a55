"""The report's PNG plots (matplotlib, Agg; no version metadata, so the same data gives the same bytes)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from . import analysis as A
from . import contract as C
from .fmt import PHASE_LABEL, _finite, fh


PLOTS = {
    "anytime": "anytime.png",
    "cost": "cost.png",
    "widths": "widths.png",
    "accuracy_width": "accuracy_width.png",
    "projection": "projection.png",
    "accuracy_cost": "accuracy_cost.png",
    "truncation": "truncation.png",
    "budget_curve": "budget_curve.png",
}


# --------------------------------------------------------------- plotting
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
    return plt


FAMILY_COLORS = {"fixed": "#1f77b4", "awnn": "#d62728", "tpe": "#2ca02c", "asha": "#9467bd", "random": "#ff7f0e", "awnn-asha": "#e377c2",
                 "fixedplus": "#17becf"}
LINESTYLES = ["-", "--", ":", "-."]


def _colors(strategies: list[str]) -> dict[str, str]:
    """One colour per family (the arms of a family share it; `_linestyle` tells repeats apart)."""
    palette = ["#8c564b", "#7f7f7f", "#bcbd22"]
    out, extra = {}, {}
    for s in strategies:
        fam = A.arm_family(s)
        if fam not in FAMILY_COLORS and fam not in extra:
            extra[fam] = palette[len(extra) % len(palette)]
        out[s] = FAMILY_COLORS.get(fam) or extra[fam]
    return out


def _linestyle(arm: str) -> str:
    m = re.fullmatch(r".+\.r(\d+)", arm)
    return LINESTYLES[(int(m.group(1)) - 1) % len(LINESTYLES)] if m else "-"


def _save(fig, path: Path) -> None:
    fig.savefig(path, format="png", metadata={"Software": None}, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _clip_percent(ax, values) -> None:
    """An accuracy axis (in %) from just below the lowest value shown to 100%, never past it."""
    v = np.asarray([x for x in values if _finite(x)], dtype=float)
    if len(v):
        ax.set_ylim(max(0.0, math.floor(v.min() - max(1.0, 0.05 * (100 - v.min())))), 100.0)


def _log_x(ax) -> None:
    """A log-scale cost axis with labels at 1, 2 and 5 of each decade (a range inside one decade still has some)."""
    from matplotlib.ticker import LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_anytime(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    colors = _colors(a.data.strategies)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    any_line = False
    shown: list[float] = []
    for s in a.data.strategies:
        d = a.anytime[a.anytime["strategy"] == s]
        if not len(d):
            continue
        ok = d[np.isfinite(d["mean"]) & (d["device_hours"] > 0)]
        if not len(ok):
            continue
        any_line = True
        shown += (100 * ok["mean"]).tolist() + ((100 * ok["q10"]).tolist() if d["order"].iloc[0] != "actual" else [])
        n = int((a.costs[(a.costs["strategy"] == s) & (a.costs["phase"] == "selection")]["trials"]).sum())
        if d["order"].iloc[0] == "actual":  # one order, the one the trials ran in: a step per finished trial
            ax.plot(ok["device_hours"], 100 * ok["mean"], color=colors[s], linestyle=_linestyle(s), drawstyle="steps-post", linewidth=1.2,
                    label=f"{s} ({n} trials, as run)")
        else:
            ax.plot(ok["device_hours"], 100 * ok["mean"], color=colors[s], label=f"{s} ({n} configs, random orders)")
            ax.fill_between(ok["device_hours"], 100 * ok["q10"], 100 * ok["q90"], color=colors[s], alpha=0.15, linewidth=0)
        ax.plot([ok["device_hours"].iloc[-1]], [100 * ok["mean"].iloc[-1]], "o", color=colors[s])
    target = a.target_info.get("target")
    if _finite(target) and any_line:
        ax.axhline(100 * target, color="0.5", linestyle=":", linewidth=1, label=f"target (best - {100 * a.target_info['margin']:g} pp)")
    if not any_line:
        _empty(ax, "no selection trial with a validation score")
    else:
        _log_x(ax)
        _clip_percent(ax, shown + ([100 * target] if _finite(target) else []))
    ax.set_xlabel("cumulative selection cost (device-hours, log scale)")
    ax.set_ylabel("best inner-validation accuracy (%)")
    kinds = set(a.anytime["order"]) if len(a.anytime) else set()
    title = "Any-time curves: " + "; ".join(
        ([f"grids: mean and 10-90% band over {a.settings['n_orders']} random orders"] if "random" in kinds else [])
        + (["other strategies: the order their trials ran"] if "actual" in kinds else []))
    ax.set_title(title if kinds else "Any-time curves", fontsize=9)
    if any_line and len(a.data.strategies) > 4:
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif any_line:
        ax.legend(frameon=False, fontsize=8, loc="lower right")
    _save(fig, path)


def plot_cost(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    c = a.costs
    strategies = [s for s in a.data.strategies if len(c) and (c["strategy"] == s).any()]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(strategies) + 1.5), 3.4))
    if not strategies:
        _empty(ax, "no runs")
        _save(fig, path)
        return
    x = np.arange(len(strategies))
    bottoms = np.zeros(len(strategies))
    total_max = max(float(c[(c["strategy"] == s) & (c["phase"] == "total")]["device_hours"].sum()) for s in strategies) or 1e-9
    for ph, color, hatch in (("selection", "#4c72b0", None), ("assessment", "#dd8452", "//")):
        vals, ns = [], []
        for s in strategies:
            r = c[(c["strategy"] == s) & (c["phase"] == ph)]
            vals.append(float(r["device_hours"].iloc[0]) if len(r) else 0.0)
            ns.append(int(r["runs"].iloc[0]) if len(r) else 0)
        vals = np.array(vals)
        ax.bar(x, vals, bottom=bottoms, color=color, hatch=hatch, edgecolor="white", label=PHASE_LABEL[ph], width=0.55)
        for i, (v, n) in enumerate(zip(vals, ns)):
            if v > 0.2 * total_max:  # label segments tall enough to hold it; the table has every number
                ax.text(x[i], bottoms[i] + v / 2, f"{fh(v)}\n({n} runs)", ha="center", va="center", fontsize=7, color="white")
        bottoms = bottoms + vals
    many = len(strategies) > 4
    for i, b in enumerate(bottoms):
        ax.text(x[i], b, fh(b) if many else f"{fh(b)} device-h", ha="center", va="bottom", fontsize=7 if many else 8)
    ax.set_xticks(x, strategies, fontsize=8 if len(strategies) > 4 else None)
    ax.set_ylabel("device-hours")
    ax.set_ylim(0, max(bottoms.max() * 1.15, 1e-9))
    ax.set_title("Search cost per strategy and phase" + (" (ASHA: stopped trials' partial cost included)"
                                                          if any(a.data.stops_early(s) for s in strategies) else ""), fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    _save(fig, path)


def plot_widths(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    runs = a.data.runs
    hist = a.data.histories
    adaptive = a.data.adaptive_arms()
    fig, axes = plt.subplots(1, max(1, len(adaptive)), figsize=(6.4 if len(adaptive) <= 1 else 4.2 * len(adaptive), 3.4), squeeze=False)
    if not adaptive or not len(hist):
        _empty(axes[0, 0], "no AWNN runs with a width history in this comparison")
        _save(fig, path)
        return
    from matplotlib.ticker import MaxNLocator

    wt = hist[hist["key"] == "width_total"]
    cmap = plt.get_cmap("viridis")
    for ax, s in zip(axes[0], adaptive):
        r = runs[(runs["strategy"] == s) & (runs["model"] == "awnn")]
        layers = sorted(int(v) for v in r["hidden_layers"].dropna().unique())
        shade = {L: (cmap(i / max(1, len(layers) - 1) * 0.8) if len(layers) > 1 else "#4c72b0") for i, L in enumerate(layers)}
        labelled = set()
        for _, row in r.iterrows():
            h = wt[wt["run_id"] == row["run_id"]]
            if not len(h):
                continue
            L = int(row["hidden_layers"]) if _finite(row["hidden_layers"]) else 1
            ass = row["phase"] == "assessment"
            key = (ass, L)
            label = None
            if key not in labelled:
                labelled.add(key)
                label = f"{'re-training' if ass else 'selection'}, {L} layer{'s' if L > 1 else ''}"
            ax.plot(h["step"], h["value"], color="#d62728" if ass else shade[L], linewidth=1.6 if ass else 0.8, alpha=0.9 if ass else 0.6,
                    marker="." if len(h) < 5 else None, label=label)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("total learned width (neurons)")
        ax.set_title(f"{s}: width over training ({len(r)} runs)", fontsize=9)
        ax.legend(frameon=False, fontsize=7)
    _save(fig, path)


def _marker(arm: str) -> str:
    return {"awnn": "^", "tpe": "s", "asha": "D", "random": "x", "awnn-asha": "v", "fixedplus": "P"}.get(A.arm_family(arm), "o")


def _total_width(row) -> float:
    if row["model"] == "awnn":
        w = row["widths_at_best"] if isinstance(row["widths_at_best"], list) else row["widths"]
        return float(sum(w)) if isinstance(w, list) and w else float(row["final_width_total"])
    return float(row["width"] * row["hidden_layers"]) if _finite(row["width"]) and _finite(row["hidden_layers"]) else math.nan


def plot_accuracy_width(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    trials = a.data.trials()
    colors = _colors(a.data.strategies)
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), sharex=True)
    panels = (("selection", "best_val_acc", "selection: inner-validation accuracy"), ("assessment", "test_acc", "re-training: test accuracy"))
    for ax, (ph, metric, title) in zip(axes, panels):
        drawn = False
        shown: list[float] = []
        for s in a.data.strategies:
            t = trials[(trials["strategy"] == s) & (trials["phase"] == ph)] if len(trials) else trials
            if not len(t):
                continue
            t = t[t["status"].isin(C.SELECTABLE)]
            x = t.apply(_total_width, axis=1) if len(t) else pd.Series(dtype=float)
            y = 100 * t[metric].astype(float) if len(t) else pd.Series(dtype=float)
            keep = np.isfinite(x) & np.isfinite(y)
            if keep.any():
                drawn = True
                shown += y[keep].tolist()
                ax.scatter(x[keep], y[keep], s=18, color=colors[s], alpha=0.7, label=f"{s} (n={int(keep.sum())})", marker=_marker(s), clip_on=False)
        if drawn:
            from matplotlib.ticker import NullFormatter, ScalarFormatter

            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            _clip_percent(ax, shown)
            ax.legend(frameon=False, fontsize=7)
        else:
            _empty(ax, "no scored runs")
        ax.set_xlabel("total width (neurons)")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(title, fontsize=9)
    fig.text(0.5, -0.04, "fixed: width x hidden layers; AWNN: learned width at the selected epoch", ha="center", fontsize=7, color="0.4")
    _save(fig, path)


def plot_projection(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    p = a.projection
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    if not len(p):
        _empty(ax, "projection not applicable: " + str(a.projection_info.get("reason", "")))
        _save(fig, path)
        return
    ax.plot(p["layers"], p["fixed_hours"], "o-", color="#1f77b4", label=f"fixed, a width per layer ({a.projection_info['W']}^L x {a.projection_info['fixed_other_configs']:g} configs)")
    ax.plot(p["layers"], p["fixed_configs_shared_width"] * p["fixed_hours_per_trial"], "o--", color="#1f77b4", alpha=0.5, label="fixed, one width shared by all layers")
    ax.plot(p["layers"], p["awnn_hours"], "^-", color="#d62728", label=f"AWNN ({a.projection_info['awnn_configs_per_layers']:g} configs)")
    ax.set_yscale("log")
    ax.set_xticks(p["layers"])
    ax.set_xlabel("hidden layers L")
    ax.set_ylabel("selection device-hours (projected)")
    ax.set_title("PROJECTION from measured per-trial costs, not a measurement", fontsize=9)
    ax.legend(frameon=False, fontsize=7)
    _save(fig, path)


def plot_accuracy_cost(a: A.Analysis, path: Path) -> None:
    """Test accuracy of each arm's selected config against the arm's total
    device-hours (selection + re-training).  An arm run once: its mean with
    the std over its re-training runs.  A family run several times: each
    repeat faint, and the family's mean with the std across its repeats on
    both axes."""
    plt = _plt()
    colors = _colors(a.data.strategies)
    c, st = a.costs, a.strategies.set_index("strategy") if len(a.strategies) else a.strategies
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    shown: list[float] = []
    for family, arms in a.data.families.items():
        pts = []
        for s in arms:
            hours = float(c[(c["strategy"] == s) & (c["phase"] == "total")]["device_hours"].sum()) if len(c) else math.nan
            acc = float(st.loc[s, "test_acc_mean"]) if s in st.index else math.nan
            if _finite(acc) and hours > 0:
                pts.append((s, hours, 100 * acc, 100 * float(st.loc[s, "test_acc_std"]) if _finite(st.loc[s, "test_acc_std"]) else 0.0))
        if not pts:
            continue
        color, marker = colors[pts[0][0]], _marker(pts[0][0])
        if len(pts) == 1:
            s, x, y, err = pts[0]
            ax.errorbar([x], [y], yerr=[err], fmt=marker, color=color, capsize=3, clip_on=False,
                        label=f"{s} (+- std over its re-training runs)")
            shown += [y - err]
            continue
        xs, ys = np.array([p[1] for p in pts]), np.array([p[2] for p in pts])
        ax.scatter(xs, ys, s=14, color=color, alpha=0.35, marker=marker, clip_on=False)
        ax.errorbar([xs.mean()], [ys.mean()], xerr=[xs.std(ddof=1)], yerr=[ys.std(ddof=1)], fmt=marker, color=color, capsize=3, clip_on=False,
                    label=f"{family} (mean +- std over {len(pts)} repeats)")
        shown += ys.tolist() + [ys.mean() - ys.std(ddof=1)]
    if not shown:
        _empty(ax, "no arm with a finished re-training run")
    else:
        _log_x(ax)
        _clip_percent(ax, shown)
        ax.legend(frameon=False, fontsize=7, loc="lower right")
    ax.set_xlabel("total search cost (device-hours: selection + re-training, log scale)")
    ax.set_ylabel("test accuracy of the selected config (%)")
    ax.set_title("Accuracy bought against search cost (up and left is better)", fontsize=9)
    _save(fig, path)


def plot_truncation(a: A.Analysis, path: Path) -> None:
    """Paper Fig. 6 (left): test accuracy against the % of each adaptive
    layer's neurons removed after training, per AWNN arm (mean over its
    re-training runs, min-max band)."""
    plt = _plt()
    t = a.truncation
    colors = _colors(a.data.strategies)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    shown: list[float] = []
    for arm in (list(dict.fromkeys(t["strategy"])) if len(t) else []):
        g = t[t["strategy"] == arm].sort_values("kept_pct", ascending=False)
        cut = 100 - g["kept_pct"]
        ax.plot(cut, 100 * g["acc_mean"], marker="o", color=colors.get(arm, "#d62728"), linestyle=_linestyle(arm),
                label=f"{arm} (mean of {int(g['n'].max())} re-trained models; band: min-max)", clip_on=False)
        ax.fill_between(cut, 100 * g["acc_min"], 100 * g["acc_max"], color=colors.get(arm, "#d62728"), alpha=0.15, linewidth=0)
        shown += (100 * g["acc_min"]).tolist()
        info = a.truncation_info.get(arm)
        if info and info["largest_cut_pct"] > 0:
            ax.axvline(info["largest_cut_pct"], color=colors.get(arm, "#d62728"), linestyle=":", linewidth=1)
    if not shown:
        _empty(ax, "no truncation curves: no re-trained adaptive MLP in this comparison")
    else:
        _clip_percent(ax, shown)
        ax.set_xlim(0, 90)
        ax.legend(frameon=False, fontsize=7, loc="lower left")
    ax.set_xlabel("neurons removed from each adaptive layer after training (%)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Post-hoc truncation (paper Fig. 6 left); dotted: largest cut within 1 point", fontsize=9)
    _save(fig, path)


def plot_budget_curve(curve: dict, path: Path) -> None:
    """summary.json's `budget_curve`: each arm's selected config's best inner-validation accuracy against
    the epochs every selection trial trained (tracking/budget_curve.py), the shares of the table marked."""
    plt = _plt()
    arms = list((curve.get("curve") or {}))
    colors = _colors(arms)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    shown: list[float] = []
    for arm in arms:
        c = curve["curve"][arm]
        pts = [(e, 100 * v) for e, v in zip(c["epochs"], c["best_val_acc"]) if _finite(v)]
        if not pts:
            continue
        ax.plot([e for e, _ in pts], [v for _, v in pts], color=colors[arm], linestyle=_linestyle(arm), drawstyle="steps-post", label=arm)
        cuts = [(r["epochs"], 100 * r["best_val_acc"]) for r in curve["arms"].get(arm, []) if _finite(r["best_val_acc"])]
        ax.plot([e for e, _ in cuts], [v for _, v in cuts], "o", color=colors[arm], markersize=4)
        shown += [v for _, v in pts]
    if not shown:
        _empty(ax, "no selection trial with per-epoch validation records")
    else:
        _clip_percent(ax, shown)
        ax.legend(frameon=False, fontsize=8, loc="lower right")
    ax.set_xlabel("epochs every selection trial trained (dots: 1/8, 1/4, 1/2, all)")
    ax.set_ylabel("best inner-validation accuracy (%)")
    ax.set_title("The verdict against the budget: each arm's selected config", fontsize=9)
    _save(fig, path)
