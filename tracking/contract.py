"""The tracking contract: the names this project writes to MLflow and reads
back, in one place (the first step of issue #15; the tag and metric names
themselves still live with their writers, see README "Tracking contract").

Words used throughout the code:

* a *family* is a search method: fixed, awnn, tpe, asha, random (tag
  `awnn.strategy`);
* an *arm* is one run of a family inside a comparison: the family's name, or
  `<family>.r<k>` for repeat k of a stochastic family run `--repeats N`
  times (tag `awnn.arm`; comparisons written before arms existed have none,
  and their arm is the family);
* run kinds (tag `awnn.kind`): a comparison, which holds one sweep per arm
  and phase, which holds the trials.

Trial statuses (tag `awnn.status`): `running` while it trains; one of
TERMINAL once it has ended (`stopped`: ended early on purpose by an early-
stopping scheduler such as ASHA); `interrupted` when its driver stopped
before it ended (the run is KILLED and `--resume` runs the trial again).
Only SELECTABLE trials' scores are used to select a config or to report
test accuracy.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "PHASES", "STATUSES", "TERMINAL", "SELECTABLE", "experiment_name", "default_tracking_uri", "client",
           "redact_uri", "arm_name", "arm_family", "parse_param"]

KINDS = ("comparison", "sweep", "trial")
PHASES = ("selection", "assessment")
TERMINAL = ("ok", "diverged", "width_capped", "failed", "stopped")
STATUSES = (*TERMINAL, "interrupted", "running")
SELECTABLE = ("ok", "width_capped")


def experiment_name(task: str) -> str:
    """The MLflow experiment of a task's comparisons."""
    return f"awnn-{task}"


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else a SQLite file in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def client(uri: str):
    """An MLflow client for `uri` (MLflow is imported on first use)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def redact_uri(uri: str) -> str:
    """The URI without credentials (user:password@), for logs, params and reports."""
    return re.sub(r"://[^/@]+@", "://***@", uri)


def arm_name(family: str, repeat: int, repeats: int) -> str:
    """Repeat `repeat` (1-based) of `family` run `repeats` times: `tpe.r2`, or `tpe` when it runs once."""
    return family if repeats == 1 else f"{family}.r{repeat}"


def arm_family(arm: str) -> str:
    """The family of an arm: `tpe.r2` -> `tpe`, `fixed` -> `fixed`."""
    m = re.fullmatch(r"(.+)\.r\d+", arm)
    return m.group(1) if m else arm


def parse_param(v: str) -> Any:
    """An MLflow param (always a string) back to the int, float or bool it was logged as."""
    for cast in (int, float):
        try:
            return cast(v)
        except (TypeError, ValueError):
            pass
    if v in ("True", "False"):
        return v == "True"
    return v


class Tag:
    """Every MLflow tag name this project writes, one owner (what each holds:
    the README's tracking contract).  Writers and readers use these names,
    never the strings (tests/test_contract.py checks)."""

    ARM = "awnn.arm"
    ARMS = "awnn.arms"
    ATTEMPTS = "awnn.attempts"
    BUDGET = "awnn.budget"
    COMMAND = "awnn.command"
    COMPARISON = "awnn.comparison"
    COMPARISON_KEY = "awnn.comparison_key"
    CONFIG = "awnn.config"
    ERROR = "awnn.error"
    HIT_MAX_WIDTH = "awnn.hit_max_width"
    KEY = "awnn.key"
    KIND = "awnn.kind"
    LAST_ERROR = "awnn.last_error"
    NODE_ID = "awnn.node_id"
    NODE_IP = "awnn.node_ip"
    NODES = "awnn.nodes"
    ORDER = "awnn.order"
    PHASE = "awnn.phase"
    PID = "awnn.pid"
    PROFILE = "awnn.profile"
    REPEAT = "awnn.repeat"
    REPEATS = "awnn.repeats"
    RESUMED_FROM = "awnn.resumed_from"
    RETRIES = "awnn.retries"
    SELECTED_CONFIG = "awnn.selected_config"
    SELECTED_KEY = "awnn.selected_key"
    STATE = "awnn.state"
    STATUS = "awnn.status"
    STOPS_EARLY = "awnn.stops_early"
    STRATEGIES = "awnn.strategies"
    STRATEGY = "awnn.strategy"
    TASK = "awnn.task"
    TRIAL_KEY = "awnn.trial_key"
    WARM_PIDS = "awnn.warm_pids"
    WIDTHS = "awnn.widths"
    WIDTHS_AT_BEST = "awnn.widths_at_best"


TAGS = tuple(v for k, v in vars(Tag).items() if k.isupper())


def tag_equals(*pairs: tuple[str, str]) -> str:
    """An MLflow search filter: every (tag name, value) pair must match."""
    return " and ".join(f"tags.`{name}` = '{value}'" for name, value in pairs)
