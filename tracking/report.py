"""The cost report: report.md, a self-contained report.html, summary.json
and PNG plots, built from MLflow alone (through tracking.analysis).

    paths = write_report("sqlite:///mlflow.db", "out/", comparison="spiral-20260101-...")

The same tracking store always gives the same files (no timestamps of
generation, seeded bootstrap and orders, PNGs without version metadata), so
a report rebuilt later, or elsewhere against the same server, can be diffed.
"""
from __future__ import annotations

import errno
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from . import analysis as A
from . import contract as C
from .checks import TrackingUnavailable, check_writable, free_space
from .document import build_document  # noqa: F401 - part of this module's API
from .plots import (PLOTS, plot_accuracy_cost, plot_accuracy_width, plot_anytime, plot_budget_curve, plot_cost, plot_projection, plot_truncation,
                    plot_widths)
from .budget_curve import load_budget_records, readable_store
from .files import staged_folder
from .render import render_html, render_markdown
from .summary import SUMMARY_KEYS, STRATEGY_KEYS, headline_metrics, summarize, validate_summary  # noqa: F401 - part of this module's API


# ------------------------------------------------------------------ entry
class ReadBack(NamedTuple):
    """A comparison as read from MLflow once: the runs (`data`), their analysis and summary.json's content
    without its `files` (read_comparison).  `awnn compare` prints its summary from it and writes the report
    from the same read."""
    data: Any
    analysis: Any
    summary: dict[str, Any]


def read_comparison(tracking_uri: str, comparison: str | None = None, experiment: str | None = None,
                    margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500) -> ReadBack:
    """Read a comparison from MLflow and analyse it (the report's numbers); AnalysisError when the store
    lacks it, or is a SQLite file that does not exist (opening it would create it)."""
    if not (0 <= margin < 1):
        raise A.AnalysisError(f"--target-margin: expected a number in [0, 1), found {margin}")
    if tracking_uri.startswith("sqlite:///") and not readable_store(tracking_uri):
        raise A.AnalysisError(f"no tracking store at {C.redact_uri(tracking_uri)}")
    data = A.load_comparison(tracking_uri, comparison=comparison, experiment=experiment)
    a = A.analyze(data, margin=margin, n_boot=n_boot, n_orders=n_orders)
    # + the selection runs' per-epoch records (the verdict against the budget)
    return ReadBack(data, a, summarize(a, load_budget_records(data)))


def write_report(tracking_uri: str, out_dir: str | Path, comparison: str | None = None, experiment: str | None = None,
                 margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500, read: ReadBack | None = None) -> dict[str, Any]:
    """Read the comparison from MLflow and write report.md, report.html,
    summary.json and the PNG plots to `out_dir`.  Returns the paths
    (`report_md`, `report_html`, `summary_json`, `plots`, `out_dir`) and the
    `summary` dict.  Raises analysis.AnalysisError when the store lacks it.
    `read`: the comparison already read (read_comparison, with the same
    settings), so that the caller's summary and the report are one read."""
    if not (0 <= margin < 1):
        raise A.AnalysisError(f"--target-margin: expected a number in [0, 1), found {margin}")
    out = Path(out_dir)
    check_writable(out, f"--out {out}")  # a file, under a file, read-only: one line before any MLflow read
    if read is None:
        read = read_comparison(tracking_uri, comparison=comparison, experiment=experiment, margin=margin, n_boot=n_boot, n_orders=n_orders)
    data, a = read.data, read.analysis
    # every file is built in a staging folder and moved into `out` once all are complete:
    # an interrupted or failed write leaves the previous report whole (tracking/files.py)
    try:
        with staged_folder(out) as stage:
            paths = {name: stage / fname for name, fname in PLOTS.items()}
            plot_anytime(a, paths["anytime"])
            plot_cost(a, paths["cost"])
            plot_widths(a, paths["widths"])
            plot_accuracy_width(a, paths["accuracy_width"])
            plot_projection(a, paths["projection"])
            plot_accuracy_cost(a, paths["accuracy_cost"])
            plot_truncation(a, paths["truncation"])
            summary = dict(read.summary)  # (the caller's copy stays without `files`)
            plot_budget_curve(summary["budget_curve"], paths["budget_curve"])
            summary["files"] = {"report_md": "report.md", "report_html": "report.html", "summary_json": "summary.json", "plots": dict(PLOTS)}
            doc = build_document(a, summary, tracking_hint=C.redact_uri(tracking_uri))
            (stage / "report.md").write_text(render_markdown(doc, PLOTS))
            images = {name: p.read_bytes() for name, p in paths.items()}
            (stage / "report.html").write_text(render_html(doc, images, title=f"AWNN search-cost report: {data.comparison['id']}"))
            (stage / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    except OSError as e:  # the disk filled up (or turned read-only, ...) while the files were written: the staging folder is gone
        why, room = e.strerror or type(e).__name__, free_space(out)
        if e.errno == errno.ENOSPC and room:  # (measured with the staged files removed)
            why += f": {room} there, less than the report needs"
        raise TrackingUnavailable(f"--out {out}: cannot write the report ({why}); nothing in it changed") from None
    paths = {name: out / fname for name, fname in PLOTS.items()}
    return {"out_dir": str(out), "report_md": str(out / "report.md"), "report_html": str(out / "report.html"),
            "summary_json": str(out / "summary.json"), "plots": {k: str(v) for k, v in paths.items()}, "summary": summary}


def description(summary: dict[str, Any]) -> str:
    """The comparison run's description in the MLflow UI (tag `mlflow.note.content`, Markdown):
    the verdict, then what the headline metrics' names and units mean."""
    base = summary.get("baseline")
    units = ("Metrics of this run: `<arm>.test_acc_pct` / `<arm>.test_acc_std_pct` are test accuracy in % (as the terminal and the report; "
             "`<arm>.test_acc_mean` is the same as a fraction), `<arm>.*_device_hours` device-hours, ")
    units += (f"`<arm>.savings_vs_{base}` = {base}'s selection device-hours / the arm's (> 1: the arm is that many times cheaper; "
              f"`<arm>.total_savings_vs_{base}` with re-training; `_lo` / `_hi`: the 95% bootstrap interval)."
              if base else "no savings (the comparison ran neither `fixed` nor `awnn`, the possible baselines).")
    return f"{(summary.get('verdict') or {}).get('text', '')}\n\n{units}\n\nThe report: this run's artifact `report/report.html`."


def read_summary(tracking_uri: str, comparison: str | None = None, experiment: str | None = None,
                 margin: float = 0.01, n_boot: int = 2000, n_orders: int = 500) -> dict[str, Any]:
    """summary.json's content for a comparison, read from MLflow as write_report reads it (same
    defaults, so the same numbers and verdict), without writing files.
    A SQLite file that does not exist raises AnalysisError (opening it would create it)."""
    if not readable_store(tracking_uri):
        raise A.AnalysisError(f"no tracking store at {C.redact_uri(tracking_uri)}")
    return read_comparison(tracking_uri, comparison=comparison, experiment=experiment, margin=margin, n_boot=n_boot,
                           n_orders=n_orders).summary


def log_report(tracking_uri: str, comparison: str, out_dir: str | Path, artifact_path: str = "report",
               summary: dict[str, Any] | None = None) -> str:
    """Log the report folder as an artifact of the comparison's parent run,
    and with the summary: its headline numbers as that run's metrics
    (`<arm>.<name>`, `<arm>.savings_vs_<baseline>`: tracking/summary.headline_metrics),
    its baseline as the tag `awnn.savings_baseline` and its verdict as the
    run's description (`mlflow.note.content`); returns the run's id."""
    from mlflow.entities import Metric as MlflowMetric
    from mlflow.entities import RunTag

    root, _ = A.find_comparison(tracking_uri, comparison=comparison)
    client = C.client(tracking_uri)
    if summary is not None:
        now = int(time.time() * 1000)
        rows = [MlflowMetric(name, value, now, 0) for name, value in headline_metrics(summary)]
        for i in range(0, len(rows), 500):  # MLflow takes at most 1000 metrics per batch
            client.log_batch(root.info.run_id, metrics=rows[i:i + 500], synchronous=True)
        tags = [RunTag(C.Tag.SAVINGS_BASELINE, summary.get("baseline") or "none"), RunTag(C.MlflowTag.NOTE, description(summary))]
        client.log_batch(root.info.run_id, tags=tags, synchronous=True)
    client.log_artifacts(root.info.run_id, str(out_dir), artifact_path)
    return root.info.run_id
