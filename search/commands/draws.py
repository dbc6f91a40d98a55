"""awnn draws: the verdict over several draws (--train-seed) of one comparison, from MLflow alone."""
from __future__ import annotations

import sys

from . import command_parser


def add_parser(sub) -> None:
    p = command_parser(
        sub, "draws", "say whether a comparison's savings hold over draws of its training (--train-seed), from MLflow",
        "A comparison is one draw of its trials' training: how wide AWNN's trials grow, and so its device-hours, moves with "
        "the seed, which its savings CIs (over its trials) do not cover.  Run the same `awnn compare` with several "
        "--train-seed values (for s in 0 1 2 3; do awnn compare --task spiralhard --budget standard --train-seed $s; done), "
        "then this command: it finds the finished comparisons that differ only in their train seed "
        "(in the comparison's MLflow experiment, in every --tracking-uri given) and writes draws.md and draws.json to --out: per draw "
        "the arms' device-hours, savings and test accuracies; per arm in how many draws it was cheaper, the range and the "
        "pooled savings (mean device-hours over the draws).",
        ["awnn draws --out draws/",
         "awnn draws --comparison spiralhard-20261123-101500-ab12 --tracking-uri sqlite:///a.db --tracking-uri sqlite:///b.db --out draws/"],
    )
    p.add_argument("--comparison", default=None, metavar="ID", help="one draw's comparison id (default: the newest comparison in --experiment, "
                   "or in the first store)")
    p.add_argument("--experiment", default=None, metavar="NAME", help="MLflow experiment, e.g. awnn-spiralhard (default: search every experiment)")
    p.add_argument("--tracking-uri", action="append", default=None, metavar="URI",
                   help="MLflow tracking URI; give it again for draws kept in other stores (default: $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write draws.md and draws.json to (created if missing)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracking.contract import default_tracking_uri, tracking_uri_source
    from tracking.draws import write_draws
    from tracking.store import check_tracking

    uris = args.tracking_uri or [default_tracking_uri()]
    for uri in uris:  # read-only: a missing, empty or corrupt store is one line naming it, and is never written
        check_tracking(uri, write=False, source=tracking_uri_source(uri if args.tracking_uri else None))
    paths = write_draws(uris, args.out, comparison=args.comparison, experiment=args.experiment)
    s = paths["summary"]
    print(s["verdict"], file=sys.stdout)
    print(f"  {paths['draws_md']}\n  {paths['draws_json']}", file=sys.stdout)
    if s["set_aside"]:
        print(f"  {len(s['set_aside'])} comparisons in the store were set aside (listed in draws.md)", file=sys.stdout)
    return 0
