"""awnn report (placeholder until its issue lands)."""
from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="not available yet")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import UsageError

    raise UsageError("'awnn report' is not implemented yet")
