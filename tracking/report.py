"""The cost report: report.md, a self-contained report.html, summary.json
and PNG plots, built from MLflow alone (through tracking.analysis).

    paths = write_report("sqlite:///mlflow.db", "out/", comparison="spiral-20260101-...")

The same tracking store always gives the same files (no timestamps of
generation, seeded bootstrap and orders, PNGs without version metadata), so
a report rebuilt later, or elsewhere against the same server, can be diffed.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import analysis as A
from . import contract as C

__all__ = ["write_report", "build_document", "render_markdown", "render_html", "validate_summary", "log_report", "SUMMARY_KEYS", "PLOTS"]

# keys summary.json always has (docs/report.md describes each)
SUMMARY_KEYS = {
    "schema": str,
    "comparison": str,
    "experiment": str,
    "task": (str, type(None)),
    "budget": (str, type(None)),
    "state": str,
    "reference": str,
    "strategies": dict,
    "device_hours": dict,
    "gpu_hours": dict,
    "test_acc_mean": dict,
    "test_acc_std": dict,
    "savings_ratio": (float, int, type(None)),
    "savings_ratio_ci": list,
    "savings_ratio_total": (float, int, type(None)),
    "savings_ratio_total_ci": list,
    "savings": dict,
    "savings_by_reference": dict,
    "savings_notes": list,
    "arms": list,
    "families": dict,
    "repeats": int,
    "repeat_spread": dict,
    "overhead": dict,
    "target": dict,
    "projection": dict,
    "problems": list,
    "settings": dict,
    "files": dict,
}
STRATEGY_KEYS = ("family", "repeat", "order", "configs", "trials", "runs", "status_counts", "device_hours", "gpu_hours", "selected_key", "test_acc_mean", "test_acc_std", "test_runs", "width")
PLOTS = {
    "anytime": "anytime.png",
    "cost": "cost.png",
    "widths": "widths.png",
    "accuracy_width": "accuracy_width.png",
    "projection": "projection.png",
}
MAX_PROBLEMS = 40  # lines of the Problems list in the report; summary.json has them all
PHASE_LABEL = {"selection": "selection", "assessment": "re-training", "total": "total"}


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
    for key in ("savings_ratio_ci", "savings_ratio_total_ci"):
        if isinstance(summary.get(key), list) and len(summary[key]) != 2:
            errs.append(f"key {key!r}: expected [low, high]")
    return errs


# -------------------------------------------------------------- formatting
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and math.isfinite(float(x))


def fh(x: Any) -> str:
    """Device-hours with 3 significant digits."""
    return f"{float(x):.3g}" if _finite(x) else "n/a"


def fpct(x: Any, digits: int = 2) -> str:
    return f"{100 * float(x):.{digits}f}%" if _finite(x) else "n/a"


def fratio(x: Any) -> str:
    return f"{float(x):.2f}x" if _finite(x) else "n/a"


def fsec(x: Any) -> str:
    if not _finite(x):
        return "n/a"
    x = float(x)
    if x < 120:
        return f"{x:.1f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.2f} h"


def fnum(x: Any, fmt: str = ".3g") -> str:
    return format(float(x), fmt) if _finite(x) else "n/a"


def _date(ms: Any) -> str:
    if not _finite(ms):
        return "unknown"
    return _dt.datetime.fromtimestamp(float(ms) / 1000.0, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# --------------------------------------------------------------- plotting
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
    return plt


FAMILY_COLORS = {"fixed": "#1f77b4", "awnn": "#d62728", "tpe": "#2ca02c", "asha": "#9467bd", "random": "#ff7f0e"}
LINESTYLES = ["-", "--", ":", "-."]


def _colors(strategies: list[str]) -> dict[str, str]:
    """One colour per family (the arms of a family share it; `_linestyle` tells repeats apart)."""
    palette = ["#8c564b", "#17becf", "#e377c2", "#7f7f7f", "#bcbd22"]
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


def plot_anytime(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    colors = _colors(a.data.strategies)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    any_line = False
    for s in a.data.strategies:
        d = a.anytime[a.anytime["strategy"] == s]
        if not len(d):
            continue
        ok = d[np.isfinite(d["mean"]) & (d["device_hours"] > 0)]
        if not len(ok):
            continue
        any_line = True
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
        from matplotlib.ticker import LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_formatter(NullFormatter())
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
                                                          if any(A.arm_family(s) in A.EARLY_STOPPING for s in strategies) else ""), fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    _save(fig, path)


def plot_widths(a: A.Analysis, path: Path) -> None:
    plt = _plt()
    runs = a.data.runs
    hist = a.data.histories
    adaptive = [s for s in a.data.strategies if len(runs) and ((runs["strategy"] == s) & (runs["model"] == "awnn")).any()]
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
                marker = {"awnn": "^", "tpe": "s", "asha": "D", "random": "x"}.get(A.arm_family(s), "o")
                ax.scatter(x[keep], y[keep], s=18, color=colors[s], alpha=0.7, label=f"{s} (n={int(keep.sum())})", marker=marker)
        if drawn:
            from matplotlib.ticker import NullFormatter, ScalarFormatter

            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
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


# --------------------------------------------------------------- document
def _strategies_text(d: A.ComparisonData) -> str:
    out = []
    for family, arms in d.families.items():
        out.append(family if arms == [family] else f"{family} ({len(arms)} repeats: {', '.join(arms)})")
    return ", ".join(out)


def _early_stopped(a: A.Analysis) -> str:
    """One sentence on the trials ASHA stopped early (empty when none)."""
    c = a.costs
    rows = c[(c["phase"] == "selection") & c["strategy"].map(lambda s: a.data.family(s) in A.EARLY_STOPPING)] if len(c) else c
    if not len(rows):
        return ""
    trials = a.data.trials()
    parts = []
    for _, r in rows.iterrows():
        t = trials[(trials["strategy"] == r["strategy"]) & (trials["phase"] == "selection") & (trials["status"] == "stopped")]
        parts.append(f"{r['strategy']} {int(r['stopped'])} of {int(r['trials'])} selection trials ({fh(t['device_hours'].sum())} of its {fh(r['device_hours'])} device-hours)")
    return ("ASHA stopped trials early by design: " + "; ".join(parts) + ". A stopped trial's partial device-hours are included in every total, "
            "its status is `stopped`, and it is never selected.")


def _profile_text(d: A.ComparisonData) -> str:
    """The AWNN profile(s) of the comparison's AWNN trials and every choice
    they resolved to, read from the trials' params ('' without AWNN trials)."""
    from awnn.config import PROFILE_KEYS

    configs = [c for c in (d.runs["config"] if len(d.runs) else []) if isinstance(c, dict) and c.get("model") == "awnn"]
    if not configs:
        return ""
    by_profile: dict[str, dict] = {}
    for c in configs:
        by_profile.setdefault(str(c.get("awnn_profile", "not recorded")), c)
    parts = []
    for name, c in by_profile.items():
        if name == "not recorded":
            parts.append("`not recorded` (runs from before profiles existed: they ran the paper-text behaviour)")
            continue
        choices = ", ".join(f"{k}={c[k]}" for k in PROFILE_KEYS if k in c)
        parts.append(f"`{name}` ({choices})")
    return "AWNN profile: " + "; ".join(parts) + ". See the README's \"Profiles\" for what each choice means."


def build_document(a: A.Analysis, summary: dict[str, Any], tracking_hint: str | None = None) -> list[tuple]:
    """The report as a list of blocks: ("h1"|"h2"|"p", text), ("ul", [items]),
    ("table", header, rows), ("img", plot name, alt text)."""
    d, c = a.data, a.data.comparison
    doc: list[tuple] = []
    n_runs = len(d.runs)
    doc.append(("h1", f"AWNN search-cost report: {c['task']} ({c['id']})"))
    doc.append(("p", f"Comparison `{c['id']}` in MLflow experiment `{c['experiment']}`: strategies {_strategies_text(d)}; budget `{c['budget']}`; "
                     f"started {_date(c['start_time'])}; state **{c['state']}**; {n_runs} trial runs in {len(d.sweeps)} sweeps. "
                     f"Every number below is read back from MLflow. Device-hours = training time of every attempt x allocated CPUs "
                     f"({c['cpus_per_trial']:g} per trial)" + (f" or x the GPU share ({c['gpus_per_trial']:g} per trial)" if c["gpus_per_trial"] > 0 else "")
                     + "; GPU-hours count only GPU time."))
    profile_text = _profile_text(d)
    if profile_text:
        doc.append(("p", profile_text))
    if d.other_comparisons:
        doc.append(("p", f"The store holds {len(d.other_comparisons)} other comparisons; pass `--comparison ID` to report on one of them "
                         f"(newest: {', '.join('`' + str(o['id']) + '`' for o in d.other_comparisons[:3])})."))

    # ---- headline
    doc.append(("h2", "Summary"))
    items = []
    costs = a.costs
    ref = a.settings["reference"]

    def cost_of(s, ph):
        r = costs[(costs["strategy"] == s) & (costs["phase"] == ph)] if len(costs) else costs
        return (float(r["device_hours"].iloc[0]), int(r["trials"].iloc[0]), int(r["configs"].iloc[0])) if len(r) else (math.nan, 0, 0)

    for _, sv in a.savings.iterrows():
        s = sv["strategy"]
        if sv["reference"] != ref or d.family(s) not in A.GRID_FAMILIES:
            continue  # the other arms and the second reference: one line below, every number in the savings table
        h, n, cfg = cost_of(s, "selection")
        hr, nr, cfgr = cost_of(ref, "selection")
        if not n or not nr:
            missing = s if not n else ref
            items.append(f"**Model-selection cost, {s} vs {ref}.** No savings ratio: MLflow holds no selection trials of {missing}.")
            continue
        r = sv["selection_ratio"]
        meaning = ""
        if _finite(r) and r > 0:
            meaning = f" (the {ref} search was {r:.2f} times cheaper)" if r >= 1 else f" (the {ref} search cost {1 / r:.2f} times as much)"
        items.append(f"**Model-selection cost, {s} vs {ref}.** The {s} grid ({cfg} configs) spent {fh(h)} device-hours on model selection; "
                     f"the {ref} grid ({cfgr} configs) {fh(hr)} device-hours. Savings ratio {s}/{ref}: **{fratio(sv['selection_ratio'])}**{meaning} "
                     f"(95% bootstrap CI {fratio(sv['selection_lo'])} to {fratio(sv['selection_hi'])}, over {sv['selection_trials']} and "
                     f"{sv['reference_selection_trials']} trials). With re-training included: {fratio(sv['total_ratio'])} "
                     f"(CI {fratio(sv['total_lo'])} to {fratio(sv['total_hi'])}; {fh(sv['total_hours'])} vs {fh(sv['reference_total_hours'])} device-hours, "
                     f"{sv['total_trials']} and {sv['reference_total_trials']} trials).")
    others = [s for s in d.strategies if d.family(s) not in A.GRID_FAMILIES]
    if others and len(a.savings):
        parts = []
        for s in others:
            h, n, _ = cost_of(s, "selection")
            ratios = [f"{fratio(r['selection_ratio'])} vs {r['reference']}" for _, r in a.savings[a.savings["strategy"] == s].iterrows()]
            parts.append(f"{s} {fh(h)} device-hours over {n} trials" + (f" ({', '.join(ratios)})" if ratios else ""))
        items.append("**Model-selection cost of the other strategies** (ratio = its device-hours / the reference's; below 1: cheaper than the reference): "
                     + "; ".join(parts) + ".")
    fixed_vs = a.savings[(a.savings["reference"] == "fixed") & (a.savings["strategy"] == ref)] if len(a.savings) else a.savings
    if len(fixed_vs):
        r = fixed_vs.iloc[0]
        items.append(f"**{ref} against the full grid.** The {ref} grid spent {fratio(r['selection_ratio'])} of the fixed grid's selection device-hours "
                     f"(CI {fratio(r['selection_lo'])} to {fratio(r['selection_hi'])}); {fratio(r['total_ratio'])} with re-training.")
    if not len(a.savings) and not a.savings_notes:
        items.append(f"No savings ratio: it needs the reference strategy `{ref}` (or `fixed`) and at least one other strategy in the comparison.")
    for note in a.savings_notes:
        items.append("**Savings.** " + note)
    accs = []
    for _, st in a.strategies.iterrows():
        if st["test_runs"]:
            accs.append(f"{st['strategy']} {fpct(st['test_acc_mean'])} +- {fpct(st['test_acc_std'])} (n={st['test_runs']} of {st['retrain_runs']} re-training runs)")
        else:
            accs.append(f"{st['strategy']} n/a (no finished re-training run)")
    items.append("**Accuracy bought.** Test accuracy of each strategy's selected config (mean +- sample std): " + "; ".join(accs) + ".")
    ws = []
    for _, w in a.widths.iterrows():
        if not _finite(w["total_mean"]):
            ws.append(f"{w['strategy']} n/a")
        elif w["kind"].startswith("learned"):
            ws.append(f"{w['strategy']} learned {fnum(w['total_mean'], '.1f')} +- {fnum(w['total_std'], '.1f')} neurons in total (n={w['n']} runs)")
        else:
            ws.append(f"{w['strategy']} selected {w['per_layer']} = {fnum(w['total_mean'], 'g')} neurons")
    items.append("**Width.** " + "; ".join(ws) + ".")
    ov = a.overhead_summary
    if ov.get("n"):
        items.append(f"**AWNN overhead.** An AWNN run cost {fratio(ov['ratio_median'])} the {ov['unit']} of fixed runs of similar width "
                     f"(median over {ov['n']} AWNN runs; interquartile range {fratio(ov['ratio_q25'])} to {fratio(ov['ratio_q75'])}).")
    else:
        items.append("**AWNN overhead.** Not measurable here: it needs finished AWNN runs and fixed runs on the same split.")
    ti = a.target_info
    if _finite(ti.get("target")):
        parts = []
        for _, t in a.target.iterrows():
            if t["reached"] > 0 and t["order"] == "actual":
                parts.append(f"{t['strategy']} after {fh(t['hours_mean'])} device-hours (as run)")
            elif t["reached"] > 0:
                parts.append(f"{t['strategy']} after {fh(t['hours_mean'])} device-hours on average" + (f" (in {fpct(t['reached'], 0)} of orders)" if t["reached"] < 1 else ""))
            else:
                parts.append(f"{t['strategy']} never (its best: {fpct(t['best_val_acc'])})")
        how = ("in a random order of the grid" if set(a.target["order"]) == {"random"} else
               "in a random order for the grids (fixed, awnn), in the order the trials ran for the other strategies")
        items.append(f"**Cost to a good model.** Reaching within {100 * ti['margin']:g} pp (percentage points) of the best inner-validation accuracy any strategy found "
                     f"({fpct(ti['best_val_acc'])}), {how}: " + "; ".join(parts) + ".")
    n_prob = len(a.problems)
    early = _early_stopped(a)
    if early:
        items.append("**Early stopping.** " + early)
    items.append("**Data quality.** " + ("Every sweep and trial finished ok" + (" (ASHA's early stops aside)." if early else ".") if not n_prob
                                         else f"{n_prob} issues, listed under \"Problems\" below; failed and diverged trials' compute is included in every cost."))
    doc.append(("ul", items))

    # ---- problems first when there are any: a reader must see them
    if a.problems:
        doc.append(("h2", "Problems"))
        shown = list(a.problems[:MAX_PROBLEMS])
        if len(a.problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(a.problems) - MAX_PROBLEMS} more (summary.json lists all {len(a.problems)}; the status counts are in the table below).")
        doc.append(("ul", shown))

    # ---- cost table
    doc.append(("h2", "What each strategy spent"))
    rows = []
    for _, r in costs.iterrows():
        other = {k: int(r[k]) for k in C.STATUSES if k != "ok" and int(r[k])}
        status = f"{int(r['ok'])} ok" + "".join(f", {v} {k}" for k, v in other.items())
        declared = r["trials_declared"]
        n_tr = f"{int(r['trials'])}" + (f" of {int(declared)}" if _finite(declared) and int(declared) != int(r["trials"]) else "")
        rows.append([r["strategy"], PHASE_LABEL.get(r["phase"], r["phase"]), str(int(r["configs"])), n_tr, status,
                     str(int(r["runs"])) + (f" ({int(r['interrupted_runs'])} interrupted)" if int(r["interrupted_runs"]) else ""),
                     fh(r["device_hours"]) + (" (est.)" if int(r["estimated_runs"]) else ""), fh(r["gpu_hours"]), fsec(r["wall_seconds"])])
    doc.append(("table", ["strategy", "phase", "configs", "trials", "status", "MLflow runs", "device-hours", "GPU-hours", "sweep wall-clock"], rows))
    doc.append(("p", f"Comparison wall-clock: {fsec(c['wall_seconds'])}. Trials are counted once per config (selection) or re-training run; "
                     "runs of a trial that a dead driver left `interrupted` add their compute, not configs."
                     + (" TPE may suggest a config twice: each suggestion is a trial and counts." if any(d.family(s) == "tpe" for s in d.strategies) else "")))
    if early:
        doc.append(("p", early))
    doc.append(("img", "cost", "Stacked bars of device-hours per strategy: selection and re-training"))

    # ---- accuracy and width (Table 1 of the paper)
    doc.append(("h2", "What it bought: accuracy and width (cf. the paper's Table 1)"))
    rows = []
    for (_, st), (_, w) in zip(a.strategies.iterrows(), a.widths.iterrows()):
        rows.append([st["strategy"], st["selected_summary"], fpct(st["selected_val_acc"]),
                     f"{fpct(st['test_acc_mean'])} ({fpct(st['test_acc_std'])})" if st["test_runs"] else "n/a",
                     f"{st['test_runs']} of {st['retrain_runs']}", w["kind"], w["per_layer"] or "n/a",
                     f"{fnum(w['total_mean'], '.1f')} ({fnum(w['total_std'], '.1f')})" if _finite(w["total_mean"]) else "n/a"])
    doc.append(("table", ["strategy", "selected config", "inner val acc", "test acc mean (std)", "runs", "width", "per layer mean (std)", "total mean (std)"], rows))
    doc.append(("p", "Test accuracy: mean and sample standard deviation (ddof=1) over the re-training runs that finished ok. "
                     "Fixed width: chosen by the grid. AWNN width: learned, taken at each re-training run's selected epoch (tag `awnn.widths_at_best`)."))
    doc.append(("img", "accuracy_width", "Accuracy versus total width for every scored trial"))

    # ---- savings
    doc.append(("h2", "Savings ratio"))
    if len(a.savings):
        rows = [[sv["strategy"], sv["reference"], f"{fh(sv['selection_hours'])} / {fh(sv['reference_selection_hours'])}",
                 f"{fratio(sv['selection_ratio'])} [{fratio(sv['selection_lo'])}, {fratio(sv['selection_hi'])}]",
                 f"{fh(sv['total_hours'])} / {fh(sv['reference_total_hours'])}",
                 f"{fratio(sv['total_ratio'])} [{fratio(sv['total_lo'])}, {fratio(sv['total_hi'])}]",
                 f"{sv['selection_trials']} / {sv['reference_selection_trials']}"] for _, sv in a.savings.iterrows()]
        doc.append(("table", ["strategy", "vs", "selection device-h", "selection ratio [95% CI]", "total device-h", "total ratio [95% CI]", "selection trials"], rows))
    doc.append(("p", f"Ratio = sum of the strategy's trial device-hours / sum of the reference's (`vs`) trial device-hours: against `{ref}` (ratio > 1: `{ref}` is cheaper) "
                     "and against `fixed`, the full fixed-width grid (ratio < 1: cheaper than running the whole grid). "
                     f"CI: percentile bootstrap, {a.settings['n_boot']} resamples of each strategy's trials with replacement within each phase (seed {a.settings['seed']})."))
    if a.savings_notes:
        doc.append(("ul", list(a.savings_notes)))

    # ---- any-time and target
    doc.append(("h2", "Any-time curves and cost to a target"))
    doc.append(("img", "anytime", "Best inner-validation accuracy against cumulative selection device-hours"))
    if _finite(ti.get("target")):
        rows = [[t["strategy"], f"random ({ti['n_orders']} orders)" if t["order"] == "random" else "as run", fpct(t["best_val_acc"]),
                 fpct(t["reached"], 0) if t["order"] == "random" else ("yes" if t["reached"] > 0 else "no"),
                 fh(t["hours_mean"]), fh(t["hours_median"]) if t["order"] == "random" else "", fh(t["grid_hours"])] for _, t in a.target.iterrows()]
        doc.append(("table", ["strategy", "order", "best inner val acc", "reached target", "device-h to target (mean)", "(median)", "all selection trials device-h"], rows))
        actual = sorted({d.family(s) for s in a.target.loc[a.target["order"] == "actual", "strategy"]}) if len(a.target) else []
        doc.append(("p", f"Target: {fpct(ti['target'])} = best inner-validation accuracy of any strategy ({fpct(ti['best_val_acc'])}) minus {100 * ti['margin']:g} pp. "
                         f"A grid has no natural order: each grid's curve and cost is averaged over {ti['n_orders']} random orders of its selection trials, "
                         "run one after another"
                         + (f"; {', '.join(actual)} chose their trials in sequence, so their curves and costs follow the order the trials ran "
                            "(by run end time), cumulative device-hours on x" if actual else "")
                         + ". Diverged, failed and stopped trials cost their device-hours and find nothing."))

    # ---- repeats
    if len(a.repeats):
        doc.append(("h2", "Repeats: spread across seeds"))
        rows = []
        for family, info in a.repeats_info.items():
            for _, r in a.repeats[a.repeats["family"] == family].iterrows():
                fmt = fpct if r["metric"] == "test_acc_mean" else (fratio if r["metric"].startswith("savings") else fh)
                rows.append([family, r["label"], f"{r['n']} of {r['arms']}", fmt(r["mean"]), fmt(r["std"]), fmt(r["min"]), fmt(r["max"])])
            rows.append([family, "reached target", f"{info['reached_target']} of {info['n']}", "", "", "", ""])
        doc.append(("table", ["family", "measure", "arms (n)", "mean", "std", "min", "max"], rows))
        doc.append(("p", "Each stochastic strategy ran once per seed (`--repeats`); every arm is a full search with its own selection and re-training. "
                         "Mean and sample standard deviation (ddof=1) over the arms with a value; device-hours to target over the arms that reached it. "
                         "Savings ratios: the arm's selection device-hours / the reference's (awnn, or fixed: the full grid)."))

    # ---- overhead
    doc.append(("h2", "AWNN per-step overhead, measured on these runs"))
    if len(a.overhead):
        rows = [[r["strategy"], PHASE_LABEL.get(r["phase"], r["phase"]), r["trial_key"], fnum(r["hidden_layers"], "g"), fnum(r["batch_size"], "g"), fnum(r["mean_width"], ".1f"),
                 fnum(r["cost"], ".4g"), fnum(r["fixed_width"], "g"), f"{fnum(r['fixed_cost'], '.4g')} (n={r['fixed_runs']})", r["match"], fratio(r["ratio"])]
                for _, r in a.overhead.iterrows()]
        doc.append(("table", ["strategy", "phase", "trial", "layers", "batch", "AWNN mean width/layer", f"AWNN {ov['unit']}", "fixed width", "fixed (runs)", "matched on", "ratio"], rows))
    doc.append(("p", f"Cost per epoch = train_seconds x allocated devices / epochs_run ({ov.get('unit')}); train_seconds is training time only. "
                     "Each AWNN run is compared with the fixed-width runs (of any strategy) of the closest width (log scale) to its mean learned width per layer over training, "
                     "on the same split with the same hidden layers and batch size where the grid has them."
                     + ("" if "per sample" in str(ov.get("unit")) else " The runs do not record n_train, so the cost is per epoch, not per sample; on one split the ratio is the same.")))
    doc.append(("img", "widths", "Learned total width of each AWNN trial over epochs"))

    # ---- projection
    doc.append(("h2", "Projection: a width per layer (W^L configs)"))
    pi = a.projection_info
    if pi.get("applicable"):
        p = a.projection
        rows = [[str(int(r["layers"])), fnum(r["fixed_configs_shared_width"], "g"), fnum(r["fixed_configs_per_layer_width"], ".4g"),
                 fh(r["fixed_hours_per_trial"]) + ("" if r["fixed_per_trial_measured"] else " (extrapolated)"), fh(r["fixed_hours"]),
                 fnum(r["awnn_configs"], "g"), fh(r["awnn_hours_per_trial"]) + ("" if r["awnn_per_trial_measured"] else " (extrapolated)"), fh(r["awnn_hours"]), fratio(r["ratio"])]
                for _, r in p.iterrows()]
        doc.append(("p", f"**This is a projection, not a measurement.** The fixed grid tried W = {pi['W']} widths ({', '.join(f'{w:g}' for w in pi['width_values'])}) shared by all layers. "
                         f"If each of L layers got its own width, it would need W^L x {pi['fixed_other_configs']:g} configs (its other dimensions); "
                         f"AWNN keeps {pi['awnn_configs_per_layers']:g} configs per L. Costs use the measured mean device-hours per selection trial at each L "
                         "(a least-squares line in L where L was not measured)."))
        doc.append(("table", ["L", "fixed configs (shared width)", "fixed configs (width per layer)", "fixed device-h / trial", "fixed device-h (projected)",
                              "AWNN configs", "AWNN device-h / trial", "AWNN device-h (projected)", "ratio"], rows))
    else:
        doc.append(("p", f"Not applicable to this comparison: {pi.get('reason', '')}."))
    doc.append(("img", "projection", "Projected selection cost against the number of hidden layers"))

    # ---- method
    doc.append(("h2", "How to read and rebuild this report"))
    doc.append(("ul", [
        "Trials: one per selection config and per re-training run; failed, diverged and stopped trials count in every cost. "
        "Statuses come from the tag `awnn.status`; device-hours from the metric `device_hours` of each trial run.",
        "Selection: best inner-validation accuracy (ties: lower validation loss, then grid order) among trials that finished ok or width_capped.",
        f"Rebuild from the tracking store alone: `awnn report --comparison {c['id']} --tracking-uri {tracking_hint or 'URI'} --out DIR`. "
        "The same store gives the same files.",
        "Formulas and the summary.json keys: docs/report.md.",
    ]))
    return doc


_INLINE = [(re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"), (re.compile(r"`([^`]+)`"), r"<code>\1</code>")]


def _inline_html(text: str) -> str:
    out = html.escape(text, quote=False)
    for pat, rep in _INLINE:
        out = pat.sub(rep, out)
    return out


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: list[tuple], plots: dict[str, str]) -> str:
    out = []
    for block in doc:
        kind = block[0]
        if kind == "h1":
            out.append(f"# {block[1]}\n")
        elif kind == "h2":
            out.append(f"## {block[1]}\n")
        elif kind == "p":
            out.append(block[1] + "\n")
        elif kind == "ul":
            out.append("\n".join(f"- {item}" for item in block[1]) + "\n")
        elif kind == "table":
            header, rows = block[1], block[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in rows]
            out.append("\n".join(lines) + "\n")
        elif kind == "img":
            out.append(f"![{block[2]}]({plots[block[1]]})\n")
    return "\n".join(out)


CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.5em;border-bottom:1px solid #ddd;padding-bottom:.3em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #eee}
table{border-collapse:collapse;font-size:.85em;margin:.8em 0;display:block;overflow-x:auto}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}tr:nth-child(even) td{background:#fafafa}code{background:#f2f2f2;padding:0 3px;border-radius:3px;font-size:.9em}
figure{margin:1em 0}img{max-width:100%;height:auto}figcaption{font-size:.8em;color:#666}li{margin:.3em 0}
""".strip()


def render_html(doc: list[tuple], images: dict[str, bytes], title: str) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>"]
    for block in doc:
        kind = block[0]
        if kind in ("h1", "h2"):
            out.append(f"<{kind}>{_inline_html(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{_inline_html(block[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline_html(str(h))}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{_inline_html(str(x))}</td>" for x in row) + "</tr>" for row in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "img":
            data = base64.b64encode(images[block[1]]).decode("ascii")
            out.append(f'<figure id="plot-{block[1]}"><img alt="{html.escape(block[2])}" data-plot="{block[1]}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{_inline_html(block[2])}</figcaption></figure>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ entry
def write_report(tracking_uri: str, out_dir: str | Path, comparison: str | None = None, experiment: str | None = None,
                 margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500) -> dict[str, Any]:
    """Read the comparison from MLflow and write report.md, report.html,
    summary.json and the PNG plots to `out_dir`.  Returns the paths
    (`report_md`, `report_html`, `summary_json`, `plots`, `out_dir`) and the
    `summary` dict.  Raises analysis.AnalysisError when the store lacks it."""
    if not (0 <= margin < 1):
        raise A.AnalysisError(f"--target-margin: expected a number in [0, 1), found {margin}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise A.AnalysisError(f"--out {out}: exists and is not a folder")
    data = A.load_comparison(tracking_uri, comparison=comparison, experiment=experiment)
    a = A.analyze(data, margin=margin, n_boot=n_boot, n_orders=n_orders)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / fname for name, fname in PLOTS.items()}
    plot_anytime(a, paths["anytime"])
    plot_cost(a, paths["cost"])
    plot_widths(a, paths["widths"])
    plot_accuracy_width(a, paths["accuracy_width"])
    plot_projection(a, paths["projection"])
    summary = a.summary()
    summary["files"] = {"report_md": "report.md", "report_html": "report.html", "summary_json": "summary.json", "plots": dict(PLOTS)}
    doc = build_document(a, summary, tracking_hint=C.redact_uri(tracking_uri))
    (out / "report.md").write_text(render_markdown(doc, PLOTS))
    images = {name: p.read_bytes() for name, p in paths.items()}
    (out / "report.html").write_text(render_html(doc, images, title=f"AWNN search-cost report: {data.comparison['id']}"))
    (out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    return {"out_dir": str(out), "report_md": str(out / "report.md"), "report_html": str(out / "report.html"),
            "summary_json": str(out / "summary.json"), "plots": {k: str(v) for k, v in paths.items()}, "summary": summary}


def log_report(tracking_uri: str, comparison: str, out_dir: str | Path, artifact_path: str = "report") -> str:
    """Log the report folder as an artifact of the comparison's parent run; returns that run's id."""
    root, _ = A.find_comparison(tracking_uri, comparison=comparison)
    C.client(tracking_uri).log_artifacts(root.info.run_id, str(out_dir), artifact_path)
    return root.info.run_id
