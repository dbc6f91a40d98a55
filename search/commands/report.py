"""awnn report: the cost report of a comparison, rebuilt from MLflow alone."""
from __future__ import annotations

import sys

from . import command_parser


def add_parser(sub) -> None:
    p = command_parser(
        sub, "report", "write the cost report (report.md, report.html, summary.json, plots) of a comparison from MLflow",
        "Read a comparison back from MLflow and write report.md, a self-contained report.html, "
        "summary.json and PNG plots to --out.  Without --comparison: the newest comparison "
        "in --experiment, or in the whole tracking store.",
        ["awnn report --out report/", "awnn report --experiment awnn-spiralhard --out report/ --log-artifact",
         "awnn report --comparison spiralhard-20261123-101500-ab12 --tracking-uri http://mlflow:5000 --out report/"],
    )
    p.add_argument("--comparison", default=None, metavar="ID", help="comparison id (tag awnn.comparison), as `awnn compare` prints it")
    p.add_argument("--experiment", default=None, metavar="NAME", help="MLflow experiment, e.g. awnn-spiralhard (default: search every experiment)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the report to (created if missing)")
    p.add_argument("--target-margin", type=float, default=0.01, help="cost to target: within this much of the best validation accuracy (default 0.01 = 1 pp)")
    p.add_argument("--log-artifact", action="store_true", help="also log the report folder as an artifact of the comparison's MLflow run")
    p.set_defaults(func=run)


def run(args) -> int:
    from tracking.report import log_report, write_report
    from tracking.contract import default_tracking_uri, tracking_uri_source
    from tracking.store import check_tracking

    uri = args.tracking_uri or default_tracking_uri()
    check_tracking(uri, write=False, source=tracking_uri_source(args.tracking_uri))  # a read-only command: a missing, empty or corrupt store is one line, and is never written
    paths = write_report(uri, args.out, comparison=args.comparison, experiment=args.experiment, margin=args.target_margin)
    if args.log_artifact:
        log_report(uri, paths["summary"]["comparison"], paths["out_dir"], summary=paths["summary"])
    s = paths["summary"]
    print(f"report of comparison {s['comparison']} ({s['task']}, budget {s['budget']}, {s['state']}): {paths['report_html']}", file=sys.stdout)
    print(f"  {paths['report_md']}\n  {paths['summary_json']}", file=sys.stdout)
    if s.get("problems"):
        print(f"  {len(s['problems'])} problems are listed in the report (failed, diverged or missing runs)", file=sys.stdout)
    return 0
