"""awnn sweep: one strategy's grid through selection and re-training."""
from __future__ import annotations

from . import command_parser

from .common import add_run_flags, run_comparison


def add_parser(sub) -> None:
    p = command_parser(sub, "sweep", "run one grid (selection + re-training) on Ray Tune, tracked in MLflow",
                       "One strategy's search on Ray Tune: every selection trial, then the selected config re-trained "
                       "R times; every trial is an MLflow run.  Local Ray and ./mlflow.db unless --address / "
                       "--tracking-uri say otherwise; --resume continues the newest unfinished run of the same command.",
                       ["awnn sweep --task spiralhard --strategy awnn --budget quick",
                        "awnn sweep --task doublemoon --strategy tpe --budget smoke --seed 3",
                        "awnn sweep --task nci1 --strategy awnn --data-root ../datasets --address head:6379"])
    add_run_flags(p)
    p.add_argument("--strategy", required=True, help="fixed | awnn | tpe | asha | random")
    p.set_defaults(func=run)


def run(args) -> int:
    import difflib

    from ..errors import OptionError
    from ..strategies import FAMILIES

    if args.strategy not in FAMILIES:
        hint = difflib.get_close_matches(args.strategy, FAMILIES, n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise OptionError(f"--strategy: expected one of {list(FAMILIES)}, found {args.strategy!r}{did}")
    return run_comparison(args, [args.strategy], kind="sweep")
