"""The table `awnn compare` prints at its end."""
from __future__ import annotations

import sys

from tracking.contract import arm_family

from .progress import fmt_seconds


def _cfg_short(cfg: dict) -> str:
    keys = ["model", "hidden_layers", "width", "activation", "batch_size", "lr", "sigma_theta"]
    parts = []
    for k in keys:
        if k in cfg and not (k == "width" and cfg.get("model") == "awnn") and not (k == "sigma_theta" and cfg.get("model") != "awnn"):
            parts.append(f"{k}={cfg[k]}")
    return " ".join(parts)


def print_summary(comparison, results, stream=None) -> None:
    """One line per arm (`fixed`, `awnn`, `tpe.r1`, ...): selection trials,
    device-hours, wall-clock, test accuracy, width and the selected config."""
    out = stream or sys.stdout
    protocol = getattr(comparison, "protocol", "holdout")
    cv = f", protocol {protocol}: test acc over the folds' means, best config = the one most folds selected" if protocol != "holdout" else ""
    print(f"\nComparison {comparison.id} (task {comparison.task}, budget {comparison.budget.name}{cv}; "
          f"device-hours = allocated CPUs or GPU share x training time)", file=out)
    w = max([8, *(len(r.strategy) for r in results)])
    header = f"{'strategy':<{w}} {'trials':>7} {'sel dev-h':>10} {'retrain dev-h':>13} {'wall':>8}  {'test acc (mean +- std, n)':<26} {'width':<14} best config"
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in results:
        sel_h = r.selection.total("device_hours")
        ret_h = r.assessment.total("device_hours") if r.assessment else 0.0
        wall = r.selection.wall_seconds + (r.assessment.wall_seconds if r.assessment else 0.0)
        s = r.summary
        acc = f"{100 * s['test_acc_mean']:.2f} +- {100 * s['test_acc_std']:.2f}% (n={s['runs_ok']})" if s else "n/a"
        cfg = _cfg_short(r.selected["config"]) if r.selected else "none selected"
        trials = len(r.selection.outcomes) or r.grid.size  # tpe and random run fewer trials than their grid has configs
        print(f"{r.strategy:<{w}} {trials:>7} {sel_h:>10.4f} {ret_h:>13.4f} {fmt_seconds(wall):>8}  {acc:<26} {r.widths():<14} {cfg}", file=out)
    family = {r.strategy: getattr(r, "family", "") or arm_family(r.strategy) for r in results}
    outcomes = [(r.strategy, o) for r in results for ph in (r.selection, r.assessment) if ph for o in ph.outcomes]
    # ASHA stops selection trials by design: counted apart from the trials that went wrong
    by_design = [o for r in results if family[r.strategy] == "asha" for o in r.selection.outcomes if o.get("status") == "stopped"]
    if by_design:
        per = {r.strategy: sum(1 for o in r.selection.outcomes if o.get("status") == "stopped") for r in results if family[r.strategy] == "asha"}
        print(f"\n{len(by_design)} trials were stopped early by ASHA (their partial compute is counted above): "
              + ", ".join(f"{s} {n}" for s, n in per.items()), file=out)
    problems = [(s, o["key"], o["status"]) for s, o in outcomes if o.get("status") != "ok" and not any(o is e for e in by_design)]
    if problems:
        print(f"\n{len(problems)} trials did not end ok (their compute is counted above): " + ", ".join(f"{s}:{k}={st}" for s, k, st in problems[:12]) + (" ..." if len(problems) > 12 else ""), file=out)
    for line in caveats(comparison.budget.name, results):
        print(f"\nwarning: {line}", file=out)
    print(f"\nMLflow: {comparison.tracking_uri}  (open it with: mlflow ui --backend-store-uri {comparison.tracking_uri})", file=out)


SATURATED = 0.995  # every arm's mean test accuracy at or above this: the task does not tell the arms apart


def caveats(budget: str, results) -> list[str]:
    """What a reader must know before trusting the table: a smoke budget's
    numbers only show that the pipeline runs; arms that all reach ~100% test
    accuracy cannot be told apart by accuracy (only cost compares them)."""
    out = []
    if budget == "smoke":
        out.append("the smoke budget trains 2 epochs a trial: these numbers check that the pipeline runs, they say nothing about the strategies "
                   "(use --budget quick or paper)")
    means = [r.summary.get("test_acc_mean") for r in results if r.summary]
    if len(means) > 1 and all(isinstance(m, float) and m >= SATURATED for m in means):
        out.append(f"every arm's test accuracy is {100 * SATURATED:.1f}% or more: the task is saturated, accuracy cannot rank the arms, "
                   "compare their cost only")
    return out
