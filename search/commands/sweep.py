"""awnn sweep: one strategy's grid through selection and re-training."""
from __future__ import annotations

from .common import add_run_flags, run_comparison


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run one grid (selection + re-training) on Ray Tune, tracked in MLflow")
    add_run_flags(p)
    p.add_argument("--strategy", required=True, help="fixed | awnn | tpe | asha | random")
    p.set_defaults(func=run)


def run(args) -> int:
    return run_comparison(args, [args.strategy], kind="sweep")
