"""The report's sections on the budget: the verdict against the per-trial
epoch budget (tracking/budget_curve.py) and the paper budget's projected
cost (tracking/paper_projection.py), built from summary.json's
`budget_curve`, `budget_verdict` and `paper_budget_projection`."""
from __future__ import annotations

from typing import Any

from .budget_curve import FRACTIONS, MOVING_ACC_GAIN, MOVING_RATIO_CHANGE
from .fmt import _finite, fh, fnum, fpct, fsec
from .savings import fx

__all__ = ["budget_section", "paper_budget_section"]


def _share(f: float) -> str:
    return "all" if f >= 1 else f"1/{round(1 / f)}"


def _config(cfg: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items()) if isinstance(cfg, dict) and cfg else "-"


def budget_section(summary: dict[str, Any]) -> list[tuple]:
    """"Verdict against the budget": per arm and share of the epochs, the selected config, its inner-validation
    accuracy and the selection device-hours; each arm's savings against the baseline per share; the plot; the one line."""
    bc = summary.get("budget_curve") or {}
    doc: list[tuple] = [("h2", "Verdict against the budget")]
    if not bc.get("arms"):
        why = bc.get("note") or "no arm has selection trials"
        return doc + [("p", f"Not available for this comparison: {why}.")]
    shares = ", ".join(_share(f) for f in FRACTIONS[:-1])
    doc.append(("p", f"What each arm would have selected, and at what selection cost, had every selection trial stopped after {shares} or all "
                     "of its epochs: rebuilt from the per-epoch validation records in MLflow (`val_acc`, `val_loss`, `train_seconds` of each "
                     "selection trial), with the search's selection rule. A trial's device-hours at a cut are its device-hours x its training "
                     "seconds up to the cut / its training seconds in all."))
    rows = []
    for arm, arm_rows in bc["arms"].items():
        for r in arm_rows:
            rows.append([arm, _share(r["fraction"]), str(r["epochs"]), f"{r['selected_key'] or 'none'}: {_config(r['selected_config'])}",
                         fpct(r["best_val_acc"]), fh(r["selection_device_hours"])])
    doc.append(("table", ["arm", "share of epochs", "epochs a trial", "selected trial: config", "inner val acc", "selection device-h"], rows))
    base, sv = bc.get("baseline"), bc.get("savings") or {}
    if sv:  # per share, each arm's selection savings against the baseline (tracking/savings.py)
        fractions = [r["fraction"] for r in next(iter(sv.values()))]
        doc.append(("table", ["share of epochs", *(f"{arm} selection savings vs {base}" for arm in sv)],
                    [[_share(f), *(fx(next((r["value"] for r in arm_rows if r["fraction"] == f), None)) for arm_rows in sv.values())]
                     for f in fractions]))
    doc.append(("img", "budget_curve", "Best inner-validation accuracy of each arm's selected config against the epochs every trial trained"))
    doc.append(("p", f"**{summary.get('budget_verdict', '')}**"))
    notes = [f"Still moving means: between half and all of the epochs an arm's selected config changed to a better one (not among configs tied at one accuracy) "
             f"or its best inner-validation accuracy rose by more than {100 * MOVING_ACC_GAIN:.0f} point, the arms' ranking by inner-validation "
             + (f"accuracy changed, or an arm's savings vs {base} (at the cut, against {base}'s) changed by more than "
                f"{100 * MOVING_RATIO_CHANGE:.0f}%." if sv else "accuracy changed.")]
    if bc.get("cv_fold0"):
        notes.append("Cross-validated: the selected configs and accuracies are fold 0's (as the any-time curves); device-hours sum every fold.")
    if bc.get("note"):
        notes.append(f"Note: {bc['note']}.")
    doc.append(("p", " ".join(notes)))
    return doc


def paper_budget_section(summary: dict[str, Any]) -> list[tuple]:
    """"Projection: the paper budget": per arm the paper's trials and epochs, the measured cost per trial-epoch,
    and the projected device-hours and wall time."""
    pj = summary.get("paper_budget_projection") or {}
    doc: list[tuple] = [("h2", "Projection: the paper budget")]
    if not pj.get("applicable"):
        return doc + [("p", f"Not available for this comparison: {pj.get('reason', 'nothing recorded')}.")]
    rows = []
    for arm, r in pj["arms"].items():
        by = r.get("epochs_by_hidden_layers") or {}
        epochs = fnum(r["epochs"], "g") + (" (" + ", ".join(f"{L} layers: {e}" for L, e in by.items()) + ")" if by else "")
        sel = (f"the {r['depends_on']} arm's search" if r.get("depends_on") and not r["measured_trials"] else
               f"{r['selection_trials']} x {epochs} epochs")
        rows.append([arm, sel, fnum(r["selection_hours_per_epoch"], ".3g"), fh(r["selection_device_hours"]),
                     f"{r['retrain_runs']} x {fnum(r['retrain_epochs'], 'g')} epochs", fh(r["retrain_device_hours"]), fh(r["device_hours"]),
                     fsec(3600 * r["wall_hours"]) if _finite(r["wall_hours"]) else "n/a"])
    tot = pj["total"]
    rows.append(["all arms", "", "", "", "", "", fh(tot["device_hours"]), fsec(3600 * tot["wall_hours"]) if _finite(tot["wall_hours"]) else "n/a"])
    doc.append(("p", f"**This is a projection, not a measurement.** What the `paper` budget would cost, from this comparison's "
                     f"(`{pj.get('measured_budget')}` budget) measured costs: selection = the mean over the measured selection trials of "
                     "(device-hours x the paper's epochs for that config / the epochs it was given here) x the paper's selection trials, so "
                     "each trial keeps its cost per epoch and the share of its epochs it trained; re-training = R x folds runs x the selected "
                     "config's paper epochs x the re-training runs' measured device-hours per epoch given. "
                     f"Wall-clock = device-hours / the devices kept busy: {pj['basis']}."))
    doc.append(("table", ["arm", "selection trials x epochs", "measured device-h / trial-epoch", "selection device-h", "re-training runs x epochs",
                          "re-training device-h", "total device-h", "wall-clock"], rows))
    doc.append(("ul", [c[0].upper() + c[1:] + "." for c in pj.get("caveats", [])]))
    return doc
