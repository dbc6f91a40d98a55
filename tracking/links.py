"""Where a comparison's runs are in MLflow: run ids, and UI addresses when the store is a server.

The report's "MLflow runs" section and summary.json's `mlflow` key read
this; the analysis reads nothing back from it.  A run's page in the MLflow
UI (2.x and 3.x) is `<server>/#/experiments/<experiment id>/runs/<run id>`.
A SQLite or file store has no address until `mlflow ui` serves it, so its
links are run ids plus the command that serves them.
"""
from __future__ import annotations

from shlex import quote
from typing import Any

from .contract import redact_uri
from .reader import ComparisonData

__all__ = ["server_base", "run_url", "comparison_links"]


def server_base(tracking_uri: str) -> str | None:
    """The UI's base address of an http(s) tracking URI (credentials removed), else None."""
    if not tracking_uri.startswith(("http://", "https://")):
        return None
    return redact_uri(tracking_uri).replace("://***@", "://").rstrip("/")


def run_url(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str | None:
    """The UI page of a run (or of the experiment, without `run_id`); None for a store that is no server."""
    base = server_base(tracking_uri)
    if base is None:
        return None
    return f"{base}/#/experiments/{experiment_id}" + (f"/runs/{run_id}" if run_id else "")


def comparison_links(data: ComparisonData) -> dict[str, Any]:
    """The comparison's experiment, its run and each sweep run (arm x phase), with UI addresses where there are any."""
    c = data.comparison
    exp = str(c.get("experiment_id") or "")
    uri = data.tracking_uri

    def one(run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "url": run_url(uri, exp, run_id)}

    sweeps: dict[str, dict[str, Any]] = {}
    sw = data.sweeps
    for _, row in (sw.iterrows() if len(sw) else ()):
        sweeps.setdefault(str(row["strategy"]), {})[str(row["phase"])] = one(str(row["run_id"]))
    return {
        "experiment_id": exp,
        "experiment_url": run_url(uri, exp) if exp else None,
        "comparison": one(str(c["run_id"])) if c.get("run_id") else None,
        "sweeps": sweeps,
        "serve": None if server_base(uri) else f"mlflow ui --backend-store-uri {quote(redact_uri(uri))}",  # (a path with a space stays one argument)
    }
