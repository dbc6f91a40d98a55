"""awnn sweep: one strategy's grid through selection and re-training."""
from __future__ import annotations

from .common import add_run_flags, run_comparison


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run one grid (selection + re-training) on Ray Tune, tracked in MLflow")
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
