"""The table `awnn compare` prints at its end."""
from __future__ import annotations

import math
import sys

from tracking.contract import arm_family

from .progress import fmt_seconds
from .strategies import REGISTRY



def config_keys(results) -> list[str]:
    """The keys a selected-config line shows: `model`, then every key the
    arms' grids search (in file order: a GIN's conv_layers and pooling, an
    MLP's hidden_layers, width, activation, ...), then `layer_widths`
    (fixedplus per-layer).  Keys no grid searches are left out: each arm's
    grid file fixes them."""
    keys = ["model"]
    for r in results:
        grid = getattr(r, "grid", None)
        keys += [k for k in (getattr(grid, "grid", None) or {}) if k not in keys]
    return keys + ["layer_widths"]


def _cfg_short(cfg: dict, keys: list[str]) -> str:
    parts = []
    for k in keys:
        if k in cfg and cfg[k] not in (None, "") and not (k == "width" and cfg.get("model") == "awnn") \
                and not (k == "sigma_theta" and cfg.get("model") != "awnn"):
            parts.append(f"{k}={cfg[k]}")
    return " ".join(parts)


WIDTH = 100  # the summary fits a terminal this wide


def print_summary(comparison, results, stream=None) -> None:
    """One line per arm (`fixed`, `awnn`, `tpe.r1`, ...) in 100 columns:
    selection trials, selection and total device-hours, how many times
    cheaper its selection was than the fixed grid's, test accuracy of the
    selected config and its width (AWNN: learned total, mean +- std (min..max)
    over the re-training runs); then each arm's selected config, wrapped."""
    out = stream or sys.stdout
    protocol = getattr(comparison, "protocol", "holdout")
    head = (f"Comparison {comparison.id}: task {comparison.task}, budget {comparison.budget.name}"
            + (f", protocol {protocol} (test acc over the folds' means; config: the one most folds chose)" if protocol != "holdout" else ""))
    print("\n" + "\n".join(_wrap(head, "")), file=out)
    fixed = next((r for r in results if (getattr(r, "family", "") or arm_family(r.strategy)) == "fixed"), None)
    fixed_h = fixed.selection.total("device_hours") if fixed else math.nan
    w = max([8, *(len(r.strategy) for r in results)])
    header = f"{'arm':<{w}} {'trials':>6} {'sel dev-h':>9} {'total dev-h':>11} {'vs fixed':>8}  {'test acc (mean +- std, n)':<25}  width"
    print(header, file=out)
    print("-" * min(WIDTH, len(header) + 12), file=out)
    derived = {r.strategy: _source_of(r, results) for r in results}
    for r in results:
        sel_h = r.selection.total("device_hours")
        total_h = sel_h + (r.assessment.total("device_hours") if r.assessment else 0.0)
        if derived[r.strategy] is not None:  # fixedplus: the AWNN search it re-trains from is part of its cost
            src = derived[r.strategy]
            sel_h = src.selection.total("device_hours") + (src.assessment.total("device_hours") if src.assessment else 0.0)
            total_h += sel_h
        s = r.summary
        acc = f"{100 * s['test_acc_mean']:.2f} +- {100 * s['test_acc_std']:.2f}% (n={s['runs_ok']})" if s else "n/a"
        ratio = f"{fixed_h / sel_h:.2f}x" if sel_h > 0 and fixed_h == fixed_h else "-"
        trials = len(r.selection.outcomes) or (0 if derived[r.strategy] else r.grid.size)  # tpe, random: fewer than the grid
        line = f"{r.strategy:<{w}} {trials:>6} {sel_h:>9.4f} {total_h:>11.4f} {ratio:>8}  {acc:<25}  {r.widths()}"
        print(line[:WIDTH], file=out)
    for text in _wrap("(dev-h: device-hours = allocated CPUs or GPU share x training time; vs fixed: the fixed grid's "
                      "selection dev-h / the arm's; wall: " + ", ".join(f"{r.strategy} {fmt_seconds(_wall(r))}" for r in results) + ")",
                      "", " "):
        print(text, file=out)
    for name, src in derived.items():
        if src is not None:
            print(f"({name}: no search of its own; its sel dev-h are the {src.strategy} arm's search, selection and re-training, "
                  f"whose learned width it re-trains at)", file=out)
    print("selected configs:", file=out)
    keys = config_keys(results)
    for r in results:
        cfg = _cfg_short(r.selected["config"], keys) if r.selected else "none selected"
        for text in _wrap(cfg, f"  {r.strategy:<{w}} "):
            print(text, file=out)
    family = {r.strategy: getattr(r, "family", "") or arm_family(r.strategy) for r in results}
    outcomes = [(r.strategy, o) for r in results for ph in (r.selection, r.assessment) if ph for o in ph.outcomes]
    # ASHA stops selection trials by design: counted apart from the trials that went wrong
    early = {r.strategy for r in results if family[r.strategy] in REGISTRY and REGISTRY[family[r.strategy]].stops_early}  # asha, awnn-asha
    by_design = [o for r in results if r.strategy in early for o in r.selection.outcomes if o.get("status") == "stopped"]
    if by_design:
        per = {r.strategy: sum(1 for o in r.selection.outcomes if o.get("status") == "stopped") for r in results if r.strategy in early}
        _say(out, f"{len(by_design)} trials were stopped early by ASHA (their partial compute is counted above): "
             + ", ".join(f"{s} {n}" for s, n in per.items()))
    problems = [(s, o["key"], o["status"]) for s, o in outcomes if o.get("status") != "ok" and not any(o is e for e in by_design)]
    if problems:
        _say(out, f"{len(problems)} trials did not end ok (their compute is counted above): "
             + ", ".join(f"{s}:{k}={st}" for s, k, st in problems[:12]) + (" ..." if len(problems) > 12 else ""))
    for r in results:  # post-hoc truncation of the AWNN re-trained models (paper 5.4)
        line = _truncation_line(r)
        if line:
            _say(out, line)
    for line in caveats(comparison.budget.name, results):
        _say(out, f"warning: {line}")
    _say(out, f"MLflow: {comparison.tracking_uri}  (open it with: mlflow ui --backend-store-uri {comparison.tracking_uri})")


def _truncation_line(r) -> str | None:
    """How far the arm's re-trained models can be truncated within 1 point (tracking/truncation.py), or None."""
    from tracking.truncation import curve_rows, truncation_summary

    curves = [o["truncation"] for o in (r.assessment.outcomes if r.assessment else []) if o.get("truncation")]
    if not curves:
        return None
    import pandas as pd

    t = truncation_summary(pd.DataFrame(curve_rows(r.strategy, curves))).get(r.strategy)
    if not t:
        return None
    if not t["largest_cut_pct"]:
        return f"{r.strategy}: truncation after training costs more than 1 point from the first 10% cut (full: {100 * t['full_acc']:.2f}%)"
    return (f"{r.strategy}: truncation after training keeps test acc within 1 point down to {t['kept_pct']}% of the neurons "
            f"({t['width_total_at_cut']:.0f} of {t['full_width_total']:.0f}; {100 * t['acc_at_cut']:.2f}% vs {100 * t['full_acc']:.2f}%, "
            f"mean of {t['runs']} models)")


def _source_of(r, results):
    """The result of the arm that `r`'s family derives from (fixedplus: awnn), else None."""
    fam = getattr(r, "family", "") or arm_family(r.strategy)
    source = REGISTRY[fam].derived_from if fam in REGISTRY else None
    return next((x for x in results if (getattr(x, "family", "") or arm_family(x.strategy)) == source), None) if source else None


def _wall(r) -> float:
    return r.selection.wall_seconds + (r.assessment.wall_seconds if r.assessment else 0.0)


def _wrap(text: str, first: str, indent: str | None = None) -> list[str]:
    """`text` after `first`, wrapped at WIDTH columns (continuation lines indented
    like `first`, or by `indent`: a line that starts at column 0 is a table row's)."""
    import textwrap

    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=" " * len(first) if indent is None else indent, break_on_hyphens=False,
                         break_long_words=True) or [first.rstrip()]


def _say(out, text: str) -> None:
    print("", file=out)
    for line in _wrap(text, "", "  "):
        print(line, file=out)


def caveats(budget: str, results) -> list[str]:
    """The warnings of tracking/caveats.py for the arms' results."""
    from tracking.caveats import caveats as _caveats

    return _caveats(budget, [r.summary.get("test_acc_mean") for r in results if r.summary])
