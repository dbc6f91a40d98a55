"""How far does a comparison's verdict move from one draw of its training to
another?  Reads several finished comparisons of the same task (MLflow stores,
the newest comparison of each, as `awnn report` reads them: tracking/reader.py)
and prints, per draw, each arm's selection and re-training device-hours, its
selected config, the learned widths of its costliest selection trials and
its re-training runs, and the savings of every arm against a baseline arm's
costs; and, against the first draw, how many of each arm's trials trained the
same (the same status, epochs, best epoch, best validation accuracy and
widths: bit for bit on one CPU model) and how many parted.

A draw is another `--train-seed`, another CPU model's float rounding, or the
same command again (which, on one CPU model, trains every trial as before:
only its timings move).  An arm missing from a draw (an `awnn`-only
comparison) takes its costs from the first draw that has it (`--baseline-from`
says which): a fixed grid's trials run their epochs whatever they learn, so
their cost barely depends on the seed (measure it: run the fixed grid with
another seed too).

Usage:
    python benchmarks/seed_spread.py LABEL=sqlite:///path/mlflow.db [LABEL=...] [--baseline fixed]

Prints one JSON object as its last line: `draws` (label -> arms -> costs,
selected config, widths), `savings` (label -> arm -> selection and total
savings against the baseline), `same_as_first` (label -> arm -> [same,
parted]) and `spread` (arm -> min and max of each savings over the draws).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)
from tracking.reader import load_comparison  # noqa: E402

TOP = 3  # the costliest selection trials shown per arm


def _f(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def draw(uri: str) -> dict:
    """One comparison's arms: costs, selected config, widths, and each trial's outcome."""
    data = load_comparison(uri, history_keys=())
    runs = data.runs
    out = {"comparison": data.comparison["id"], "train_seed": data.comparison.get("train_seed", 0), "cpus": sorted(set(runs["cpu"].dropna())) if "cpu" in runs else [],
           "arms": {}}
    for arm in data.strategies:
        mine = runs[runs["strategy"] == arm]
        sel, ass = mine[mine["phase"] == "selection"], mine[mine["phase"] == "assessment"]
        sweeps = data.sweeps[(data.sweeps["strategy"] == arm) & (data.sweeps["phase"] == "selection")] if len(data.sweeps) else data.sweeps
        selected = sweeps["selected_key"].iloc[0] if len(sweeps) and "selected_key" in sweeps else None
        costly = sel.sort_values("device_hours", ascending=False).head(TOP)
        outcomes = {}
        for _, r in mine.iterrows():
            outcomes[f"{r['phase']}/{r['trial_key']}"] = [r["status"], _f(r["epochs_run"]), _f(r["best_epoch"]), _f(r["best_val_acc"]), str(r["widths"])]
        out["arms"][arm] = {
            "selection_device_hours": float(sel["device_hours"].sum()), "assessment_device_hours": float(ass["device_hours"].sum()),
            "selected_key": selected if isinstance(selected, str) else None,
            "costliest": [{"key": r["trial_key"], "device_seconds": round(float(r["device_hours"]) * 3600, 1), "width": _f(r["final_width_total"])}
                          for _, r in costly.iterrows()],
            "retrain_widths": [_f(w) for w in ass["final_width_total"]],
            "test_acc": [_f(a) for a in ass["test_acc"]],
            "outcomes": outcomes,
        }
    return out


def spread(draws: dict[str, dict], baseline: str) -> dict:
    """Savings per draw against the baseline arm (its costs from the first draw that has it) and trials alike to the first draw's."""
    labels = list(draws)
    base_from = next((l for l in labels if baseline in draws[l]["arms"]), None)
    if base_from is None:
        raise SystemExit(f"seed_spread: no draw has the baseline arm {baseline!r} (arms: "
                         + ", ".join(f"{l}: {sorted(d['arms'])}" for l, d in draws.items()) + ")")
    savings, same = {}, {}
    first = draws[labels[0]]["arms"]
    for label, d in draws.items():
        base = d["arms"].get(baseline) or draws[base_from]["arms"][baseline]
        b_sel, b_tot = base["selection_device_hours"], base["selection_device_hours"] + base["assessment_device_hours"]
        savings[label], same[label] = {}, {}
        for arm, a in d["arms"].items():
            tot = a["selection_device_hours"] + a["assessment_device_hours"]
            if arm != baseline and a["selection_device_hours"] > 0 and tot > 0:
                savings[label][arm] = {"selection": round(b_sel / a["selection_device_hours"], 3), "total": round(b_tot / tot, 3),
                                       "baseline_from": label if baseline in d["arms"] else base_from}
            if arm in first:
                keys = set(a["outcomes"]) & set(first[arm]["outcomes"])
                alike = sum(a["outcomes"][k] == first[arm]["outcomes"][k] for k in keys)
                same[label][arm] = [alike, len(keys) - alike]
    ranges: dict = {}
    for per in savings.values():
        for arm, s in per.items():
            for k in ("selection", "total"):
                lo, hi = ranges.setdefault(arm, {}).get(k, (math.inf, -math.inf))
                ranges[arm][k] = (min(lo, s[k]), max(hi, s[k]))
    return {"savings": savings, "same_as_first": same, "spread": {a: {k: list(v) for k, v in r.items()} for a, r in ranges.items()},
            "baseline_from": base_from}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", metavar="LABEL=URI", help="a label and an MLflow tracking URI (its newest comparison)")
    ap.add_argument("--baseline", default="fixed", help="the arm the savings are against (default fixed)")
    args = ap.parse_args(argv)
    draws = {}
    for item in args.stores:
        label, sep, uri = item.partition("=")
        if not sep or not label or not uri:
            raise SystemExit(f"seed_spread: expected LABEL=URI, found {item!r}")
        if label in draws:
            raise SystemExit(f"seed_spread: the label {label!r} is given twice")
        draws[label] = draw(uri)
        arms = ", ".join(f"{arm} {a['selection_device_hours']:.4f} + {a['assessment_device_hours']:.4f} device-hours" for arm, a in draws[label]["arms"].items())
        print(f"{label}: {arms}", file=sys.stderr)
    out = {"draws": {l: {**d, "arms": {a: {k: v for k, v in x.items() if k != "outcomes"} for a, x in d["arms"].items()}} for l, d in draws.items()},
           **spread(draws, args.baseline)}
    print(json_text(out))
    return out


if __name__ == "__main__":
    main()
