"""The report's opening and its savings: the verdict (tracking/verdict.py) with
the accuracy-against-cost plot, the summary list, and the savings table
(tracking/savings.py), each read from summary.json's numbers so the report
shows the digits the terminal, summary.json and MLflow show.  tracking/document.py
assembles the report."""
from __future__ import annotations

from typing import Any

from . import analysis as A
from .fmt import _finite, fh, fnum, fpct, fratio, plural
from .savings import NO_CI, WHAT, ci_known, fci, fsavings, fx

__all__ = ["early_stopped", "verdict_section", "summary_section", "savings_section"]


def early_stopped(a: A.Analysis) -> str:
    """One sentence on the trials ASHA stopped early (empty when none)."""
    c = a.costs
    rows = c[(c["phase"] == "selection") & c["strategy"].map(a.data.stops_early)] if len(c) else c
    if not len(rows):
        return ""
    trials = a.data.trials()
    parts = []
    for _, r in rows.iterrows():
        t = trials[(trials["strategy"] == r["strategy"]) & (trials["phase"] == "selection") & (trials["status"] == "stopped")]
        parts.append(f"{r['strategy']} {int(r['stopped'])} of {int(r['trials'])} selection trials ({fh(t['device_hours'].sum())} of its {fh(r['device_hours'])} device-hours)")
    return ("ASHA stopped trials early by design: " + "; ".join(parts) + ". A stopped trial's partial device-hours are included in every total, "
            "its status is `stopped`, and it is never selected.")


def verdict_section(summary: dict[str, Any]) -> list[tuple]:
    """The report's first words: the verdict, then the plot of accuracy against cost."""
    return [("p", (summary.get("verdict") or {}).get("text", "")),
            ("img", "accuracy_cost", "Test accuracy of each arm's selected config against its total device-hours"),
            ("p", "Accuracy against cost: one point per arm (test accuracy of its selected config, mean +- std over its re-training runs, "
                  "against its total device-hours, selection and re-training); a family run several times shows each repeat faint and its "
                  "mean +- std across repeats. The setup (task, budget, protocol) follows the summary.")]


def summary_section(a: A.Analysis, summary: dict[str, Any]) -> list[tuple]:
    warn = [f"**Warning:** {w}." for w in a.warnings]
    return [("h2", "Summary"), ("ul", warn + _savings_items(summary) + _result_items(a))]


def _savings_items(summary: dict[str, Any]) -> list[str]:
    """The summary's lines on what the search cost: each arm's savings against the baseline."""
    base = summary.get("baseline")
    items = []
    for arm, sv in (summary.get("savings") or {}).items():
        sel_ci = f"95% bootstrap CI {fci(sv['selection_ci'])}" if ci_known(sv["selection_ci"]) else NO_CI
        tot_ci = f"CI {fci(sv['total_ci'])}" if ci_known(sv["total_ci"]) else NO_CI
        items.append(f"**`{arm}` vs `{base}`.** Model selection {fsavings(sv['selection'])} ({sel_ci}; {fh(sv['selection_hours'])} vs "
                     f"{fh(sv['baseline_selection_hours'])} device-hours over {sv['selection_trials']} and {sv['baseline_selection_trials']} "
                     f"trials); with re-training {fsavings(sv['total'])} ({tot_ci}; {fh(sv['total_hours'])} vs {fh(sv['baseline_total_hours'])} "
                     f"device-hours).")
    if items:
        items.insert(0, f"**Savings vs `{base}`** ({WHAT.get(base, base)}, the baseline): its device-hours / the arm's, so above 1 the arm is "
                        "that many times cheaper, below 1 dearer.")
    return items + [f"**Savings.** {note}" for note in summary.get("savings_notes") or []]


def _result_items(a: A.Analysis) -> list[str]:
    """The summary's lines on what the search bought, overhead, cost to target and data quality."""
    items = []
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
        elif w["kind"].startswith("taken from"):
            ws.append(f"{w['strategy']} {w['per_layer']} = {fnum(w['total_mean'], 'g')} neurons, {w['kind']}")
        else:
            ws.append(f"{w['strategy']} selected {w['per_layer']} = {fnum(w['total_mean'], 'g')} neurons")
    items.append("**Width.** " + "; ".join(ws) + ".")
    ov = a.overhead_summary
    if ov.get("n"):
        fused = ov.get("fused_matches", 0)
        items.append(f"**AWNN overhead.** An AWNN run cost {fratio(ov['ratio_median'])} the {ov['unit']} of fixed runs of similar width "
                     f"(median over {ov['n']} AWNN runs; interquartile range {fratio(ov['ratio_q25'])} to {fratio(ov['ratio_q75'])})"
                     + (f"; {'all' if fused == ov['n'] else fused} of them matched with fused fixed runs only, whose cost is their share of a "
                        "stacked group's time: for those the ratio includes what fusion saves the fixed grid, not only AWNN's own work."
                        if fused else "."))
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
    early = early_stopped(a)
    if early:
        items.append("**Early stopping.** " + early)
    items.append("**Data quality.** " + ("Every sweep and trial finished ok" + (" (ASHA's early stops aside)." if early else ".") if not n_prob
                                         else f"{plural(n_prob, 'issue')}, listed under \"Problems\" below; failed and diverged trials' compute is included in every cost."))
    return items


def savings_section(a: A.Analysis, summary: dict[str, Any]) -> list[tuple]:
    """"Savings vs <baseline>": per arm, selection and total savings with their intervals (summary.json's `savings`)."""
    base = summary.get("baseline")
    doc: list[tuple] = [("h2", f"Savings vs `{base}`" if base else "Savings")]
    sv = summary.get("savings") or {}
    if sv:
        rows = [[arm, f"{fh(r['selection_hours'])} / {fh(r['baseline_selection_hours'])}", f"{fx(r['selection'])} [{fci(r['selection_ci'], ', ')}]",
                 f"{fh(r['total_hours'])} / {fh(r['baseline_total_hours'])}", f"{fx(r['total'])} [{fci(r['total_ci'], ', ')}]",
                 f"{r['selection_trials']} / {r['baseline_selection_trials']}"] for arm, r in sv.items()]
        doc.append(("table", ["arm", f"selection device-h (arm / {base})", f"selection savings vs {base} [95% CI]", f"total device-h (arm / {base})",
                              f"total savings vs {base} [95% CI]", f"selection trials (arm / {base})"], rows))
        doc.append(("p", f"Savings = `{base}`'s device-hours / the arm's (sums over trials): above 1 the arm is that many times cheaper than `{base}` "
                         f"({WHAT.get(base, base)}), below 1 dearer; selection counts the model-selection trials, total adds the re-training runs. "
                         f"CI: percentile bootstrap, {a.settings['n_boot']} resamples of each arm's trials with replacement within each phase "
                         f"(seed {a.settings['seed']}). Rounded to 3 significant digits, as in the terminal, summary.json and MLflow."))
    doc += [("ul", list(summary.get("savings_notes") or []))] if summary.get("savings_notes") else []
    return doc
