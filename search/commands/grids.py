"""awnn grids: every grid file with its task, strategy and number of configs."""
from __future__ import annotations

from tracking.fmt import json_text

from . import command_parser


def add_parser(sub) -> None:
    p = command_parser(sub, "grids", "list the grids (task, strategy, configs)",
                       "List the grid files a sweep can run: task, strategy, number of configs, the paper's epochs.",
                       ["awnn grids", "awnn grids --json", "awnn grids --grid-dir my-grids/"])
    p.add_argument("--json", action="store_true", help="print a JSON list of {task, strategy, configs}")
    p.add_argument("--grid-dir", default=None, help="folder with grid YAML files (default: the packaged search/grids)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..grid import discover_grids

    grids = discover_grids(args.grid_dir)
    rows = [{"task": g.task, "strategy": g.strategy, "configs": g.size} for g in grids]
    if args.json:
        print(json_text(rows))
        return 0
    width = max([len(r["task"]) for r in rows] + [4])
    print(f"{'task':<{width}}  {'strategy':<8}  {'configs':>7}  epochs  file")
    for g in grids:
        print(f"{g.task:<{width}}  {g.strategy:<8}  {g.size:>7}  {g.epochs:>6}  {g.path.name}")
    return 0
