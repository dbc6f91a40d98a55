"""What TPE's repeats cost, and what skipping them buys (search/tpe.py, "Repeats").

TPE over a grid's categorical space asks configs it has asked before.  Each
selection trial of an arm trains with the same seed, so a trained repeat is
the same network and score at full cost.  Here Optuna's TPESampler (the
sampler and space a tpe arm uses) runs on synthetic objectives over a
packaged fixed grid, asked and told one trial at a time, for each policy:

    trained     every ask is a trial (repeats trained and told their score:
                the product before 2026-12-08, Ray Tune's OptunaSearch)
    skipped     a repeat is told failed and asked again, after MAX_REPEATS in
                a row an untried config chosen by the seed (the product)

The objective of seed s: a sum of one random effect per key's value plus
noise, fixed per config (TPE's univariate model can learn it; the same
config always scores the same, as an arm's trials do).  Prints one JSON
object as its last line: per grid and policy, the mean over the objectives
of the distinct configs trained, of the asks, and of the rank (1 = the
grid's best) of the best config found.

Usage:  python benchmarks/tpe_repeats.py [--objectives 24] [--grids spiralhard:18,doublemoon:12]
Measured 2026-12-08 (24 objectives): spiralhard 18 trials: trained 14.9 configs, best rank 4.12; skipped 18
configs (38.7 asks), rank 3.71.  doublemoon 12 trials: trained 8.6 configs, rank 3.29; skipped 12 (40.0 asks),
rank 2.42.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402


def objective(grid, keys, configs, seed: int) -> dict:
    r = random.Random(seed)
    effect = {k: {v: r.gauss(0, 1) for v in grid.grid[k]} for k in keys}
    return {c: sum(effect[k][v] for k, v in zip(keys, c)) + 0.5 * r.gauss(0, 1) for c in configs}


def search(policy: str, seed: int, trials: int, scores: dict, keys, space, configs, max_repeats: int) -> tuple[int, int, int]:
    """(distinct configs trained, asks, rank of the best config found)."""
    import optuna

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    trained: dict = {}
    asks = streak = 0
    while (asks < trials) if policy == "trained" else (len(trained) < trials):
        if policy == "skipped" and streak >= max_repeats:
            untried = [c for c in configs if c not in trained]
            study.enqueue_trial(dict(zip(keys, random.Random(f"{seed}:{len(trained)}").choice(untried))))
        t = study.ask(space)
        asks += 1
        c = tuple(t.params[k] for k in keys)
        if c in trained and policy == "skipped":
            study.tell(t, state=optuna.trial.TrialState.FAIL)
            streak += 1
            continue
        streak = 0
        trained[c] = scores[c]
        study.tell(t, scores[c])
    ranking = sorted(scores.values(), reverse=True)
    return len(trained), asks, ranking.index(max(trained.values())) + 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objectives", type=int, default=24)
    ap.add_argument("--grids", default="spiralhard:18,doublemoon:12", help="task:trials,...")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import optuna

    from search.grid import find_grid
    from search.tpe import MAX_REPEATS

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out: dict = {"objectives": args.objectives, "max_repeats": MAX_REPEATS, "grids": {}}
    for item in args.grids.split(","):
        task, trials = item.split(":")
        grid = find_grid(task, "fixed")
        keys = list(grid.grid)
        space = {k: optuna.distributions.CategoricalDistribution(list(v)) for k, v in grid.grid.items()}
        configs = [tuple(c[k] for k in keys) for c in grid.configs()]
        row: dict = {"configs_in_grid": len(configs), "trials": int(trials)}
        for policy in ("trained", "skipped"):
            runs = [search(policy, s, int(trials), objective(grid, keys, configs, 100 + s), keys, space, configs, MAX_REPEATS)
                    for s in range(args.objectives)]
            row[policy] = {"configs_trained": round(statistics.fmean(r[0] for r in runs), 2), "asks": round(statistics.fmean(r[1] for r in runs), 2),
                           "best_rank": round(statistics.fmean(r[2] for r in runs), 2)}
            print(f"{task} {policy}: {row[policy]}", file=sys.stderr)
        out["grids"][task] = row
    print(json_text(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
