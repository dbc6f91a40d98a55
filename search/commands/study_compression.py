"""awnn study compression: online compression by an annealed prior on the
rates (the AWNN paper, section 5.3 and Fig. 5).

    awnn study compression [--profiles P1,P2] [--budget B] [run flags]

The paper trains SpiralHard with ReLU6 and an uninformative p(theta); the
prior on the rates is uninformative until epoch 1000, where it introduces
p(lambda_l) = N(0.05, 1) and anneals the standard deviation linearly to 0.1
by epoch 2500.  The width falls from about 800 neurons to 300 with no loss
of test accuracy.

The study runs two AWNN sweeps that differ only in that schedule, each a
one-config grid (selection on the inner split, then R re-training runs of
it; Ray and MLflow, like any sweep):

* compressed: compress_start_epoch S, compress_end_epoch T,
  compress_rate_mean 0.05, compress_std_start 1.0, compress_std_end 0.1
  (awnn/config.py; the schedule is awnn.train.Trainer.rate_prior);
* uncompressed: compress_start_epoch 0 (off).

Both: SpiralHard, ReLU6, weight_prior uninformative (the paper's two
stated choices), rate_prior uninformative until S (set explicitly: the
`authors` profile otherwise puts N(0.01, 0.01^2) on SpiralHard's rate, which
holds the width near 230).  The paper states no more for this experiment;
the rest is this project's choice, from the paper's Table 3 AWNN settings
for SpiralHard: 1 hidden layer (as Fig. 4's ReLU6 runs), batch size 128,
Adam lr 0.01, starting rate 0.01, k 0.9, and the SpiralHard grid's 5000
epochs as the length the paper's epochs 1000 and 2500 are read against.
N is the `authors` profile's n_obs (2000).  `awnn_profile` comes from
--profiles (default authors).

Schedule scaling: S and T are the paper's epochs 1000 and 2500 of Table 3's
5000 for SpiralHard, scaled like the epochs (as search/protocol.py scales LR
milestones): with E the budget's epochs, S = max(1, round(1000 E / 5000))
and T = min(E, max(S, round(2500 E / 5000))).  paper: 1000 -> 2500 of 5000;
quick (60 epochs): 12 -> 30; smoke (2 epochs): 1 -> 1.  The prior acts per
optimiser step, so a shorter run gives it fewer steps than the paper's:
expect less compression at the CPU budgets.

The report reads the re-training runs back from MLflow (their per-epoch
`width_total`, `val_acc` and `train_prior`, and `test_acc`, `best_epoch` and
the width at the best epoch): a table at a few epochs (before S, mid-anneal,
T, the last), the learned width at the selected epoch and the test accuracy
(mean +- std over the R runs), and a verdict line per profile; last, one
JSON line.  The claim (Fig. 5: "the total width is reduced by more than
50% while preserving accuracy") holds when the compressed runs' width is at
most half the uncompressed runs' (both at the selected epoch, mean over the
R runs) and their test accuracy is at most 1 point lower.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from tracking.files import write_atomic
from tracking.fmt import json_text

TASK = "spiralhard"
VARIANTS = ("uncompressed", "compressed")
PAPER_EPOCHS, PAPER_START, PAPER_END = 5000, 1000, 2500  # paper 5.3's epochs, read against Table 3's 5000 for SpiralHard
RATE_MEAN, STD_START, STD_END = 0.05, 1.0, 0.1
PAPER_WIDTHS = (800, 300)  # Fig. 5: about 800 neurons before, 300 after
ACC_TOLERANCE_PP = 1.0  # "no test-accuracy loss": at most 1 point lower (as table1's verdict)
SHRINK_PCT = -50.0  # "reduced by more than 50%"
HISTORIES = ("width_total", "val_acc", "train_prior")
BASE_FIXED = {"model": "awnn", "optimizer": "adam", "batch_size": 128, "lr": 0.01, "quantile_k": 0.9, "rate": 0.01,
              "hidden_layers": 1, "activation": "relu6", "weight_prior": "uninformative", "rate_prior": "uninformative"}


def scaled_schedule(epochs: int) -> tuple[int, int]:
    """The paper's compression epochs (1000 -> 2500 of 5000) for a run of `epochs` epochs."""
    start = max(1, round(PAPER_START * epochs / PAPER_EPOCHS))
    end = min(epochs, max(start, round(PAPER_END * epochs / PAPER_EPOCHS)))
    return start, end


def variant_grid(variant: str, profile: str, start: int, end: int) -> dict[str, Any]:
    """The one-config AWNN grid of a variant (`compressed` or `uncompressed`)."""
    fixed = {**BASE_FIXED, "awnn_profile": profile}
    if variant == "compressed":
        fixed.update(compress_end_epoch=end, compress_rate_mean=RATE_MEAN, compress_std_start=STD_START, compress_std_end=STD_END)
    return {
        "task": TASK,
        "strategy": "awnn",
        "description": f"paper section 5.3 (Fig. 5), {variant}: SpiralHard, ReLU6, uninformative p(theta) "
                       f"[awnn study compression, profile {profile}]",
        "epochs": PAPER_EPOCHS,
        "retrain_runs": 10,
        "fixed": fixed,
        "grid": {"compress_start_epoch": [start if variant == "compressed" else 0]},
    }


def budget_epochs(budget) -> int:
    """The epochs a trial of the study's grid trains under `budget`."""
    from ..grid import grid_from_dict

    return budget.epochs(grid_from_dict(variant_grid("uncompressed", "authors", 0, 0), "<awnn study compression>"))


def write_grid(root: Path, profile: str, variant: str, start: int, end: int) -> Path:
    """A folder holding the variant's grid file, for `--grid-dir`-style lookup."""
    directory = root / f"compression-{profile}-{variant}"
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / f"{TASK}-awnn.yaml", yaml.safe_dump(variant_grid(variant, profile, start, end), sort_keys=False))
    return directory


def read_runs(tracking_uri: str, comparison: str) -> list[dict[str, Any]]:
    """The usable re-training runs of `comparison`, with their per-epoch histories ({epoch: value})."""
    from tracking.contract import SELECTABLE, Metric, Tag, client, experiment_name, tag_equals

    c = client(tracking_uri)
    exp = c.get_experiment_by_name(experiment_name(TASK))
    if exp is None:
        return []
    found = c.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"],
                          filter_string=tag_equals((Tag.COMPARISON, comparison), (Tag.KIND, "trial"), (Tag.PHASE, "assessment")))
    runs: dict[str, dict[str, Any]] = {}
    for r in found:
        key, tags = r.data.tags.get(Tag.TRIAL_KEY, r.info.run_id), r.data.tags
        if tags.get(Tag.STATUS) not in SELECTABLE or key in runs:  # a trial run twice (--resume): the first, as the analysis
            continue
        runs[key] = {
            "run_id": r.info.run_id, "key": key, "test_acc": r.data.metrics.get(Metric.TEST_ACC, math.nan),
            "best_epoch": int(r.data.metrics.get(Metric.BEST_EPOCH, 0)),
            "widths_at_best": json.loads(tags[Tag.WIDTHS_AT_BEST]) if tags.get(Tag.WIDTHS_AT_BEST) else None,
            **{m: {int(h.step): h.value for h in c.get_metric_history(r.info.run_id, m)} for m in HISTORIES},
        }
    return [runs[k] for k in sorted(runs)]


def report_epochs(epochs: int, start: int, end: int) -> list[int]:
    """The epochs the table shows: the last before compression, mid-anneal, the anneal's end, the last."""
    return sorted({e for e in (start - 1, (start + end) // 2, end, epochs) if 1 <= e <= epochs})


def phase_of(epoch: int, start: int, end: int) -> str:
    if epoch < start:
        return "before"
    return "annealing" if epoch < end else ("anneal end" if epoch == end else "after")


def _finite(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _mean(values) -> float:
    v = _finite(values)
    return statistics.fmean(v) if v else math.nan


def _std(values) -> float:
    v = _finite(values)
    return statistics.stdev(v) if len(v) > 1 else (0.0 if v else math.nan)


def variant_row(profile: str, variant: str, comparison: str, schedule: tuple[int, int], runs: list[dict[str, Any]],
                shown: list[int]) -> dict[str, Any]:
    """One variant's figures: the curve at the shown epochs, the learned width and the test accuracy."""
    best = [sum(r["widths_at_best"]) for r in runs if r["widths_at_best"]]
    last = [r["width_total"][max(r["width_total"])] for r in runs if r["width_total"]]
    curve = [{"epoch": e, **{f"{m}_mean": _mean([r[m].get(e) for r in runs]) for m in HISTORIES},
              "width_total_std": _std([r["width_total"].get(e) for r in runs])} for e in shown]
    start, end = schedule if variant == "compressed" else (0, 0)
    return {
        "profile": profile, "variant": variant, "comparison": comparison,
        "compress_start_epoch": start, "compress_end_epoch": end, "runs": len(runs),
        "test_acc_mean": _mean(r["test_acc"] for r in runs), "test_acc_std": _std(r["test_acc"] for r in runs),
        "width_mean": _mean(best), "width_std": _std(best), "final_width_mean": _mean(last), "final_width_std": _std(last),
        "best_epochs": [r["best_epoch"] for r in runs], "curve": curve,
    }


def verdict(rows: list[dict[str, Any]], schedule: tuple[int, int]) -> dict[str, Any]:
    """The claim for one profile: the compressed width is at most half, at no test-accuracy loss."""
    by = {r["variant"]: r for r in rows}
    base, comp = by["uncompressed"], by["compressed"]
    missing = [v for v in VARIANTS if not by[v]["runs"]]
    if missing:  # nothing to compare: no verdict (the command exits 1)
        return {"no_runs": missing, "holds": None}
    width_from, width_to = base["width_mean"], comp["width_mean"]
    change = 100.0 * (width_to - width_from) / width_from if width_from > 0 else math.nan
    acc_pp = 100.0 * (comp["test_acc_mean"] - base["test_acc_mean"])
    curve = {c["epoch"]: c["width_total_mean"] for c in comp["curve"]}
    before = schedule[0] - 1
    halved, kept = bool(change <= SHRINK_PCT), bool(acc_pp >= -ACC_TOLERANCE_PP)
    return {
        "width_from": width_from, "width_to": width_to, "width_change_pct": change, "test_acc_change_pp": acc_pp,
        "compressed_width_before_start": curve.get(before, math.nan), "compressed_width_last": comp["final_width_mean"],
        "width_shrank": bool(width_to < width_from), "width_halved": halved, "accuracy_kept": kept, "holds": halved and kept,
    }


def verdict_line(profile: str, v: dict[str, Any], start: int) -> str:
    if v.get("no_runs"):
        return f"{profile}: no verdict: no usable re-training run in the {' and '.join(v['no_runs'])} sweep{'s' * (len(v['no_runs']) > 1)}"
    how = "shrank" if v["width_shrank"] else "did not shrink"
    return (f"{profile}: compression {how} the width from {v['width_from']:.1f} to {v['width_to']:.1f} "
            f"({v['width_change_pct']:+.1f}%) at a test-accuracy change of {v['test_acc_change_pp']:+.2f} pp "
            f"(uncompressed -> compressed, widths at the selected epoch, mean over the runs; within the compressed runs "
            f"{v['compressed_width_before_start']:.1f} at epoch {start - 1} -> {v['compressed_width_last']:.1f} at the last); "
            f"claim (at least -50% width, at most -{ACC_TOLERANCE_PP:g} pp): {'holds' if v['holds'] else 'does not hold'}")


def _cell(mean: float, std: float) -> str:
    return f"{mean:7.1f} +- {std:<6.1f}"


def print_table(rows: list[dict[str, Any]], verdicts: dict[str, Any], epochs: int, schedule: tuple[int, int], out=None) -> None:
    out = out if out is not None else sys.stdout  # (at call time: the stream the CLI guards, search/signals.py)
    start, end = schedule
    print(f"\nawnn study compression: {TASK}, 1 hidden layer, ReLU6, p(theta) uninformative, {epochs} epochs", file=out)
    print(f"compressed: p(rate) = N({RATE_MEAN}, s) from epoch {start}, s {STD_START} -> {STD_END} by epoch {end} "
          f"(paper: {PAPER_START} -> {PAPER_END} of {PAPER_EPOCHS}; width {PAPER_WIDTHS[0]} -> {PAPER_WIDTHS[1]})", file=out)
    for profile, v in verdicts.items():
        by = {r["variant"]: r for r in rows if r["profile"] == profile}
        header = f"{'epoch':>6} {'phase':<11}" + "".join(f" | {name + ' width':>19} {'val %':>6}" for name in VARIANTS)
        print(f"\nprofile {profile} (re-training runs: " + ", ".join(f"{n} {by[n]['runs']}" for n in VARIANTS) + ")", file=out)
        print(header, file=out)
        print("-" * len(header), file=out)
        for i, e in enumerate(by["compressed"]["curve"]):
            cells = "".join(f" | {_cell(by[n]['curve'][i]['width_total_mean'], by[n]['curve'][i]['width_total_std']):>19} "
                            f"{100 * by[n]['curve'][i]['val_acc_mean']:>6.2f}" for n in VARIANTS)
            print(f"{e['epoch']:>6} {phase_of(e['epoch'], start, end):<11}{cells}", file=out)
        print("-" * len(header), file=out)
        for label, key in (("selected", "width"), ("last epoch", "final_width")):
            print(f"{'width':>6} {label:<11}" + "".join(f" | {_cell(by[n][key + '_mean'], by[n][key + '_std']):>19} {'':>6}"
                                                       for n in VARIANTS), file=out)
        print(f"{'test %':>6} {'':<11}" + "".join(f" | {100 * by[n]['test_acc_mean']:>9.2f} +- {100 * by[n]['test_acc_std']:<6.2f} {'':>6}"
                                                  for n in VARIANTS), file=out)
        print("selected epochs: " + "; ".join(f"{n} {by[n]['best_epochs']}" for n in VARIANTS), file=out)
        print(verdict_line(profile, v, start), file=out)


def run_compression(args, profiles: list[str], settings, root: Path) -> int:
    """Both variants' sweeps for each profile; the table, then one JSON line.  1 when a sweep has no usable run."""
    from ..budget import resolve_budget
    from ..sweep import Comparison
    from .common import options_from, table_options, unwritten_line

    epochs = budget_epochs(resolve_budget(args.budget))
    schedule = scaled_schedule(epochs)
    shown = report_epochs(epochs, *schedule)
    rows, verdicts, failed, comparisons = [], {}, False, []
    for profile in profiles:
        mine = []
        for variant in VARIANTS:
            directory = write_grid(root, profile, variant, *schedule)
            comparison = Comparison(TASK, ["awnn"], args.budget, settings, tracking_uri=args.tracking_uri, resume=args.resume,
                                    grid_dir=str(directory), kind="sweep", options=options_from(args), data_root=args.data_root, table_options=table_options(args),
                                    protocol=args.protocol, train_seed=args.train_seed)
            results = comparison.run()
            comparisons.append(comparison)
            runs = read_runs(comparison.tracking_uri, comparison.id) if comparison.id else []
            failed |= not runs or (bool(results) and results[0].selected is None)
            mine.append(variant_row(profile, variant, str(comparison.id), schedule, runs, shown))
            print(f"study compression: {profile} {variant} done (sweep {comparison.id})", file=sys.stderr, flush=True)
        rows += mine
        verdicts[profile] = verdict(mine, schedule)
    print_table(rows, verdicts, epochs, schedule)
    print(json_text({"claim": "compression", "budget": args.budget, "profiles": profiles, "task": TASK, "epochs": epochs,
                      "schedule": {"start": schedule[0], "end": schedule[1], "rate_mean": RATE_MEAN, "std_start": STD_START,
                                   "std_end": STD_END},
                      "paper": {"epochs": PAPER_EPOCHS, "start": PAPER_START, "end": PAPER_END, "width_from": PAPER_WIDTHS[0],
                                "width_to": PAPER_WIDTHS[1]},
                      "rows": rows, "verdicts": verdicts}))
    lacking = unwritten_line("study", comparisons)  # (the rows above were read back from MLflow: incomplete)
    if lacking:
        print(lacking, file=sys.stderr)
    return 1 if failed or lacking else 0
