"""awnn compare: several strategies on one task, then a summary (and report)."""
from __future__ import annotations

from . import comma_list, command_parser

from .common import add_run_flags, run_comparison


def add_parser(sub) -> None:
    p = command_parser(sub, "compare", "run several strategies' sweeps on one task and summarise their cost and accuracy",
                       "Run each strategy's sweep on one task with one Tuner, print a summary table and write the "
                       "cost report (savings ratios with confidence intervals, any-time curves, widths) from MLflow.",
                       ["awnn compare --task spiralhard --budget quick --strategies fixed,awnn,tpe,asha,random",
                        "awnn compare --task doublemoon --budget smoke",
                        "awnn compare --task spiralhard --budget quick --strategies fixed,awnn --fuse 32",
                        "awnn compare --task spiralhard --strategies fixed,awnn,random --repeats 3 --resume"])
    add_run_flags(p)
    p.add_argument("--strategies", default="fixed,awnn", help="comma-separated strategies: fixed, awnn, tpe, asha, random, awnn-asha, fixedplus (default: fixed,awnn)")
    p.set_defaults(func=run)


def run(args) -> int:
    strategies = comma_list("--strategies", args.strategies)
    return run_comparison(args, strategies, kind="compare")
