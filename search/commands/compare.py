"""awnn compare: several strategies on one task, then a summary (and report)."""
from __future__ import annotations

from .common import add_run_flags, run_comparison


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="run several strategies' sweeps on one task and summarise their cost and accuracy")
    add_run_flags(p)
    p.add_argument("--strategies", default="fixed,awnn", help="comma-separated strategies: fixed, awnn, tpe, asha, random (default: fixed,awnn)")
    p.set_defaults(func=run)


def run(args) -> int:
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    return run_comparison(args, strategies, kind="compare")
